"""Digests the audit log keeps instead of whole texts and hashes, so it stays small and replay can compare.

A digest is the first 32 hex digits of SHA-256 over a canonical JSON form. It names a value without
holding it: the log never holds a password hash, and a response text or 30 judge decisions cost one
short string. Writers log the digest of what they stored; `audit verify` recomputes it from the table.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

#: The columns of a case whose digest the log keeps (its whole stored record but the id and time).
CASE_COLUMNS = (
    "difficulty",
    "task",
    "task_labels",
    "subject",
    "subject_labels",
    "user_role",
    "clinical_context",
    "user_request",
    "register",
    "extra",
)
DIGEST_HEX = 32


def digest(value: Any) -> str:
    payload = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:DIGEST_HEX]


def password_digest(password_hash: str | None) -> str | None:
    """Names a password hash without holding it (None: the account has no password)."""
    return None if not password_hash else digest(["password", password_hash])


def case_digest(values: Mapping[str, Any]) -> str:
    return digest([values.get(column) for column in CASE_COLUMNS])


def response_digest(text: str) -> str:
    return digest(["response", text])


#: Separates one judge's decisions in a digest's input (SQL joins them with it too: CHAR(31) / CHR(31)).
DECISION_SEPARATOR = "\x1f"


def decisions_digest(decisions: Iterable[tuple[str, bool]]) -> str:
    """One judge's decisions on one response, (criterion_id, met) in any order."""
    return joined_decisions_digest(DECISION_SEPARATOR.join(f"{cid}:{int(bool(met))}" for cid, met in decisions))


def joined_decisions_digest(joined: str) -> str:
    """The same from `criterion_id:0|1` items joined by DECISION_SEPARATOR in any order (as the database aggregates)."""
    items = sorted(joined.split(DECISION_SEPARATOR)) if joined else []
    return hashlib.sha256(DECISION_SEPARATOR.join(items).encode("utf-8")).hexdigest()[:DIGEST_HEX]


def canonical_json(payload: Any) -> str:
    """A document's canonical JSON: sorted keys, no spaces, no NaN (a leaderboard snapshot's payload)."""
    return json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def payload_hash(payload: Any) -> str:
    """sha256 of a document's canonical JSON, whole (the hash a snapshot's freeze logs)."""
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
