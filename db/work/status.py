"""Row counts of the main tables (`clinconsensus status`), and the judges that have decisions."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlmodel import Session, col

from db import counts as kept_counts
from db.rules.enums import RubricStatus
from db.store.judges import judge_names
from db.store.models import Case, Criterion, Response, RubricVersion, User


def _count(session: Session, statement) -> int:
    return int(session.execute(statement).scalar_one())


def case_and_response_rows(session: Session) -> tuple[int, int]:
    """(cases, responses): how many rows the two tables hold, counted where read (a kept count bought nothing
    measurable: docs/performance.md)."""
    cases = select(func.count()).select_from(Case).scalar_subquery()
    responses = select(func.count()).select_from(Response).scalar_subquery()
    found = session.execute(select(cases, responses)).one()
    return int(found[0]), int(found[1])


def overview(session: Session) -> dict:
    """Cases, responses, labels and accounts: what the admin's pages show on every visit."""
    # Labels are summed from the kept per-person totals (db.counts, a few rows however many labels), exact all
    # the same. `labels` counts the labels that count (made on their case's current rubric,
    # db.store.current_rubric); `labels.on_older_rubric` the rows kept from older versions, so nothing is hidden.
    labels_by_stage, on_older_rubric = kept_counts.labels_by_stage(session)
    cases, responses = case_and_response_rows(session)
    return {
        "cases": cases,
        "responses": responses,
        "labels": {
            "total": sum(labels_by_stage.values()),
            "annotation": labels_by_stage.get("annotation", 0),
            "check": labels_by_stage.get("check", 0),
            "adjudication": labels_by_stage.get("adjudication", 0),
            "on_older_rubric": on_older_rubric,
        },
        "users": _count(session, select(func.count()).select_from(User)),
    }


def judge_decision_count(session: Session) -> int:
    """Every judge decision in the database, from the kept per-judge totals (db.counts: a row per judge, where a
    count of the table read millions of rows at full scale)."""
    return kept_counts.judge_decision_total(session)


def counts(session: Session) -> dict:
    """Row counts of the main tables (`clinconsensus status`): `overview` with criteria and judge decisions."""
    criteria = (
        select(func.count())
        .select_from(Criterion)
        .join(RubricVersion, col(Criterion.rubric_version_id) == col(RubricVersion.id))
        .where(col(RubricVersion.status) == RubricStatus.approved)
    )
    return {
        **overview(session),
        "criteria": _count(session, criteria),
        "judge_decisions": judge_decision_count(session),
    }


__all__ = ["case_and_response_rows", "counts", "judge_decision_count", "judge_names", "overview"]
