"""What an export leaves in the audit log: its kind and the options a later reader needs.

The SFT export names the models it held out of training; the judge pages then measure a judge on
exactly those models by default (a judge is measured on what it never saw, docs/REFERENCE.md §4).
The entries change no table, so `audit verify` replays nothing for them and the data version
leaves them out.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from db.access.audit import record
from db.store.models import AuditLog

EXPORT_ENTITY = "export"


def record_export(session: Session, *, actor: str, kind: str, details: dict[str, Any]) -> None:
    """One audit entry for an export of `kind` (the caller commits)."""
    record(session, actor, action="export", entity=EXPORT_ENTITY, entity_key=kind, before=None, after=details)


def newest_sft_holdout(session: Session) -> list[str]:
    """The held-out models of the newest SFT export ([] when there is none, or it held none out)."""
    statement = (
        select(AuditLog.after)
        .where(AuditLog.entity == EXPORT_ENTITY, AuditLog.entity_key == "sft")
        .order_by(col(AuditLog.id).desc())
        .limit(1)
    )
    after = session.exec(statement).first()
    if not isinstance(after, dict):
        return []
    return [str(model) for model in after.get("holdout_models") or []]
