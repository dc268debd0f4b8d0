"""The judges that have decisions: their names, read without reading their decisions."""

from __future__ import annotations

from sqlalchemy import text
from sqlmodel import Session


def judge_names(session: Session) -> list[str]:
    """Judges that have decisions in the database, by name (export sources, the check queue's judge mode)."""
    # Millions of decisions name a handful of judges: instead of reading them all (DISTINCT), hop from one
    # name to the next through the (judge, response, criterion) index.
    return list(session.execute(_JUDGE_NAMES).scalars())


_JUDGE_NAMES = text(
    """
    WITH RECURSIVE names(judge) AS (
        SELECT MIN(judge) FROM judge_decision
        UNION ALL
        SELECT (SELECT MIN(judge) FROM judge_decision WHERE judge_decision.judge > names.judge)
        FROM names WHERE names.judge IS NOT NULL
    )
    SELECT judge FROM names WHERE judge IS NOT NULL
    """
)
