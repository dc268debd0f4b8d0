"""The judges that have decisions: their names, read without reading their decisions."""

from __future__ import annotations

from sqlmodel import Session

from db.store.distinct import distinct_values
from db.store.models import JudgeDecision, table_of


def judge_names(session: Session) -> list[str]:
    """Judges that have decisions in the database, by name (export sources, the check queue's judge mode)."""
    # Millions of decisions name a handful of judges: hop from one name to the next through the
    # (judge, response, criterion) index instead of reading them all.
    return distinct_values(session, table_of(JudgeDecision).c.judge)
