"""Leaderboard snapshots: a frozen, dated record of a published leaderboard (docs/REFERENCE.md §3.7).

A snapshot is written once and never changed: its name is unique, and a second freeze under the
same name is refused. Only an admin freezes; each freeze is an audit entry holding the payload's
hash (of its canonical JSON, the payload as a whole, whatever fields it carries). Every read
(`show`, `diff`, `export leaderboard`, the page) checks the stored payload against that hash, and so
does `audit verify`: a snapshot altered in the table afterwards is refused in one line naming it.
"""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import Session, col, select

from db.access.audit import record
from db.access.audit_digest import canonical_json, payload_hash
from db.access.policies import LeaderboardPolicy, SystemActor, authorize
from db.rules.errors import NotFound, ValidationFailed
from db.store.models import AuditLog, LeaderboardSnapshot, User, utcnow

NAME_LIMIT = 128
#: The audit log's entity of a freeze.
SNAPSHOT_ENTITY = "leaderboard_snapshot"


def _checked_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > NAME_LIMIT or any(ord(char) < 32 for char in name):
        raise ValidationFailed(
            f"snapshot name {name!r}: give 1 to {NAME_LIMIT} printable characters", key="errors.snapshot_name"
        )
    return name


def require_new_name(session: Session, name: str) -> str:
    """The cleaned name, refused when empty, too long or taken (checked before the leaderboard is computed)."""
    name = _checked_name(name)
    if session.exec(select(LeaderboardSnapshot.id).where(LeaderboardSnapshot.name == name)).first() is not None:
        raise ValidationFailed(
            f"leaderboard snapshot {name!r} already exists; snapshots are never overwritten",
            key="errors.snapshot_exists",
            params={"name": name},
        )
    return name


def freeze_snapshot(
    session: Session, *, actor: User | SystemActor, name: str, payload: dict[str, Any]
) -> LeaderboardSnapshot:
    """Store `payload` as snapshot `name` (the caller commits); refused when the name is taken."""
    actor = authorize(session, actor, LeaderboardPolicy.manage())
    name = require_new_name(session, name)
    # Stored as its canonical JSON reads back, so the hash logged is the hash of what every read finds.
    payload = json.loads(canonical_json(payload))
    snapshot = LeaderboardSnapshot(name=name, created_at=utcnow(), created_by=actor.username, payload=payload)
    session.add(snapshot)
    record(
        session,
        actor.username,
        action="create",
        entity=SNAPSHOT_ENTITY,
        entity_key=name,
        before=None,
        after={"name": name, "models": len(payload.get("models", [])), "payload_sha256": payload_hash(payload)},
    )
    session.flush()
    return snapshot


def audited_snapshots(session: Session) -> dict[str, tuple[str | None, str]]:
    """What the audit log says of every snapshot frozen: name -> (payload sha256, who froze it)."""
    logged: dict[str, tuple[str | None, str]] = {}
    for name, after, actor in session.exec(
        select(col(AuditLog.entity_key), col(AuditLog.after), col(AuditLog.actor))
        .where(col(AuditLog.entity) == SNAPSHOT_ENTITY, col(AuditLog.action) == "create")
        .order_by(col(AuditLog.id))
    ):
        logged[name] = ((after or {}).get("payload_sha256"), actor)
    return logged


def snapshot_problem(snapshot: LeaderboardSnapshot, logged: dict[str, tuple[str | None, str]]) -> str | None:
    """Why a stored snapshot is not the one the audit log recorded (None: it is)."""
    entry = logged.get(snapshot.name)
    if entry is None:
        return f"leaderboard snapshot {snapshot.name!r}: not in the audit log; refusing to use it"
    sha, actor = entry
    try:
        stored = payload_hash(snapshot.payload)
    except (TypeError, ValueError):
        stored = None
    if sha != stored:
        return f"leaderboard snapshot {snapshot.name!r}: its payload differs from the audited hash; refusing to use it"
    if actor != snapshot.created_by:
        return f"leaderboard snapshot {snapshot.name!r}: frozen by {actor} in the audit log, not {snapshot.created_by}"
    return None


def _refusal(snapshot: LeaderboardSnapshot, logged: dict[str, tuple[str | None, str]]) -> ValidationFailed | None:
    problem = snapshot_problem(snapshot, logged)
    if problem is None:
        return None
    return ValidationFailed(problem, key="errors.snapshot_tampered", params={"name": snapshot.name})


def _verified(session: Session, snapshot: LeaderboardSnapshot) -> LeaderboardSnapshot:
    refusal = _refusal(snapshot, audited_snapshots(session))
    if refusal is not None:
        raise refusal
    return snapshot


def list_snapshots(
    session: Session, *, actor: User | SystemActor
) -> tuple[list[LeaderboardSnapshot], list[ValidationFailed]]:
    """Every snapshot that matches its audit entry, oldest first, and a refusal for each that does not."""
    authorize(session, actor, LeaderboardPolicy.manage())
    logged = audited_snapshots(session)
    good, problems = [], []
    for snapshot in session.exec(select(LeaderboardSnapshot).order_by(col(LeaderboardSnapshot.id))).all():
        refusal = _refusal(snapshot, logged)
        if refusal is None:
            good.append(snapshot)
        else:
            problems.append(refusal)
    return good, problems


def get_snapshot(session: Session, name: str, *, actor: User | SystemActor) -> LeaderboardSnapshot:
    """Snapshot `name`, refused unless its payload is the one the audit log recorded."""
    authorize(session, actor, LeaderboardPolicy.manage())
    found = session.exec(select(LeaderboardSnapshot).where(LeaderboardSnapshot.name == name)).first()
    if found is None:
        raise NotFound(f"no leaderboard snapshot named {name!r}", key="errors.snapshot_unknown", params={"name": name})
    return _verified(session, found)


def newest_snapshot(session: Session, *, actor: User | SystemActor) -> LeaderboardSnapshot:
    """The newest snapshot, refused unless its payload is the one the audit log recorded."""
    authorize(session, actor, LeaderboardPolicy.manage())
    found = session.exec(select(LeaderboardSnapshot).order_by(col(LeaderboardSnapshot.id).desc()).limit(1)).first()
    if found is None:
        raise NotFound("no leaderboard snapshot yet: freeze one first", key="errors.snapshot_none")
    return _verified(session, found)
