"""Row counts of the main tables (`clinconsensus status`), and the judges that have decisions."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlmodel import Session, col

from db.store.current_rubric import counts_sql
from db.store.judges import judge_names
from db.store.models import Case, Criterion, JudgeDecision, LabelTally, Response, RubricStatus, RubricVersion, User


def counts(session: Session) -> dict:
    def count(statement) -> int:
        return int(session.execute(statement).scalar_one())

    # Summed from the kept tally (db/counts, ~30x fewer rows than the label table), exact all the same.
    # `labels` counts the labels that count (made on their case's current rubric, db.store.current_rubric);
    # `labels.on_older_rubric` the rows kept from older versions, so nothing is hidden.
    counting = counts_sql(LabelTally.rubric_version_id)
    labels_by_stage = {
        stage: int(n)
        for stage, n in session.execute(
            select(col(LabelTally.stage), func.sum(col(LabelTally.n))).where(counting).group_by(col(LabelTally.stage))
        ).all()
    }
    on_older_rubric = count(select(func.coalesce(func.sum(LabelTally.n), 0)).where(~counting))
    return {
        "cases": count(select(func.count()).select_from(Case)),
        "criteria": count(
            select(func.count())
            .select_from(Criterion)
            .join(RubricVersion, col(Criterion.rubric_version_id) == col(RubricVersion.id))
            .where(col(RubricVersion.status) == RubricStatus.approved)
        ),
        "responses": count(select(func.count()).select_from(Response)),
        "labels": {
            "total": sum(labels_by_stage.values()),
            "annotation": labels_by_stage.get("annotation", 0),
            "check": labels_by_stage.get("check", 0),
            "adjudication": labels_by_stage.get("adjudication", 0),
            "on_older_rubric": on_older_rubric,
        },
        "judge_decisions": count(select(func.count()).select_from(JudgeDecision)),
        "users": count(select(func.count()).select_from(User)),
    }


__all__ = ["counts", "judge_names"]
