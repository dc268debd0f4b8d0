"""Reading the kept figures: what the checker pages, the sidebar and the queues count.

Each reader reads the kept rows; the tests compare them with a recount from the label rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlmodel import Session

from db.counts.tables import (
    ASSIGNMENT_TOTALS,
    JUDGE_TOTALS,
    READY,
    STATUS,
    STATUS_COLUMNS,
    TALLY,
    TOTALS,
    UNRESOLVED_TOTALS,
)
from db.rules.enums import Stage
from db.store.models import NO_RUBRIC_VERSION


@dataclass(frozen=True)
class ResponseFigures:
    """One response's status figures (STATUS_COLUMNS)."""

    response_id: int
    n_compared: int
    n_differing: int
    n_unresolved: int
    n_gold: int


def unresolved_total(session: Session) -> int:
    """Decisions where both groups have a final label, they differ, and nobody adjudicated (docs/REFERENCE.md §4)."""
    return unresolved_figures(session)[0]


def unresolved_figures(session: Session) -> tuple[int, int]:
    """(`unresolved_total`, the number of responses holding those decisions) from the kept `unresolved_totals`: the
    admins' sidebar reads a row per shard, where an aggregate of the status rows read every unresolved response."""
    decisions, responses = session.execute(
        select(
            func.coalesce(func.sum(UNRESOLVED_TOTALS.c.n_decisions), 0),
            func.coalesce(func.sum(UNRESOLVED_TOTALS.c.n_responses), 0),
        )
    ).one()
    return int(decisions), int(responses)


def responses_with_unresolved(session: Session) -> list[ResponseFigures]:
    """The figures of every response that has an unresolved disagreement, in response order."""
    rows = session.execute(
        select(*(STATUS.c[name] for name in STATUS_COLUMNS))
        .where(STATUS.c.n_unresolved > 0)
        .order_by(STATUS.c.response_id)
    ).all()
    return [ResponseFigures(*map(int, row)) for row in rows]


def tally(*, stage: str, group_no: int, user_id: int | None = None, counting: bool = True):
    """Labels per (response, user, rubric version) of one stage and group (of one user, when given), as a
    subquery with the columns response_id, user_id, rubric_version_id, n, from the kept tally.

    Only the labels that count on the current rubric (db.store.current_rubric), unless `counting=False` (the rows of
    every version: what tells a stale response from one not yet labeled)."""
    filters = [TALLY.c.stage == stage, TALLY.c.group_no == group_no]
    if user_id is not None:
        filters.append(TALLY.c.user_id == user_id)
    if counting:
        # Kept on the row as of its last refresh (every change of a current rubric refreshes its responses): no
        # read of every case's current rubric.
        filters.append(TALLY.c.counting)
    columns = (TALLY.c.response_id, TALLY.c.user_id, TALLY.c.rubric_version_id, TALLY.c.n)
    return select(*columns).where(*filters).subquery("tally")


def feedback_tally(*, user_id: int, group_no: int):
    """One annotator's annotation labels per (response, rubric version), as a subquery with the columns
    response_id, rubric_version_id, counting (whether they count on the current rubric), n, n_gold_differs,
    n_no_gold (the annotator's feedback figures: labels on final responses where final gold differs, labels on
    responses not final yet) and n_unresolved (the response's decisions nobody adjudicated yet, 0 without any)."""
    return (
        select(
            TALLY.c.response_id,
            TALLY.c.rubric_version_id,
            TALLY.c.counting,
            TALLY.c.n,
            TALLY.c.n_gold_differs,
            TALLY.c.n_no_gold,
            func.coalesce(STATUS.c.n_unresolved, 0).label("n_unresolved"),
        )
        .select_from(TALLY.outerjoin(STATUS, STATUS.c.response_id == TALLY.c.response_id))
        .where(TALLY.c.stage == Stage.annotation.value, TALLY.c.group_no == group_no, TALLY.c.user_id == user_id)
        .subquery("tally")
    )


def annotation_counts(session: Session, response_ids: Iterable[int], group_no: int) -> dict[int, dict[int | None, int]]:
    """response_id -> {rubric version id (None: none recorded) -> annotation labels of `group_no`}."""
    ids = sorted(set(response_ids))
    counts: dict[int, dict[int | None, int]] = {}
    source = tally(stage=Stage.annotation.value, group_no=group_no, counting=False)
    for start in range(0, len(ids), 5000):
        rows = session.execute(
            select(source.c.response_id, source.c.rubric_version_id, func.sum(source.c.n))
            .where(source.c.response_id.in_(ids[start : start + 5000]))
            .group_by(source.c.response_id, source.c.rubric_version_id)
        ).all()
        for response_id, version_id, n in rows:
            version = None if version_id == NO_RUBRIC_VERSION else int(version_id)
            counts.setdefault(int(response_id), {})[version] = int(n)
    return counts


def ready_for_adjudication(*, group_no: int):
    """The responses whose group `group_no`'s labels are ready for adjudication (kept: done on the current rubric
    and all checked), as a subquery with the column response_id."""
    return select(READY.c.response_id).where(READY.c.group_no == group_no).subquery("ready")


def person_totals(*, stage: str, group_no: int):
    """Each person's labels of one stage and group that count on the current rubric, summed over their responses
    (kept in `label_totals`), as a subquery with the columns user_id, n_responses, n_labels."""
    return (
        select(TOTALS.c.user_id, TOTALS.c.n_responses, TOTALS.c.n_labels)
        .where(TOTALS.c.stage == stage, TOTALS.c.group_no == group_no, TOTALS.c.counting, TOTALS.c.n_labels > 0)
        .subquery("totals")
    )


def labels_by_stage(session: Session) -> tuple[dict[str, int], int]:
    """Labels that count on the current rubric per stage, and those made on an older version (kept totals)."""
    by_stage: dict[str, int] = {}
    older = 0
    for stage, counting, n in session.execute(
        select(TOTALS.c.stage, TOTALS.c.counting, func.sum(TOTALS.c.n_labels)).group_by(
            TOTALS.c.stage, TOTALS.c.counting
        )
    ).all():
        if counting:
            by_stage[str(stage)] = by_stage.get(str(stage), 0) + int(n)
        else:
            older += int(n)
    return by_stage, older


def judge_decision_total(session: Session) -> int:
    """Every judge decision in the database, from the kept per-judge totals (a row per judge)."""
    return int(session.execute(select(func.coalesce(func.sum(JUDGE_TOTALS.c.n_decisions), 0))).scalar_one())


def assignment_totals(session: Session) -> list[tuple[int, int, int, int]]:
    """(user_id, group_no, assigned, done) of every person with labeling assignments, from the kept totals."""
    columns = (ASSIGNMENT_TOTALS.c.user_id, ASSIGNMENT_TOTALS.c.group_no, ASSIGNMENT_TOTALS.c.n_assigned)
    rows = session.execute(select(*columns, ASSIGNMENT_TOTALS.c.n_done).where(ASSIGNMENT_TOTALS.c.n_assigned != 0))
    return sorted((int(u), int(g), int(n), int(d)) for u, g, n, d in rows)
