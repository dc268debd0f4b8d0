"""Label imports that changed annotation labels made final by an opened feedback round (`--override-freeze`).

The importer refuses such a file unless the admin overrides the freeze; an override is one audit entry
(action "override_freeze") naming, per round, how many labels it created or changed. The feedback page lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from db.access.policies import FeedbackPolicy, authorize
from db.store.models import AuditLog, User


@dataclass(frozen=True)
class FreezeOverride:
    at: datetime
    actor: str
    source: str  # the imported file's name
    rounds: dict[datetime, int]  # round (its `round_at`) → labels the import created or changed in it


def freeze_overrides(session: Session, *, actor: User) -> list[FreezeOverride]:
    """Every import that overrode the feedback freeze, newest first (for admins)."""
    authorize(session, actor, FeedbackPolicy.manage())
    entries = session.exec(
        select(AuditLog).where(col(AuditLog.action) == "override_freeze").order_by(col(AuditLog.id).desc())
    ).all()
    return [
        FreezeOverride(
            entry.at,
            entry.actor,
            entry.entity_key,
            {datetime.fromisoformat(at): int(n) for at, n in ((entry.after or {}).get("rounds") or {}).items()},
        )
        for entry in entries
    ]
