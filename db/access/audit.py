"""The append-only, keyed hash chain of the audit log: who changed what, when, from what to what.

Each entry carries HMAC-SHA-256(key, previous hash + its content). The key is kept outside the
database (`CLINCONSENSUS_AUDIT_KEY`, else the key file beside the database, created with mode 0600
only for an empty chain: db/access/audit_key.py), so someone who can write the database but not read the
key cannot rebuild a chain that verifies. Every writer also reseals the chain's head (db/access/audit_seal.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import orjson
from sqlalchemy import Text, cast, func, select as core_select, text
from sqlmodel import Session, col, select

from db.access.audit_key import audit_key, writer_key
from db.access.audit_seal import GENESIS_HASH, sealed_entries, write_seal
from db.rules.errors import Said
from db.store.models import AuditLog, table_of, utcnow

#: Every entity and action name the log holds (readers name each in their language; a test checks the writers).
AUDIT_ENTITIES = (
    "adjudication",
    "adjudication_opening",
    "assignment",
    "calibration_sample",
    "case",
    "case_digests",
    "cases",
    "check",
    "disagreement_draw",
    "export",
    "feedback",
    "judge",
    "judge_decision",
    "judge_decisions",
    "judge_run",
    "label",
    "labels",
    "leaderboard_snapshot",
    "reference_answer",
    "references",
    "login",
    "response",
    "response_digests",
    "responses",
    "rubric",
    "rubric_draft",
    "session",
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
    "export",
    "failed",
    "finished",
    "import",
    "label",
    "link_identity",
    "lock",
    "open",
    "override_freeze",
    "reassign",
    "replace",
    "reset_password",
    "return",
    "revoke",
    "running",
    "submit",
    "unlock",
    "update",
)
#: PostgreSQL advisory lock that serialises writers of the chain.
AUDIT_LOCK_KEY = 7420211
#: Entries read at a time (a bulk entry can hold 20,000 label rows: keep this small).
CHAIN_BATCH = 8


def _canonical_time(at: datetime) -> str:
    # Both databases hand the timestamp back in UTC; seconds precision to the microsecond.
    return at.replace(tzinfo=None).isoformat(timespec="microseconds")


def _content(
    prev_hash: str, at: datetime, actor: str, action: str, entity: str, entity_key: str, before: Any, after: Any
) -> list[Any]:
    return [prev_hash, _canonical_time(at), actor, action, entity, entity_key, before, after]


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
    """The definition: HMAC-SHA-256 of the content as sorted, compact, UTF-8 JSON (`json.dumps`)."""
    payload = json.dumps(
        _content(prev_hash, at, actor, action, entity, entity_key, before, after),
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hmac.new(key if key is not None else audit_key(), payload.encode("utf-8"), hashlib.sha256).hexdigest()


def _fast_entry_hash(row: LogEntry, key: bytes) -> str | None:
    """`entry_hash` of a logged entry through orjson (several times faster on the bulk entries).

    orjson writes the same bytes as the definition for what JSON decodes to (sorted keys, compact, raw
    UTF-8), floats aside; a caller that finds a mismatch asks the definition before calling an entry broken.
    """
    content = _content(row.prev_hash, row.at, row.actor, row.action, row.entity, row.entity_key, row.before, row.after)
    try:
        payload = orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return None
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


class AuditWriter:
    """Appends entries within the caller's transaction, continuing the chain from its last entry.

    Writers are serialised by the database's write lock (SQLite) or by an advisory lock
    (PostgreSQL), so two transactions never both extend the same tail. Each write reseals the head
    (count and last hash). Without the key for a chain that has entries, nothing is written
    (`AuditKeyMissing`, raised before any entry).
    """

    def __init__(self, session: Session, actor: str) -> None:
        self.session = session
        self.actor = actor
        self._tail: str | None = None
        self._entries = 0
        self._key = b""

    def _last_hash(self) -> str:
        if self._tail is None:
            bind = self.session.get_bind()
            if bind.dialect.name == "postgresql":
                self.session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": AUDIT_LOCK_KEY})
            last = self.session.exec(select(col(AuditLog.hash)).order_by(col(AuditLog.id).desc()).limit(1)).first()
            self._key = writer_key(chain_is_empty=last is None)
            sealed = sealed_entries(self.session)
            # The sealed count, not the entries present: a log cut short stays visibly short after this write.
            self._entries = sealed if sealed is not None else _count(self.session)
            self._tail = last or GENESIS_HASH
        return self._tail

    def _advance(self, tail: str, added: int) -> None:
        self._tail = tail
        self._entries += added
        write_seal(self.session, entries=self._entries, last_hash=tail, key=self._key)

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
                key=self._key,
            ),
        )
        self.session.add(entry)
        self._advance(entry.hash, 1)
        return entry

    def record_many(self, rows: list[dict[str, Any]]) -> None:
        """Bulk append (importers): rows of action/entity/entity_key/before/after."""
        if not rows:
            return
        prev = self._last_hash()
        values = []
        for row in rows:
            at = utcnow()
            digest = entry_hash(prev_hash=prev, at=at, actor=self.actor, key=self._key, **row)
            values.append({"at": at, "actor": self.actor, "prev_hash": prev, "hash": digest, **row})
            prev = digest
        self.session.execute(table_of(AuditLog).insert(), values)
        self._advance(prev, len(values))


def _count(session: Session) -> int:
    return int(session.exec(select(func.count()).select_from(AuditLog)).one())


def record(session: Session, actor: str, **entry: Any) -> AuditLog:
    """Append one entry (see `AuditWriter.record`)."""
    return AuditWriter(session, actor).record(**entry)


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    entries: int
    first_bad_id: int | None = None
    reason: str = ""


_LOG = table_of(AuditLog)


class LogEntry(NamedTuple):
    id: int
    at: datetime
    actor: str
    action: str
    entity: str
    entity_key: str
    before: Any
    after: Any
    prev_hash: str
    hash: str


def _decoded(document: str | None) -> Any:
    # The standard reader, not orjson's: that one turns integers beyond 64 bits into floats (another hash).
    return None if document is None else json.loads(document)


def log_entries(session: Session, *, batch: int = CHAIN_BATCH) -> Iterator[LogEntry]:
    """Every entry in order, streamed a few at a time (bounded memory however large the entries).

    `before` and `after` are read as their stored text and decoded here, without the column type's
    reader and its per-value overhead.
    """
    # Options on this statement only: set on the connection they would stay for the rest of its transaction.
    streamed = {"stream_results": True, "yield_per": batch}
    columns = [
        _LOG.c.id,
        _LOG.c.at,
        _LOG.c.actor,
        _LOG.c.action,
        _LOG.c.entity,
        _LOG.c.entity_key,
        cast(_LOG.c.before, Text),
        cast(_LOG.c.after, Text),
        _LOG.c.prev_hash,
        _LOG.c.hash,
    ]
    statement = core_select(*columns).order_by(_LOG.c.id)
    for part in session.connection().execute(statement, execution_options=streamed).partitions(batch):
        for row in part:
            entry_id, at, actor, action, entity, entity_key, before, after, prev_hash, hash_ = row
            yield LogEntry(
                entry_id, at, actor, action, entity, entity_key, _decoded(before), _decoded(after), prev_hash, hash_
            )


class ChainCheck:
    """Feeds on entries in order; remembers the first whose content or link is wrong."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.prev = GENESIS_HASH
        self.entries = 0
        self.first_bad_id: int | None = None
        self.reason = ""

    def feed(self, row: LogEntry) -> None:
        self.entries += 1
        if self.first_bad_id is None:
            if row.prev_hash != self.prev:
                self._broken(row, Said("prev_hash does not match the entry before it", "language.audit_broken_link"))
            elif row.hash != _fast_entry_hash(row, self.key) and row.hash != self._defined_hash(row):
                self._broken(row, Said("content does not match its hash", "language.audit_broken_content"))
        self.prev = row.hash

    def _defined_hash(self, row: LogEntry) -> str:
        return entry_hash(
            prev_hash=row.prev_hash,
            at=row.at,
            actor=row.actor,
            action=row.action,
            entity=row.entity,
            entity_key=row.entity_key,
            before=row.before,
            after=row.after,
            key=self.key,
        )

    def _broken(self, row: LogEntry, reason: str) -> None:
        self.first_bad_id, self.reason = row.id, reason

    def report(self) -> ChainReport:
        return ChainReport(self.first_bad_id is None, self.entries, self.first_bad_id, self.reason)


def verify_chain(session: Session) -> ChainReport:
    """Recompute every keyed hash in order; report the first entry whose content or link is wrong."""
    check = ChainCheck(audit_key())
    for row in log_entries(session):
        check.feed(row)
        if check.first_bad_id is not None:
            break
    return check.report()


@dataclass(frozen=True)
class AuditHead:
    """Where the chain stands: how many entries and the hash of the last (recorded in export manifests)."""

    count: int
    hash: str

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "hash": self.hash}


def audit_head(session: Session) -> AuditHead:
    count = int(session.exec(select(func.count()).select_from(AuditLog)).one())
    last = session.exec(select(col(AuditLog.hash)).order_by(col(AuditLog.id).desc()).limit(1)).first()
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
    entry = session.exec(select(col(AuditLog.hash)).order_by(col(AuditLog.id)).offset(head.count - 1).limit(1)).first()
    if entry != head.hash:
        return f"entry {head.count} of the log is not the one an export recorded: the log was rewritten"
    return None
