"""The straightforward way: the kept figures recounted from every label, every time. The readers take
`recount=True` to use these (the tests and benchmarks set both side by side); the pages never do.
`kept_*` read the kept rows in the same shape, for comparing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlmodel import Session

from db.counts.state import DONE, label_status
from db.counts.status import label_frame, status_of_labels
from db.counts.tables import (
    COUNTED_TABLES,
    JUDGE_DECISION,
    JUDGE_TOTALS,
    LABEL,
    READY,
    RESPONSE,
    STATUS,
    STATUS_COLUMNS,
    TALLY,
    TOTALS,
)
from db.store.current_rubric import counts_on_current_rubric, counts_sql, current_rubric_sizes, current_version_ids
from db.store.models import NO_RUBRIC_VERSION, Stage

if TYPE_CHECKING:
    import pandas as pd


def recounted_tally(*, stage: str, group_no: int, user_id: int | None = None, counting: bool = True):
    """The subquery of `db.counts.tally` (response_id, user_id, rubric_version_id, n), counted from the labels."""
    version = func.coalesce(LABEL.c.rubric_version_id, NO_RUBRIC_VERSION).label("rubric_version_id")
    filters = [LABEL.c.stage == stage, LABEL.c.group_no == group_no]
    if user_id is not None:
        filters.append(LABEL.c.user_id == user_id)
    if counting:
        filters.append(counts_sql(LABEL.c.rubric_version_id))
    return (
        select(LABEL.c.response_id, LABEL.c.user_id, version, func.count().label("n"))
        .where(*filters)
        .group_by(LABEL.c.response_id, LABEL.c.user_id, version)
        .subquery("tally")
    )


def recount_status(session: Session) -> pd.DataFrame:
    """STATUS_COLUMNS of every response with labels that count, computed from all those labels."""
    connection = session.connection()
    rows = connection.execute(
        select(LABEL.c.response_id, LABEL.c.criterion_id, LABEL.c.stage, LABEL.c.group_no, LABEL.c.met).where(
            counts_sql(LABEL.c.rubric_version_id)
        )
    ).all()
    return status_of_labels(label_frame(rows))


def kept_status(session: Session) -> pd.DataFrame:
    """STATUS_COLUMNS of every response as kept (for comparing with `recount_status`)."""
    import pandas as pd

    rows = session.execute(select(*(STATUS.c[name] for name in STATUS_COLUMNS)).order_by(STATUS.c.response_id)).all()
    return pd.DataFrame(rows, columns=STATUS_COLUMNS).astype(object)


#: The key and count columns `kept_tally` and `recount_tally` compare.
_TALLY_KEYS = ("response_id", "group_no", "stage", "user_id", "rubric_version_id")


def kept_tally(session: Session) -> list[tuple]:
    """Every tally row as (response_id, group_no, stage, user_id, rubric_version_id, n), sorted."""
    columns = [TALLY.c[name] for name in _TALLY_KEYS]
    return sorted(tuple(row) for row in session.execute(select(*columns, TALLY.c.n)).all())


def recount_tally(session: Session) -> list[tuple]:
    """`kept_tally` counted from every label."""
    version = func.coalesce(LABEL.c.rubric_version_id, NO_RUBRIC_VERSION)
    keys = (LABEL.c.response_id, LABEL.c.group_no, LABEL.c.stage, LABEL.c.user_id, version)
    return sorted(tuple(row) for row in session.execute(select(*keys, func.count()).group_by(*keys)).all())


def kept_ready(session: Session) -> list[tuple[int, int]]:
    """Every (response_id, group_no) kept as ready for adjudication, sorted."""
    return sorted(tuple(row) for row in session.execute(select(READY.c.response_id, READY.c.group_no)).all())


def recount_ready(session: Session) -> list[tuple[int, int]]:
    """`kept_ready` counted from every label: the group's annotation labels are done on the current rubric (the
    state rule of db.counts.state) and each of those that count has a check label of the group on the same
    criterion and rubric version."""
    annotation = session.execute(
        select(
            LABEL.c.response_id,
            LABEL.c.group_no,
            LABEL.c.criterion_id,
            LABEL.c.rubric_version_id,
            RESPONSE.c.case_pk,
        )
        .join(RESPONSE, RESPONSE.c.id == LABEL.c.response_id)
        .where(LABEL.c.stage == Stage.annotation.value)
    ).all()
    checks = set(
        session.execute(
            select(LABEL.c.response_id, LABEL.c.group_no, LABEL.c.criterion_id, LABEL.c.rubric_version_id).where(
                LABEL.c.stage == Stage.check.value
            )
        ).all()
    )
    case_pks = {row.case_pk for row in annotation}
    versions, sizes = current_version_ids(session, case_pks), current_rubric_sizes(session, case_pks)
    pairs: dict[tuple[int, int], list] = {}
    for row in annotation:
        pairs.setdefault((row.response_id, row.group_no), []).append(row)
    ready = []
    for (response_id, group_no), rows in pairs.items():
        current = versions.get(rows[0].case_pk)
        counting = [row for row in rows if counts_on_current_rubric(row.rubric_version_id, current)]
        state = label_status(current, sizes.get(rows[0].case_pk, 0), len(counting), len(rows) - len(counting))
        checked = all((r.response_id, r.group_no, r.criterion_id, r.rubric_version_id) in checks for r in counting)
        if state == DONE and checked:
            ready.append((int(response_id), int(group_no)))
    return sorted(ready)


def kept_totals(session: Session) -> list[tuple]:
    """Every `label_totals` row with labels as (group_no, stage, user_id, counting, n_responses, n_labels), sorted."""
    columns = [TOTALS.c[name] for name in ("group_no", "stage", "user_id", "counting", "n_responses", "n_labels")]
    rows = session.execute(select(*columns).where(TOTALS.c.n_labels != 0)).all()
    return sorted((int(g), str(s), int(u), bool(c), int(r), int(n)) for g, s, u, c, r, n in rows)


def recount_totals(session: Session) -> list[tuple]:
    """`kept_totals` counted from every label, whether each counts read from the current rubrics."""
    counting = counts_sql(LABEL.c.rubric_version_id)
    rows = session.execute(
        select(
            LABEL.c.group_no,
            LABEL.c.stage,
            LABEL.c.user_id,
            LABEL.c.rubric_version_id.is_not(None) & counting,
            LABEL.c.response_id,
        )
    ).all()
    responses: dict[tuple, set[int]] = {}
    labels: dict[tuple, int] = {}
    for group_no, stage, user_id, counts_now, response_id in rows:
        key = (int(group_no), str(stage), int(user_id), bool(counts_now))
        responses.setdefault(key, set()).add(int(response_id))
        labels[key] = labels.get(key, 0) + 1
    return sorted((*key, len(responses[key]), labels[key]) for key in labels)


def kept_judge_totals(session: Session) -> list[tuple[str, int]]:
    """Every `judge_totals` row with decisions as (judge, n_decisions), sorted."""
    rows = session.execute(
        select(JUDGE_TOTALS.c.judge, JUDGE_TOTALS.c.n_decisions).where(JUDGE_TOTALS.c.n_decisions != 0)
    )
    return sorted((str(judge), int(n)) for judge, n in rows)


def recount_row_totals(session: Session) -> dict[str, int]:
    """`row_totals` (db.counts.read) counted from the tables themselves."""
    return {
        table.name: int(session.execute(select(func.count()).select_from(table)).scalar_one())
        for table in COUNTED_TABLES
    }


def recount_judge_totals(session: Session) -> list[tuple[str, int]]:
    """`kept_judge_totals` counted from every judge decision."""
    rows = session.execute(select(JUDGE_DECISION.c.judge, func.count()).group_by(JUDGE_DECISION.c.judge))
    return sorted((str(judge), int(n)) for judge, n in rows)
