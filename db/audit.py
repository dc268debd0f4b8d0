"""The append-only, keyed hash chain of the audit log: who changed what, when, from what to what.

Each entry carries HMAC-SHA-256(key, previous hash + its content). The key is kept outside the
database (`CLINCONSENSUS_AUDIT_KEY`, else the key file, created with mode 0600 on first use), so
someone who can write the database but not read the key cannot rebuild a chain that verifies.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, text
from sqlmodel import Session, select

from db.config import DEFAULT_DATA_DIR, get_settings
from db.errors import Said
from db.models import AuditLog, utcnow

GENESIS_HASH = "0" * 64
#: Every entity and action name the log holds (readers name each in their language; a test checks the writers).
AUDIT_ENTITIES = (
    "adjudication",
    "assignment",
    "calibration_sample",
    "case",
    "cases",
    "check",
    "feedback",
    "judge",
    "judge_decision",
    "judge_run",
    "label",
    "labels",
    "leaderboard_snapshot",
    "login",
    "response",
    "responses",
    "rubric",
    "user",
)
AUDIT_ACTIONS = (
    "activate",
    "approve",
    "assign",
    "cancel",
    "cancelled",
    "close",
    "create",
    "deactivate",
    "failed",
    "finished",
    "import",
    "label",
    "link_identity",
    "lock",
    "open",
    "reassign",
    "replace",
    "reset_password",
    "return",
    "running",
    "submit",
    "unlock",
    "update",
)
#: PostgreSQL advisory lock that serialises writers of the chain.
AUDIT_LOCK_KEY = 7420211
KEY_ENV = "CLINCONSENSUS_AUDIT_KEY"
KEY_FILE_ENV = "CLINCONSENSUS_AUDIT_KEY_FILE"
DEFAULT_KEY_FILE = DEFAULT_DATA_DIR / "audit.key"
_key_cache: dict[Path, bytes] = {}


def audit_key_file() -> Path:
    return Path(get_settings().audit_key_file or DEFAULT_KEY_FILE).resolve()


def audit_key() -> bytes:
    """The chain's key: `CLINCONSENSUS_AUDIT_KEY`, else the key file (created on first use, mode 0600)."""
    from_env = get_settings().audit_key
    if from_env:
        return from_env.encode("utf-8")
    path = audit_key_file()
    if path not in _key_cache:
        _key_cache[path] = _read_or_create_key(path)
    return _key_cache[path]


def _read_or_create_key(path: Path) -> bytes:
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_text(encoding="ascii").strip()
        if not key:
            raise RuntimeError(f"the audit key file {path.name} is empty") from None
        return key.encode("ascii")
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return _read_or_create_key(path)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(secrets.token_hex(32) + "\n")
    return _read_or_create_key(path)


def _canonical_time(at: datetime) -> str:
    # Both databases hand the timestamp back in UTC; seconds precision to the microsecond.
    return at.replace(tzinfo=None).isoformat(timespec="microseconds")


