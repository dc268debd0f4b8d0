"""The append-only, hash-chained audit log: who changed what, when, from what to what."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, select

from db.models import AuditLog, utcnow

GENESIS_HASH = "0" * 64
#: PostgreSQL advisory lock that serialises writers of the chain.
AUDIT_LOCK_KEY = 7420211


def _canonical_time(at: datetime) -> str:
    # Both databases hand the timestamp back in UTC; seconds precision to the microsecond.
    return at.replace(tzinfo=None).isoformat(timespec="microseconds")


def entry_hash(
    *, prev_hash: str, at: datetime, actor: str, action: str, entity: str, entity_key: str, before: Any, after: Any
) -> str:
    payload = json.dumps(
        [prev_hash, _canonical_time(at), actor, action, entity, entity_key, before, after],
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


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
        for row in rows:
            at = utcnow()
            digest = entry_hash(prev_hash=prev, at=at, actor=self.actor, **row)
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
    """Recompute every hash in order; report the first entry whose content or link is wrong."""
    prev = GENESIS_HASH
    count = 0
    last_id = 0
    while True:
        rows = session.exec(select(AuditLog).where(AuditLog.id > last_id).order_by(AuditLog.id).limit(batch)).all()
        if not rows:
            return ChainReport(ok=True, entries=count)
        for row in rows:
            count += 1
            if row.prev_hash != prev:
                return ChainReport(False, count, row.id, "prev_hash does not match the entry before it")
            expected = entry_hash(
                prev_hash=row.prev_hash,
                at=row.at,
                actor=row.actor,
                action=row.action,
                entity=row.entity,
                entity_key=row.entity_key,
                before=row.before,
                after=row.after,
            )
            if expected != row.hash:
                return ChainReport(False, count, row.id, "content does not match its hash")
            prev = row.hash
            last_id = row.id
