"""Leaderboard snapshots: a frozen, dated record of a published leaderboard (docs/REFERENCE.md §3.7).

A snapshot is written once and never changed: its name is unique, and a second freeze under the
same name is refused. Only an admin freezes; each freeze is an audit entry holding the payload's
hash, so a snapshot altered in the table afterwards no longer matches its entry.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlmodel import Session, col, select

from db.access.audit import record
from db.access.policies import LeaderboardPolicy, authorize
from db.rules.errors import NotFound, ValidationFailed
from db.store.models import LeaderboardSnapshot, User, utcnow

NAME_LIMIT = 128


def payload_hash(payload: dict[str, Any]) -> str:
    """sha256 of the payload's canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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


def freeze_snapshot(session: Session, *, actor: User, name: str, payload: dict[str, Any]) -> LeaderboardSnapshot:
    """Store `payload` as snapshot `name` (the caller commits); refused when the name is taken."""
    authorize(actor, LeaderboardPolicy.manage())
    name = require_new_name(session, name)
    snapshot = LeaderboardSnapshot(name=name, created_at=utcnow(), created_by=actor.username, payload=payload)
    session.add(snapshot)
    record(
        session,
        actor.username,
        action="create",
        entity="leaderboard_snapshot",
        entity_key=name,
        before=None,
        after={"name": name, "models": len(payload.get("models", [])), "payload_sha256": payload_hash(payload)},
    )
    session.flush()
    return snapshot


def list_snapshots(session: Session) -> list[LeaderboardSnapshot]:
    """Every snapshot, oldest first."""
    return list(session.exec(select(LeaderboardSnapshot).order_by(col(LeaderboardSnapshot.id))).all())


def get_snapshot(session: Session, name: str) -> LeaderboardSnapshot:
    found = session.exec(select(LeaderboardSnapshot).where(LeaderboardSnapshot.name == name)).first()
    if found is None:
        raise NotFound(f"no leaderboard snapshot named {name!r}", key="errors.snapshot_unknown", params={"name": name})
    return found


def newest_snapshot(session: Session) -> LeaderboardSnapshot:
    found = session.exec(select(LeaderboardSnapshot).order_by(col(LeaderboardSnapshot.id).desc()).limit(1)).first()
    if found is None:
        raise NotFound("no leaderboard snapshot yet: freeze one first", key="errors.snapshot_none")
    return found