def entry_hash(
    *,
    prev_hash: str,
    at: datetime,
    actor: str,
    action: str,
    entity: str,
    entity_key: str,
    before: Any,
    after: Any,
    key: bytes | None = None,
) -> str:
    payload = json.dumps(
        [prev_hash, _canonical_time(at), actor, action, entity, entity_key, before, after],
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hmac.new(key if key is not None else audit_key(), payload.encode("utf-8"), hashlib.sha256).hexdigest()


class AuditWriter:
    """Appends entries within the caller's transaction, continuing the chain from its last entry.

    Writers are serialised by the database's write lock (SQLite) or by an advisory lock
    (PostgreSQL), so two transactions never both extend the same tail.
    """

    def __init__(self, session: Session, actor: str) -> None:
        self.session = session
        self.actor = actor
        self._tail: str | None = None

    def _last_hash(self) -> str:
        if self._tail is None:
            bind = self.session.get_bind()
            if bind.dialect.name == "postgresql":
                self.session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": AUDIT_LOCK_KEY})
            last = self.session.exec(select(AuditLog.hash).order_by(AuditLog.id.desc()).limit(1)).first()
            self._tail = last or GENESIS_HASH
        return self._tail

    def record(self, *, action: str, entity: str, entity_key: str, before: Any = None, after: Any = None) -> AuditLog:
        prev = self._last_hash()
        at = utcnow()
        entry = AuditLog(
            at=at,
            actor=self.actor,
            action=action,
            entity=entity,
            entity_key=entity_key,
            before=before,
            after=after,
            prev_hash=prev,
            hash=entry_hash(
                prev_hash=prev,
                at=at,
                actor=self.actor,
                action=action,
                entity=entity,
                entity_key=entity_key,
                before=before,
                after=after,
            ),
        )
        self.session.add(entry)
        self._tail = entry.hash
        return entry

    def record_many(self, rows: list[dict[str, Any]]) -> None:
        """Bulk append (importers): rows of action/entity/entity_key/before/after."""
        prev = self._last_hash()
        values = []
        key = audit_key()
        for row in rows:
            at = utcnow()
            digest = entry_hash(prev_hash=prev, at=at, actor=self.actor, key=key, **row)
            values.append({"at": at, "actor": self.actor, "prev_hash": prev, "hash": digest, **row})
            prev = digest
        if values:
            self.session.execute(AuditLog.__table__.insert(), values)
        self._tail = prev


def record(session: Session, actor: str, **entry: Any) -> AuditLog:
    """Append one entry (see `AuditWriter.record`)."""
    return AuditWriter(session, actor).record(**entry)


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    entries: int
    first_bad_id: int | None = None
    reason: str = ""


def verify_chain(session: Session, *, batch: int = 10_000) -> ChainReport:
    """Recompute every keyed hash in order; report the first entry whose content or link is wrong."""
    prev = GENESIS_HASH
    count = 0
    last_id = 0
    key = audit_key()
    while True:
        rows = session.exec(select(AuditLog).where(AuditLog.id > last_id).order_by(AuditLog.id).limit(batch)).all()
        if not rows:
            return ChainReport(ok=True, entries=count)
        for row in rows:
            count += 1
            if row.prev_hash != prev:
                return ChainReport(
                    False,
                    count,
                    row.id,
                    Said("prev_hash does not match the entry before it", "language.audit_broken_link"),
                )
            expected = entry_hash(
                prev_hash=row.prev_hash,
                at=row.at,
                actor=row.actor,
                action=row.action,
                entity=row.entity,
                entity_key=row.entity_key,
                before=row.before,
                after=row.after,
                key=key,
            )
            if expected != row.hash:
                return ChainReport(
                    False, count, row.id, Said("content does not match its hash", "language.audit_broken_content")
                )
            prev = row.hash
            last_id = row.id if row.id is not None else last_id


@dataclass(frozen=True)
class AuditHead:
    """Where the chain stands: how many entries and the hash of the last (recorded in export manifests)."""

    count: int
    hash: str

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "hash": self.hash}


def audit_head(session: Session) -> AuditHead:
    count = int(session.exec(select(func.count()).select_from(AuditLog)).one())
    last = session.exec(select(AuditLog.hash).order_by(AuditLog.id.desc()).limit(1)).first()
    return AuditHead(count, last or GENESIS_HASH)


def check_anchor(session: Session, head: AuditHead) -> str | None:
    """None when the log still contains the anchored head as its `count`-th entry; else why not.

    A database rolled back to before the anchor (a restored older copy) or a log cut short has
    fewer entries or another entry at that place.
    """
    if head.count == 0:
        return None
    present = audit_head(session).count
    if present < head.count:
        return (
            f"the log has {present} entries but an export recorded {head.count}: "
            "the database was rolled back or the log cut short"
        )
    entry = session.exec(select(AuditLog.hash).order_by(AuditLog.id).offset(head.count - 1).limit(1)).first()
    if entry != head.hash:
        return f"entry {head.count} of the log is not the one an export recorded: the log was rewritten"
    return None
