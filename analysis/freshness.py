"""A cheap fingerprint of the data the analysis reads, so cached frames are rebuilt when it changes."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from db.models import AuditLog, Case, JudgeDecision, Label, Response, RubricVersion


def data_version(engine: Engine) -> tuple[str, ...]:
    """Counts and highest ids of labels, judge decisions, responses, cases and rubric versions, the newest
    label edit and the newest audit entry: any change of what the report reads changes one of them."""
    statements = [
        select(func.count(Label.id), func.max(Label.id), func.max(Label.updated_at)),
        select(func.count(JudgeDecision.id), func.max(JudgeDecision.id)),
        select(func.count(Response.id), func.max(Response.id)),
        select(func.count(Case.id), func.max(Case.id)),
        select(func.count(RubricVersion.id), func.max(RubricVersion.id)),
        select(func.max(AuditLog.id)),
    ]
    with engine.connect() as connection:
        return tuple(str(value) for statement in statements for value in connection.execute(statement).one())
