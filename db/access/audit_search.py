"""Reading the audit log: filter it for the admin's page and write it out as JSON Lines."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from sqlalchemy import func, select
from sqlmodel import Session, col

from db.access.policies import AuditLogPolicy, authorize
from db.store.distinct import distinct_values
from db.store.models import AuditLog, User, table_of

#: Most entries a page shows at once (the download holds every match).
PAGE_LIMIT = 500


def _filtered(
    *,
    entities: Iterable[str] = (),
    actor: str | None = None,
    since: date | None = None,
    until: date | None = None,
    key_contains: str | None = None,
    zone: tzinfo | None = None,
):
    """`since` and `until` are whole days in `zone` (the reader's time zone; UTC when not given)."""
    zone = zone or UTC
    statement = select(AuditLog)
    entities = [e for e in entities if e]
    if entities:
        statement = statement.where(col(AuditLog.entity).in_(entities))
    if actor:
        statement = statement.where(col(AuditLog.actor) == actor)
    if since is not None:
        statement = statement.where(col(AuditLog.at) >= datetime.combine(since, time.min, tzinfo=zone))
    if until is not None:
        # `until` is a whole day: everything before the next midnight in `zone`.
        statement = statement.where(
            col(AuditLog.at) < datetime.combine(until + timedelta(days=1), time.min, tzinfo=zone)
        )
    if key_contains:
        statement = statement.where(col(AuditLog.entity_key).contains(key_contains.strip(), autoescape=True))
    return statement


def audit_facets(session: Session, user: User) -> tuple[list[str], list[str]]:
    """The entity names and actors that occur in the log (for the page's filters)."""
    authorize(session, user, AuditLogPolicy.manage())
    # A few names among every entry: read through the columns' indexes, not by reading the log.
    log = table_of(AuditLog)
    return distinct_values(session, log.c.entity), distinct_values(session, log.c.actor)


def search_audit(
    session: Session, user: User, *, limit: int | None = PAGE_LIMIT, **filters
) -> tuple[list[AuditLog], int]:
    """Matching entries, newest first (at most `limit`), and how many match in all."""
    authorize(session, user, AuditLogPolicy.manage())
    statement = _filtered(**filters)
    total = int(session.execute(select(func.count()).select_from(statement.subquery())).scalar_one())
    statement = statement.order_by(col(AuditLog.id).desc())
    if limit is not None:
        statement = statement.limit(limit)
    return list(session.execute(statement).scalars()), total


def entry_dict(entry: AuditLog) -> dict:
    at = entry.at if entry.at.tzinfo else entry.at.replace(tzinfo=UTC)
    return {
        "id": entry.id,
        "at": at.isoformat(),
        "actor": entry.actor,
        "action": entry.action,
        "entity": entry.entity,
        "entity_key": entry.entity_key,
        "before": entry.before,
        "after": entry.after,
        "prev_hash": entry.prev_hash,
        "hash": entry.hash,
    }


def audit_jsonl(session: Session, user: User, **filters) -> bytes:
    """Every matching entry, oldest first, one JSON object a line (UTF-8, Chinese as is)."""
    authorize(session, user, AuditLogPolicy.manage())
    rows = session.execute(_filtered(**filters).order_by(AuditLog.id)).scalars()
    lines = [json.dumps(entry_dict(entry), ensure_ascii=False, default=str) for entry in rows]
    return ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")
