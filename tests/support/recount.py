"""The kept figures (db.counts) counted again from the label rows, for the tests to compare with the kept rows.

`recount_status` follows docs/REFERENCE.md §4 with pandas on the raw label rows (group final label = check
else annotation; unresolved = both groups final, differing, not adjudicated; gold = adjudication, else
agreement, else a single group's label), independently of db.rules.gold and db.counts.status. `kept_*`
read the kept rows in the same shape.
"""

from __future__ import annotations

import pandas as pd
from sqlalchemy import func, select
from sqlmodel import Session

from db.counts.state import DONE, label_status
from db.counts.tables import (
    CASE,
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
from db.rules.enums import Stage
from db.store.current_rubric import counts_on_current_rubric, counts_sql, current_rubric_sizes, current_version_ids
from db.store.models import NO_RUBRIC_VERSION, AdjudicationOpening, User

_DECISION = ["response_id", "criterion_id"]


def recount_status(session: Session) -> pd.DataFrame:
    """STATUS_COLUMNS of every response with labels that count on the current rubric, from those label rows."""
    rows = session.execute(
        select(LABEL.c.response_id, LABEL.c.criterion_id, LABEL.c.stage, LABEL.c.group_no, LABEL.c.met).where(
            counts_sql(LABEL.c.rubric_version_id)
        )
    ).all()
    labels = pd.DataFrame(rows, columns=[*_DECISION, "stage", "group_no", "met"])
    if labels.empty:
        return pd.DataFrame(columns=STATUS_COLUMNS).astype(object)
    labels["stage"] = labels["stage"].astype(str)
    labels["met"] = labels["met"].astype(bool)
    decisions = labels[_DECISION].drop_duplicates().set_index(_DECISION).sort_index()

    def one(stage: str, group_no: int | None = None) -> pd.Series:
        chosen = labels[labels["stage"] == stage]
        if group_no is not None:
            chosen = chosen[chosen["group_no"] == group_no]
        return chosen.set_index(_DECISION)["met"].reindex(decisions.index).astype(object)

    finals = {g: one(Stage.check.value, g).where(lambda s: s.notna(), one(Stage.annotation.value, g)) for g in (1, 2)}
    adjudicated = one(Stage.adjudication.value)
    has1, has2 = finals[1].notna(), finals[2].notna()
    both = has1 & has2
    differ = both & (finals[1] != finals[2])
    unresolved = differ & adjudicated.isna()
    gold = adjudicated.notna() | (has1 ^ has2) | (both & ~differ)
    figures = pd.DataFrame({"n_compared": both, "n_differing": differ, "n_unresolved": unresolved, "n_gold": gold})
    summed = figures.astype(int).groupby(level="response_id").sum().reset_index()
    return summed[STATUS_COLUMNS].astype(object)


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


def recount_judge_totals(session: Session) -> list[tuple[str, int]]:
    """`kept_judge_totals` counted from every judge decision."""
    rows = session.execute(select(JUDGE_DECISION.c.judge, func.count()).group_by(JUDGE_DECISION.c.judge))
    return sorted((str(judge), int(n)) for judge, n in rows)


def recount_unresolved_figures(session: Session) -> tuple[int, int]:
    """(unresolved decisions, responses holding them) from `recount_status`: db.counts.unresolved_figures."""
    status = recount_status(session)
    unresolved = status["n_unresolved"][status["n_unresolved"] > 0]
    return int(unresolved.sum()), len(unresolved)


def recount_ready_for(session: Session, user: User) -> list[int]:
    """db.access.independence.ready_for_adjudication from the label rows: the checker's group's responses of
    `recount_ready`, less those the checker annotated, those with a label of the group's still to check by
    them (an annotation label of someone else that counts, with no check label of the group on the same
    criterion and version) and those they took in, in case and code order."""
    ready = {response_id for response_id, group_no in recount_ready(session) if group_no == user.group_no}
    labels = session.execute(
        select(
            LABEL.c.response_id,
            LABEL.c.criterion_id,
            LABEL.c.stage,
            LABEL.c.group_no,
            LABEL.c.user_id,
            LABEL.c.rubric_version_id,
            counts_sql(LABEL.c.rubric_version_id),
        )
    ).all()
    checks = {(r[0], r[1], r[3], r[5]) for r in labels if r[2] == Stage.check.value}
    refused = {r[0] for r in labels if r[2] == Stage.annotation.value and r[4] == user.id}
    refused |= {
        r[0]
        for r in labels
        if r[2] == Stage.annotation.value
        and r[3] == user.group_no
        and r[4] != user.id
        and r[6]
        and (r[0], r[1], r[3], r[5]) not in checks
    }
    refused |= set(
        session.execute(select(AdjudicationOpening.response_id).where(AdjudicationOpening.user_id == user.id)).scalars()
    )
    order = session.execute(
        select(RESPONSE.c.id).join(CASE, CASE.c.id == RESPONSE.c.case_pk).order_by(CASE.c.case_id, RESPONSE.c.code)
    ).scalars()
    return [response_id for response_id in order if response_id in ready - refused]
