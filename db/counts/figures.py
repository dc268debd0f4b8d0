"""Kept figures: what the checker pages, the sidebar and the queues count, kept up to date as labels change.

Recounting 1.8 M labels on every page visit is what made the checker pages slow at full scale. Two
small tables hold the figures instead, rewritten for exactly the responses a save or an import
touched, in the same transaction as the labels themselves (so they are never ahead or behind):

- `label_tally`: how many labels each person made on a response, per group and stage (the label
  check's annotator list and queue, "responses this checker labeled"; readers take the rows of the current
  rubric version only, `tally`), and of the annotation labels that count on the current rubric, those whose
  decision's gold differs from the label and those whose decision has no gold yet (the annotator's feedback
  figures and its list of responses);
- `response_status`: per response, from the labels that count on the current rubric only (db.store.current_rubric),
  the decisions both groups labeled, those where the two groups' final labels differ, those of them still
  unresolved (nobody adjudicated) and those with gold (the adjudication queue, the unresolved count of the
  sidebar and of the progress page);
- on each labeling assignment, the state of its group's labels (`label_status`: todo, partial, done,
  stale, waiting), how many count on the current rubric (`labeled`) and that rubric's size
  (`rubric_size`): the annotator's queue, the sidebar and the progress page read them instead of
  counting labels against every case's current rubric. They are rewritten when the response's labels
  change, when the assignment is made and when the case's current rubric changes (`touch_cases`: then
  every figure of the case's responses is rewritten, since which labels count changed).

The rules (final label, gold) are db.rules.gold's; this module only applies them to the touched responses.
`recount_*` compute the same figures from every label, the straightforward way (benchmarks set
them side by side; `use_recount` makes the readers below use them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, bindparam, case, delete, event, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlmodel import Session, SQLModel

from db.store.current_rubric import counts_on_current_rubric, counts_sql, current_version_ids
from db.store.models import (
    NO_RUBRIC_VERSION,
    Assignment,
    AssignmentKind,
    Label,
    LabelTally,
    ResponseStatus,
    RubricVersion,
    Stage,
)

if TYPE_CHECKING:
    import pandas as pd

# pandas, numpy and db.rules.gold are imported where used: every command opens an engine, which brings this
# module for its session events, and `status` or `--help` should not pay for them.

#: Responses read per statement when refreshing many (an import): bounds memory and the IN list.
REFRESH_CHUNK = 2000

_LABEL = SQLModel.metadata.tables["label"]
_TALLY = SQLModel.metadata.tables[LabelTally.__tablename__]
_STATUS = SQLModel.metadata.tables[ResponseStatus.__tablename__]
_RESPONSE = SQLModel.metadata.tables["response"]
_ASSIGNMENT = SQLModel.metadata.tables["assignment"]
_CRITERION = SQLModel.metadata.tables["criterion"]
STATUS_COLUMNS = ["response_id", "n_compared", "n_differing", "n_unresolved", "n_gold"]

_recount = {"on": False}


@contextmanager
def use_recount() -> Iterator[None]:
    """Within this block, readers recount from every label instead of reading kept figures (process-wide:
    benchmarks time a page both ways in one run, and the page runs in Streamlit's own thread)."""
    before = _recount["on"]
    _recount["on"] = True
    try:
        yield
    finally:
        _recount["on"] = before


def _recounting() -> bool:
    return _recount["on"]


def recounting() -> bool:
    """Whether readers recount (`use_recount`): pages' readers outside this module ask it too."""
    return _recounting()


# The state of a group's labels on a response (the annotator's queue, the sidebar, the progress page) ----

TODO, PARTIAL, DONE, STALE, WAITING = "todo", "partial", "done", "stale", "waiting"


def label_status(current_version_id: int | None, size: int, fresh: int, stale: int) -> str:
    """The one rule: waiting (no approved rubric), stale (labels on an older rubric), done (every criterion of
    the current rubric labeled), partial (some), todo (none). `fresh`/`stale`: labels that do / do not count."""
    if current_version_id is None:
        return WAITING
    if stale:
        return STALE
    if fresh >= size:
        return DONE
    if fresh:
        return PARTIAL
    return TODO


def _connection(session_or_connection: Session | Connection) -> Connection:
    return session_or_connection.connection() if isinstance(session_or_connection, Session) else session_or_connection


# Writing: called by every path that changes labels, in its own transaction -------------------

_DIRTY = "kept_dirty_responses"
_DIRTY_ASSIGNMENTS = "kept_dirty_assignments"
_DIRTY_CASES = "kept_dirty_cases"


def touch(session: Session, response_ids: Iterable[int]) -> None:
    """Marks responses whose labels this transaction changed; their figures are rewritten just before it commits
    (once per response, however many of its labels were saved)."""
    session.info.setdefault(_DIRTY, set()).update(int(rid) for rid in response_ids)


def touch_assignments(session: Session, response_ids: Iterable[int | None]) -> None:
    """Marks responses that got labeling assignments in this transaction: their state is written before it commits."""
    session.info.setdefault(_DIRTY_ASSIGNMENTS, set()).update(int(rid) for rid in response_ids if rid is not None)


def touch_cases(session: Session, case_pks: Iterable[int]) -> None:
    """Marks cases whose current rubric this transaction changed (an approval, an imported rubric): the state of
    every labeling assignment of their responses is rewritten before it commits."""
    session.info.setdefault(_DIRTY_CASES, set()).update(int(pk) for pk in case_pks)


@event.listens_for(Session, "before_flush")
def _touch_flushed_labels(session: Session, _context, _instances) -> None:
    # Label rows written through the ORM mark themselves; Core statements call `touch`.
    objects = (*session.new, *session.dirty, *session.deleted)
    changed = [obj.response_id for obj in objects if isinstance(obj, Label)]
    if changed:
        touch(session, changed)
    assigned = [obj.response_id for obj in session.new if isinstance(obj, Assignment)]
    if assigned:
        touch_assignments(session, assigned)
    # An approved rubric version written through the ORM changes its case's current rubric (Core writers call
    # `touch_cases`); any change of a version row is taken as one, which costs a case's few responses at most.
    rubrics = [
        obj.case_pk for obj in (*session.new, *session.dirty, *session.deleted) if isinstance(obj, RubricVersion)
    ]
    if rubrics:
        touch_cases(session, rubrics)


_LOCKED = "kept_locked_responses"


def hold_row_locks(session: Session, response_ids: Iterable[int]) -> None:
    """Notes that this transaction holds the row locks (FOR UPDATE) of these responses already, so the
    refresh before commit need not ask for them again (a label save locks its response first)."""
    session.info.setdefault(_LOCKED, set()).update(int(rid) for rid in response_ids)


@event.listens_for(Session, "before_commit")
def _refresh_touched(session: Session) -> None:
    session.flush()
    dirty = session.info.pop(_DIRTY, None) or set()
    assigned = session.info.pop(_DIRTY_ASSIGNMENTS, None) or set()
    cases = session.info.pop(_DIRTY_CASES, None)
    of_cases: set[int] = set()
    if cases:
        pks = sorted(cases)
        connection = session.connection()
        for start in range(0, len(pks), REFRESH_CHUNK):
            of_cases.update(
                connection.execute(
                    select(_RESPONSE.c.id).where(_RESPONSE.c.case_pk.in_(pks[start : start + REFRESH_CHUNK]))
                ).scalars()
            )
            assigned.update(
                connection.execute(
                    select(_ASSIGNMENT.c.response_id).where(
                        _ASSIGNMENT.c.case_pk.in_(pks[start : start + REFRESH_CHUNK]),
                        _ASSIGNMENT.c.kind == AssignmentKind.label.value,
                    )
                ).scalars()
            )
    locked = session.info.pop(_LOCKED, None) or ()
    # Which labels count changed with a case's current rubric: every figure of its responses is rewritten.
    refreshed = dirty | of_cases
    if refreshed:
        refresh(session, refreshed, locked=locked)
    if assigned - refreshed:
        refresh_assignments(session, assigned - refreshed)


@event.listens_for(Session, "after_rollback")
def _forget_touched(session: Session) -> None:
    for key in (_DIRTY, _DIRTY_ASSIGNMENTS, _DIRTY_CASES, _LOCKED, _KNOWN_RUBRIC):
        session.info.pop(key, None)


def refresh(
    session_or_connection: Session | Connection, response_ids: Iterable[int], *, locked: Iterable[int] = ()
) -> None:
    """Rewrites the kept figures of `response_ids` from their labels as this transaction sees them.

    On PostgreSQL the response rows are locked first (in id order; FOR NO KEY UPDATE, which the
    foreign-key locks of new label rows do not conflict with), so two transactions touching the same
    response take turns here and the later one counts the earlier one's committed labels; rows this
    transaction has locked already (`locked`) are not asked for again.
    SQLite's writers are serialised by BEGIN IMMEDIATE already.
    """
    ids = sorted({int(rid) for rid in response_ids})
    if not ids:
        return
    held = {int(rid) for rid in locked}
    known = session_or_connection.info.pop(_KNOWN_RUBRIC, {}) if isinstance(session_or_connection, Session) else {}
    connection = _connection(session_or_connection)
    if isinstance(session_or_connection, Session):
        session_or_connection.flush()
    for start in range(0, len(ids), REFRESH_CHUNK):
        chunk = ids[start : start + REFRESH_CHUNK]
        to_lock = [rid for rid in chunk if rid not in held]
        if connection.dialect.name != "sqlite" and to_lock:
            connection.execute(
                select(_RESPONSE.c.id)
                .where(_RESPONSE.c.id.in_(to_lock))
                .order_by(_RESPONSE.c.id)
                .with_for_update(key_share=True)
            )
        _refresh_tally_chunk(connection, chunk)
        if start == 0 and len(ids) > REFRESH_CHUNK and connection.dialect.name == "postgresql":
            # The gold figures below are written a tally row at a time. A tally PostgreSQL has no statistics of
            # (filled in this transaction: an import, a build) looks to it as if (group, stage) picked out one
            # row, so each update would read every row of its group and stage: an import grew with the square
            # of the data. Statistics taken here tell it the key picks out the row; ANALYZE sees this
            # transaction's rows and costs a sample of them, once per large refresh.
            connection.exec_driver_sql(f"ANALYZE {_TALLY.name}")
        # One read of the chunk's labels that count serves both the gold figures and the response status.
        rubrics = _current_rubrics(connection, chunk, known)
        counted = _counted_labels(connection, chunk, rubrics)
        _refresh_gold_figures(connection, chunk, rubrics, counted)
        _refresh_status_chunk(connection, chunk, counted)
        _refresh_assignment_chunk(connection, chunk, rubrics)


def _refresh_tally_chunk(connection: Connection, chunk: list[int]) -> None:
    # An annotation label is unchecked while its group has no check label on the same criterion made on the same
    # rubric version (the label check's queue; db.access.independence's "check pending"): a check on an older version
    # counts no more than the label it checked. (response, criterion, stage, group) is unique, so the outer join
    # adds at most one row per label.
    connection.execute(delete(_TALLY).where(_TALLY.c.response_id.in_(chunk)))
    check = _LABEL.alias("check_label")
    version = func.coalesce(_LABEL.c.rubric_version_id, NO_RUBRIC_VERSION)
    unchecked = func.sum(case((check.c.id.is_(None) & (_LABEL.c.stage == Stage.annotation.value), 1), else_=0))
    keys = (_LABEL.c.response_id, _LABEL.c.group_no, _LABEL.c.stage, _LABEL.c.user_id, version)
    connection.execute(
        insert(_TALLY).from_select(
            ["response_id", "group_no", "stage", "user_id", "rubric_version_id", "n", "n_unchecked"],
            select(*keys, func.count(), unchecked)
            .select_from(
                _LABEL.outerjoin(
                    check,
                    and_(
                        check.c.response_id == _LABEL.c.response_id,
                        check.c.criterion_id == _LABEL.c.criterion_id,
                        check.c.group_no == _LABEL.c.group_no,
                        check.c.stage == Stage.check.value,
                        check.c.rubric_version_id == _LABEL.c.rubric_version_id,
                        _LABEL.c.stage == Stage.annotation.value,
                    ),
                )
            )
            .where(_LABEL.c.response_id.in_(chunk))
            .group_by(*keys),
        )
    )


def _counted_labels(
    connection: Connection, chunk: list[int], rubrics: dict[int, tuple[int | None, int]] | None = None
) -> list[Any]:
    """The labels of `chunk` that count on their case's current rubric (db.store.current_rubric), as
    (gold.LABEL_COLUMNS…, user_id, rubric_version_id) rows. `rubrics`: `_current_rubrics` of the chunk."""
    if rubrics is None:
        rubrics = _current_rubrics(connection, chunk, {})
    return [
        row
        for row in _labels_with_authors(connection, chunk)
        if counts_on_current_rubric(row[6], rubrics.get(int(row[0]), (None, 0))[0])
    ]


def _labels_with_authors(connection: Connection, chunk: list[int]) -> list[Any]:
    """The labels of `chunk` as (gold.LABEL_COLUMNS…, user_id, rubric_version_id) rows."""
    return list(
        connection.execute(
            select(
                _LABEL.c.response_id,
                _LABEL.c.criterion_id,
                _LABEL.c.stage,
                _LABEL.c.group_no,
                _LABEL.c.met,
                _LABEL.c.user_id,
                _LABEL.c.rubric_version_id,
            ).where(_LABEL.c.response_id.in_(chunk))
        ).all()
    )


def _refresh_gold_figures(
    connection: Connection,
    chunk: list[int],
    rubrics: dict[int, tuple[int | None, int]] | None = None,
    counted: list[Any] | None = None,
) -> None:
    """`n_gold_differs` and `n_no_gold` of the annotation rows of the tally of `chunk` (rows written already).

    Only labels that count on the case's current rubric take part, on both sides: the annotator's label and
    the labels gold is decided from (db.store.current_rubric, db.rules.gold), as the annotator's feedback compares them.
    `counted` are the chunk's labels that count when the caller has read them already (`_counted_labels`).
    """
    from db.rules import gold

    if counted is None:
        counted = _counted_labels(connection, chunk, rubrics)
    if not counted:
        return
    labels = _frame([row[:5] for row in counted])
    found = gold.gold_labels(labels)
    gold_of = {
        (int(r), str(c)): bool(m)
        for r, c, m in zip(found["response_id"].tolist(), found["criterion_id"].tolist(), found["met"].tolist())
    }
    figures: dict[tuple[int, int, int, int], list[int]] = {}
    for response_id, criterion_id, stage, group_no, met, user_id, version_id in counted:
        if stage != Stage.annotation.value:
            continue
        key = (int(response_id), int(group_no), int(user_id), NO_RUBRIC_VERSION if version_id is None else version_id)
        figure = figures.setdefault(key, [0, 0])
        decided = gold_of.get((int(response_id), str(criterion_id)))
        if decided is None:
            figure[1] += 1
        elif decided != bool(met):
            figure[0] += 1
    changes = [{"r": r, "g": g, "u": u, "v": v, "d": d, "w": w} for (r, g, u, v), (d, w) in figures.items() if d or w]
    if changes:
        connection.execute(
            update(_TALLY)
            .where(
                _TALLY.c.response_id == bindparam("r"),
                _TALLY.c.group_no == bindparam("g"),
                _TALLY.c.stage == Stage.annotation.value,
                _TALLY.c.user_id == bindparam("u"),
                _TALLY.c.rubric_version_id == bindparam("v"),
            )
            .values(n_gold_differs=bindparam("d"), n_no_gold=bindparam("w")),
            changes,
        )


def _refresh_status_chunk(connection: Connection, chunk: list[int], counted: list[Any] | None = None) -> None:
    # From the labels that count only (`counted`, read here when not given): gold, finals and disagreements
    # on an older rubric version are nobody's business any more.
    if counted is None:
        counted = _counted_labels(connection, chunk)
    labels = _frame([row[:5] for row in counted])
    records = [dict(zip(STATUS_COLUMNS, row)) for row in _status_rows(labels)]
    unlabeled = sorted(set(chunk) - {record["response_id"] for record in records})
    if unlabeled:
        connection.execute(delete(_STATUS).where(_STATUS.c.response_id.in_(unlabeled)))
    if records:
        connection.execute(_upsert_status(connection.dialect.name), records)


@lru_cache(maxsize=4)
def _upsert_status(dialect: str):
    """INSERT … ON CONFLICT (response_id) DO UPDATE: one statement where a delete and an insert were two."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        statement = postgresql.insert(_STATUS)
        set_ = {name: statement.excluded[name] for name in STATUS_COLUMNS if name != "response_id"}
        return statement.on_conflict_do_update(index_elements=[_STATUS.c.response_id], set_=set_)
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        lite = sqlite.insert(_STATUS)
        set_ = {name: lite.excluded[name] for name in STATUS_COLUMNS if name != "response_id"}
        return lite.on_conflict_do_update(index_elements=[_STATUS.c.response_id], set_=set_)
    raise NotImplementedError(f"kept figures on {dialect}")


def refresh_assignments(session_or_connection: Session | Connection, response_ids: Iterable[int]) -> None:
    """Rewrites the state of the labeling assignments of `response_ids` (from the kept tally and the current rubric)."""
    ids = sorted({int(rid) for rid in response_ids})
    if isinstance(session_or_connection, Session):
        session_or_connection.flush()
    connection = _connection(session_or_connection)
    for start in range(0, len(ids), REFRESH_CHUNK):
        chunk = ids[start : start + REFRESH_CHUNK]
        if connection.dialect.name != "sqlite":
            # The lock `refresh` takes: a save and a rubric approval touching one response take turns.
            connection.execute(
                select(_RESPONSE.c.id)
                .where(_RESPONSE.c.id.in_(chunk))
                .order_by(_RESPONSE.c.id)
                .with_for_update(key_share=True)
            )
        _refresh_assignment_chunk(connection, chunk)


_KNOWN_RUBRIC = "kept_known_rubric"


def hold_current_rubric(session: Session, response_id: int, rubric_version_id: int, size: int) -> None:
    """Notes the current rubric (version id, number of criteria) of a response as this transaction checked it
    already (a label save), so the refresh before commit need not read it again."""
    session.info.setdefault(_KNOWN_RUBRIC, {})[int(response_id)] = (int(rubric_version_id), int(size))


def _current_rubrics(connection: Connection, ids: list[int], known: dict) -> dict[int, tuple[int | None, int]]:
    """response_id -> (its case's current rubric version id or None, that rubric's size)."""
    out = {rid: known[rid] for rid in ids if rid in known}
    unknown = [rid for rid in ids if rid not in out]
    if not unknown:
        return out
    case_of = dict(
        connection.execute(select(_RESPONSE.c.id, _RESPONSE.c.case_pk).where(_RESPONSE.c.id.in_(unknown))).all()
    )
    current = current_version_ids(connection, set(case_of.values()))
    sizes: dict[int, int] = dict(
        connection.execute(
            select(_CRITERION.c.rubric_version_id, func.count())
            .where(_CRITERION.c.rubric_version_id.in_(sorted(set(current.values()))))
            .group_by(_CRITERION.c.rubric_version_id)
        ).all()
    )
    for rid in unknown:
        version_id = current.get(case_of.get(rid, -1))
        out[rid] = (version_id, sizes.get(version_id, 0) if version_id is not None else 0)
    return out


def _refresh_assignment_chunk(
    connection: Connection, ids: list[int], rubrics: dict[int, tuple[int | None, int]] | None = None
) -> None:
    # The state of (response, group) depends on that group's annotation labels and the case's current rubric only;
    # every labeling assignment of the pair is set to it (one UPDATE for the chunk, no read of the assignments).
    if rubrics is None:
        rubrics = _current_rubrics(connection, ids, {})
    counts: dict[tuple[int, int], dict[int | None, int]] = {}
    for response_id, group_no, version_id, n in connection.execute(
        select(_TALLY.c.response_id, _TALLY.c.group_no, _TALLY.c.rubric_version_id, func.sum(_TALLY.c.n))
        .where(_TALLY.c.response_id.in_(ids), _TALLY.c.stage == Stage.annotation.value)
        .group_by(_TALLY.c.response_id, _TALLY.c.group_no, _TALLY.c.rubric_version_id)
    ).all():
        version = None if version_id == NO_RUBRIC_VERSION else int(version_id)
        counts.setdefault((int(response_id), int(group_no)), {})[version] = int(n)
    changes = []
    for rid in ids:
        version_id, size = rubrics[rid]
        for group_no in (1, 2):
            by_version = counts.get((rid, group_no), {})
            fresh = sum(n for v, n in by_version.items() if counts_on_current_rubric(v, version_id))
            stale = sum(n for v, n in by_version.items() if not counts_on_current_rubric(v, version_id))
            state = label_status(version_id, size, fresh, stale)
            changes.append({"r": rid, "g": group_no, "s": state, "l": fresh, "z": size})
    connection.execute(
        update(_ASSIGNMENT)
        .where(
            _ASSIGNMENT.c.kind == AssignmentKind.label.value,
            _ASSIGNMENT.c.response_id == bindparam("r"),
            _ASSIGNMENT.c.group_no == bindparam("g"),
        )
        .values(label_status=bindparam("s"), labeled=bindparam("l"), rubric_size=bindparam("z")),
        changes,
    )


def rebuild_all(session_or_connection: Session | Connection) -> None:
    """Rewrites every kept figure (a repair)."""
    connection = _connection(session_or_connection)
    connection.execute(delete(_TALLY))
    connection.execute(delete(_STATUS))
    refresh(session_or_connection, connection.execute(select(_LABEL.c.response_id).distinct()).scalars())


def _every_labeled_chunk(connection: Connection) -> Iterator[list[int]]:
    ids = sorted(connection.execute(select(_LABEL.c.response_id).distinct()).scalars())
    for start in range(0, len(ids), REFRESH_CHUNK):
        yield ids[start : start + REFRESH_CHUNK]


def rebuild_status(connection: Connection) -> None:
    """Rewrites every response's status (a migration)."""
    connection.execute(delete(_STATUS))
    for chunk in _every_labeled_chunk(connection):
        _refresh_status_chunk(connection, chunk)


def rebuild_tally(connection: Connection) -> None:
    """Rewrites the whole label tally (a migration)."""
    connection.execute(delete(_TALLY))
    for chunk in _every_labeled_chunk(connection):
        _refresh_tally_chunk(connection, chunk)
        _refresh_gold_figures(connection, chunk)


def rebuild_assignments(session_or_connection: Session | Connection) -> None:
    """Rewrites the state of every labeling assignment."""
    connection = _connection(session_or_connection)
    refresh_assignments(
        session_or_connection,
        connection.execute(
            select(_ASSIGNMENT.c.response_id).where(_ASSIGNMENT.c.kind == AssignmentKind.label.value).distinct()
        ).scalars(),
    )


def _frame(rows) -> pd.DataFrame:
    import pandas as pd

    from db.rules import gold

    frame = pd.DataFrame(rows, columns=gold.LABEL_COLUMNS)
    frame["met"] = frame["met"].astype(bool)
    frame["stage"] = frame["stage"].astype(str)
    return frame


def status_of_labels(labels: pd.DataFrame) -> pd.DataFrame:
    """Per response of `labels` (rows of gold.LABEL_COLUMNS): STATUS_COLUMNS, by the rules of db.rules.gold."""
    import pandas as pd

    return pd.DataFrame(_status_rows(labels), columns=STATUS_COLUMNS).astype(object)


def _status_rows(labels: pd.DataFrame) -> list[tuple[int, ...]]:
    """`status_of_labels` as (response_id, n_compared, n_differing, n_unresolved, n_gold) tuples.

    Summed with numpy: a save refreshes one response, where a pandas group-by cost more than the rules.
    """
    import numpy as np

    from db.rules import gold

    if labels.empty:
        return []
    finals = gold.decisions_with_finals(labels)
    both = (finals["group1"].notna() & finals["group2"].notna()).to_numpy()
    differ = both & (finals["group1"] != finals["group2"]).fillna(False).to_numpy(dtype=bool)
    unresolved = differ & finals["adjudicated"].isna().to_numpy()
    _met, source = gold.gold_values(finals)
    response_ids = finals["response_id"].to_numpy(np.int64)
    # Decisions come in (response_id, criterion_id) order, so each response's decisions are one run.
    starts = np.flatnonzero(np.r_[True, response_ids[1:] != response_ids[:-1]])
    sums = [np.add.reduceat(values.astype(np.int64), starts) for values in (both, differ, unresolved, source != "")]
    return list(zip(response_ids[starts].tolist(), *(column.tolist() for column in sums)))


# Reading -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResponseFigures:
    response_id: int
    n_compared: int
    n_differing: int
    n_unresolved: int
    n_gold: int


def unresolved_total(session: Session) -> int:
    """Decisions where both groups have a final label, they differ, and nobody adjudicated (docs/REFERENCE.md §4)."""
    if _recounting():
        return int(recount_status(session)["n_unresolved"].sum())
    total = session.execute(
        select(func.coalesce(func.sum(_STATUS.c.n_unresolved), 0)).where(_STATUS.c.n_unresolved > 0)
    ).scalar_one()
    return int(total)


def responses_with_unresolved(session: Session) -> list[ResponseFigures]:
    """The figures of every response that has an unresolved disagreement, in response order."""
    if _recounting():
        frame = recount_status(session)
        frame = frame[frame["n_unresolved"] > 0]
        return [ResponseFigures(*map(int, row)) for row in frame[STATUS_COLUMNS].itertuples(index=False)]
    rows = session.execute(
        select(*(_STATUS.c[name] for name in STATUS_COLUMNS))
        .where(_STATUS.c.n_unresolved > 0)
        .order_by(_STATUS.c.response_id)
    ).all()
    return [ResponseFigures(*map(int, row)) for row in rows]


def tally(*, stage: str, group_no: int, user_id: int | None = None, counting: bool = True):
    """Labels per (response, user, rubric version) of one stage and group (of one user, when given), as a
    subquery with the columns response_id, user_id, rubric_version_id, n: kept, or recounted from the labels.

    Only the labels that count on the current rubric (db.store.current_rubric), unless `counting=False` (the rows of
    every version: what tells a stale response from one not yet labeled)."""
    if _recounting():
        version = func.coalesce(_LABEL.c.rubric_version_id, NO_RUBRIC_VERSION).label("rubric_version_id")
        filters = [_LABEL.c.stage == stage, _LABEL.c.group_no == group_no]
        if user_id is not None:
            filters.append(_LABEL.c.user_id == user_id)
        if counting:
            filters.append(counts_sql(_LABEL.c.rubric_version_id))
        return (
            select(_LABEL.c.response_id, _LABEL.c.user_id, version, func.count().label("n"))
            .where(*filters)
            .group_by(_LABEL.c.response_id, _LABEL.c.user_id, version)
            .subquery("tally")
        )
    filters = [_TALLY.c.stage == stage, _TALLY.c.group_no == group_no]
    if user_id is not None:
        filters.append(_TALLY.c.user_id == user_id)
    if counting:
        filters.append(counts_sql(_TALLY.c.rubric_version_id))  # NO_RUBRIC_VERSION names no version
    columns = (_TALLY.c.response_id, _TALLY.c.user_id, _TALLY.c.rubric_version_id, _TALLY.c.n)
    return select(*columns).where(*filters).subquery("tally")


def feedback_tally(*, user_id: int, group_no: int):
    """One annotator's annotation labels per (response, rubric version), as a subquery with the columns
    response_id, rubric_version_id, n, n_gold_differs, n_no_gold (the annotator's feedback figures)."""
    return (
        select(
            _TALLY.c.response_id, _TALLY.c.rubric_version_id, _TALLY.c.n, _TALLY.c.n_gold_differs, _TALLY.c.n_no_gold
        )
        .where(_TALLY.c.stage == Stage.annotation.value, _TALLY.c.group_no == group_no, _TALLY.c.user_id == user_id)
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


# The straightforward way: every label, every time --------------------------------------------


def recount_status(session: Session) -> pd.DataFrame:
    """STATUS_COLUMNS of every response with labels that count, computed from all those labels."""
    connection = session.connection()
    rows = connection.execute(
        select(_LABEL.c.response_id, _LABEL.c.criterion_id, _LABEL.c.stage, _LABEL.c.group_no, _LABEL.c.met).where(
            counts_sql(_LABEL.c.rubric_version_id)
        )
    ).all()
    return status_of_labels(_frame(rows))


def kept_status(session: Session) -> pd.DataFrame:
    """STATUS_COLUMNS of every response as kept (for comparing with `recount_status`)."""
    import pandas as pd

    rows = session.execute(select(*(_STATUS.c[name] for name in STATUS_COLUMNS)).order_by(_STATUS.c.response_id)).all()
    return pd.DataFrame(rows, columns=STATUS_COLUMNS).astype(object)


def kept_tally(session: Session) -> list[tuple]:
    return sorted(
        tuple(row)
        for row in session.execute(
            select(
                _TALLY.c.response_id,
                _TALLY.c.group_no,
                _TALLY.c.stage,
                _TALLY.c.user_id,
                _TALLY.c.rubric_version_id,
                _TALLY.c.n,
            )
        ).all()
    )


def recount_tally(session: Session) -> list[tuple]:
    version = func.coalesce(_LABEL.c.rubric_version_id, NO_RUBRIC_VERSION)
    keys = (_LABEL.c.response_id, _LABEL.c.group_no, _LABEL.c.stage, _LABEL.c.user_id, version)
    return sorted(tuple(row) for row in session.execute(select(*keys, func.count()).group_by(*keys)).all())
