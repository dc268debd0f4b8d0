"""The judges that have decisions and the models that have responses: their names, read without reading every row."""

from __future__ import annotations

from sqlmodel import Session

from db.store.distinct import distinct_values
from db.store.models import JudgeDecision, Response, table_of


def judge_names(session: Session) -> list[str]:
    """Judges that have decisions in the database, by name (export sources, the check queue's judge mode)."""
    # Millions of decisions name a handful of judges: hop from one name to the next through the
    # (judge, response, criterion) index instead of reading them all.
    return distinct_values(session, table_of(JudgeDecision).c.judge)


def response_models(session: Session) -> list[str]:
    """Models that have responses, by name (hopping through the model index: a handful of models name every
    response, and DISTINCT would read them all on every visit of the export and judge pages)."""
    return sorted(distinct_values(session, table_of(Response).c.model))
