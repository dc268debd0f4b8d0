"""The sealed head of the audit chain (`audit_seal`): entries deleted from the end of the log are noticed.

The chain alone cannot tell a log cut short from a log that ended there: every remaining entry still
verifies. So each writer also rewrites one row holding the number of entries and the last hash, with an
HMAC of both under the chain's key, in the same transaction as its entries. Someone who deletes the
last entries must lower that row to match, which takes the key. What it cannot catch: a whole database
restored from an older copy (row and log from the same moment) — the anchors in export manifests do.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import cast

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection, CursorResult
from sqlmodel import Session

from db.access.audit_key import readable_audit_key
from db.store.models import AuditLog, AuditSeal, table_of

SEAL_ID = 1
#: The `prev_hash` of the first entry, and the head of an empty log.
GENESIS_HASH = "0" * 64
_SEAL = table_of(AuditSeal)
_LOG = table_of(AuditLog)


def seal_of(entries: int, last_hash: str, key: bytes) -> str:
    payload = json.dumps(["audit-head", int(entries), last_hash], separators=(",", ":"))
    return hmac.new(key, payload.encode("ascii"), hashlib.sha256).hexdigest()


def sealed_entries(session: Session) -> int | None:
    """The number of entries the seal row says the log has (None without a row)."""
    return session.execute(select(_SEAL.c.entries).where(_SEAL.c.id == SEAL_ID)).scalar_one_or_none()


def write_seal(session: Session, *, entries: int, last_hash: str, key: bytes) -> None:
    values = {"entries": entries, "hash": last_hash, "seal": seal_of(entries, last_hash, key)}
    result = cast(CursorResult, session.execute(update(_SEAL).where(_SEAL.c.id == SEAL_ID).values(**values)))
    changed = result.rowcount
    if not changed:
        session.execute(insert(_SEAL).values(id=SEAL_ID, **values))


def seal_existing_log(connection: Connection) -> None:
    """The seal row of a log written before seals existed (sealed when the key can be read)."""
    entries = connection.execute(select(func.count()).select_from(_LOG)).scalar_one()
    last = connection.execute(select(_LOG.c.hash).order_by(_LOG.c.id.desc()).limit(1)).scalar_one_or_none()
    last_hash = last or GENESIS_HASH
    key = readable_audit_key() if entries else None
    seal = seal_of(entries, last_hash, key) if key is not None else None
    connection.execute(insert(_SEAL).values(id=SEAL_ID, entries=entries, hash=last_hash, seal=seal))


def seal_problem(session: Session, *, entries: int, last_hash: str, key: bytes) -> str | None:
    """Why the seal row does not vouch for a log of `entries` entries ending in `last_hash`; None when it does."""
    row = session.execute(select(_SEAL.c.entries, _SEAL.c.hash, _SEAL.c.seal).where(_SEAL.c.id == SEAL_ID)).first()
    if row is None:
        return None if entries == 0 else "audit head: the seal row is missing (deleted?)"
    if row.seal is None:
        if row.entries == entries == 0:
            return None
        return "audit head: not sealed yet (the next audited change seals it)"
    if not hmac.compare_digest(row.seal, seal_of(row.entries, row.hash, key)):
        return "audit head: the seal does not match its count and hash (rewritten without the key)"
    if row.entries != entries or row.hash != last_hash:
        missing = row.entries - entries
        what = f"{missing} entries missing from the end of the log" if missing > 0 else "the log and its head differ"
        return f"audit head: sealed at {row.entries} entries, the log has {entries}: {what}"
    return None
