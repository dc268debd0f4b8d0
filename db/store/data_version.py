"""The data version: one small read that changes whenever anything a page or the report counts has changed.

Caches (the dashboard's grid, the sidebar's figures) are keyed on it, so every server process sees a change at
once, read from the database rather than from its own memory.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from db.store.models import AuditLog, Case, Criterion, JudgeDecision, Label, Response, RubricVersion


class DataVersion(NamedTuple):
    label_id: str
    label_edit: str
    judge_decision_id: str
    response_id: str
    case_id: str
    rubric_version_id: str
    criterion_id: str
    audit_id: str

    @property
    def approximate_labels(self) -> int:
        """The highest label id: about how many labels there are (rows are never deleted)."""
        return int(self.label_id) if self.label_id.isdigit() else 0


def data_version(engine: Engine) -> DataVersion:
    """Highest ids of labels, judge decisions, responses, cases, rubric versions, criteria and audit entries, and
    the newest label edit: rows are never deleted, new rows raise an id, edits of labels move `updated_at`
    (indexed) and every other edit is audited, so any change of what the report reads changes one of them."""
    statement = select(
        select(func.max(Label.id)).scalar_subquery(),
        select(func.max(Label.updated_at)).scalar_subquery(),
        select(func.max(JudgeDecision.id)).scalar_subquery(),
        select(func.max(Response.id)).scalar_subquery(),
        select(func.max(Case.id)).scalar_subquery(),
        select(func.max(RubricVersion.id)).scalar_subquery(),
        select(func.max(Criterion.id)).scalar_subquery(),
        # Sign-ins, sign-outs and exports are audited too, but change nothing the analysis reads.
        select(func.max(col(AuditLog.id))).where(col(AuditLog.entity).not_in(("session", "export"))).scalar_subquery(),
    )
    with engine.connect().execution_options(sqlite_read_only=True) as connection:
        return DataVersion(*(str(value) for value in connection.execute(statement).one()))
