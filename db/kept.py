"""Kept figures: what the checker pages, the sidebar and the queues count, kept up to date as labels change.

Recounting 1.8 M labels on every page visit is what made the checker pages slow at full scale. Two
small tables hold the figures instead, rewritten for exactly the responses a save or an import
touched, in the same transaction as the labels themselves (so they are never ahead or behind):

- `label_tally`: how many labels each person made on a response, per group and stage (the label
  check's annotator list and queue, "responses this checker labeled");
- `response_status`: per response, the decisions both groups labeled, those where the two groups'
  final labels differ, those of them still unresolved (nobody adjudicated) and those with gold
  (the adjudication queue, the unresolved count of the sidebar and of the progress page).

The rules (final label, gold) are db.gold's; this module only applies them to the touched responses.
`recount_*` compute the same figures from every label, the straightforward way (benchmarks set
them side by side; `use_recount` makes the readers below use them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from sqlalchemy import delete, event, func, insert, select
from sqlalchemy.engine import Connection
from sqlmodel import Session, SQLModel

from db import gold
from db.models import NO_RUBRIC_VERSION, Label, LabelTally, ResponseStatus, Stage

#: Responses read per statement when refreshing many (an import): bounds memory and the IN list.
REFRESH_CHUNK = 2000

_LABEL = SQLModel.metadata.tables["label"]
_TALLY = SQLModel.metadata.tables[LabelTally.__tablename__]
_STATUS = SQLModel.metadata.tables[ResponseStatus.__tablename__]
_RESPONSE = SQLModel.metadata.tables["response"]
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


def _connection(session_or_connection: Session | Connection) -> Connection:
    return session_or_connection.connection() if isinstance(session_or_connection, Session) else session_or_connection


# Writing: called by every path that changes labels, in its own transaction -------------------

_DIRTY = "kept_dirty_responses"


def touch(session: Session, response_ids: Iterable[int]) -> None:
    """Marks responses whose labels this transaction changed; their figures are rewritten just before it commits
    (once per response, however many of its labels were saved)."""
    session.info.setdefault(_DIRTY, set()).update(int(rid) for rid in response_ids)


@event.listens_for(Session, "before_flush")
def _touch_flushed_labels(session: Session, _context, _instances) -> None:
    # Label rows written through the ORM mark themselves; Core statements call `touch`.
    changed = [obj.response_id for obj in (*session.new, *session.dirty, *session.deleted) if isinstance(obj, Label)]
    if changed:
        touch(session, changed)


_LOCKED = "kept_locked_responses"


def hold_row_locks(session: Session, response_ids: Iterable[int]) -> None:
    """Notes that this transaction holds the row locks (FOR UPDATE) of these responses already, so the
    refresh before commit need not ask for them again (a label save locks its response first)."""
    session.info.setdefault(_LOCKED, set()).update(int(rid) for rid in response_ids)


@event.listens_for(Session, "before_commit")
def _refresh_touched(session: Session) -> None:
    dirty = session.info.pop(_DIRTY, None)
    locked = session.info.pop(_LOCKED, None) or ()
    if dirty:
        refresh(session, dirty, locked=locked)


@event.listens_for(Session, "after_rollback")
def _forget_touched(session: Session) -> None:
    session.info.pop(_DIRTY, None)
    session.info.pop(_LOCKED, None)


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
        connection.execute(delete(_TALLY).where(_TALLY.c.response_id.in_(chunk)))
        version = func.coalesce(_LABEL.c.rubric_version_id, NO_RUBRIC_VERSION)
        connection.execute(
            insert(_TALLY).from_select(
                ["response_id", "group_no", "stage", "user_id", "rubric_version_id", "n"],
                select(_LABEL.c.response_id, _LABEL.c.group_no, _LABEL.c.stage, _LABEL.c.user_id, version, func.count())
                .where(_LABEL.c.response_id.in_(chunk))
                .group_by(_LABEL.c.response_id, _LABEL.c.group_no, _LABEL.c.stage, _LABEL.c.user_id, version),
            )
        )
        records = [dict(zip(STATUS_COLUMNS, row)) for row in _status_rows(_label_rows(connection, chunk))]
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


def rebuild_all(session_or_connection: Session | Connection) -> None:
    """Rewrites every kept figure (a migration of an existing database; a repair)."""
    connection = _connection(session_or_connection)
    connection.execute(delete(_TALLY))
    connection.execute(delete(_STATUS))
    refresh(session_or_connection, connection.execute(select(_LABEL.c.response_id).distinct()).scalars())


def _label_rows(connection: Connection, response_ids: list[int]) -> pd.DataFrame:
    rows = connection.execute(
        select(_LABEL.c.response_id, _LABEL.c.criterion_id, _LABEL.c.stage, _LABEL.c.group_no, _LABEL.c.met).where(
            _LABEL.c.response_id.in_(response_ids)
        )
    ).all()
    return _frame(rows)


def _frame(rows) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=gold.LABEL_COLUMNS)
    frame["met"] = frame["met"].astype(bool)
    frame["stage"] = frame["stage"].astype(str)
    return frame


def status_of_labels(labels: pd.DataFrame) -> pd.DataFrame:
    """Per response of `labels` (rows of gold.LABEL_COLUMNS): STATUS_COLUMNS, by the rules of db.gold."""
    return pd.DataFrame(_status_rows(labels), columns=STATUS_COLUMNS).astype(object)


def _status_rows(labels: pd.DataFrame) -> list[tuple[int, ...]]:
    """`status_of_labels` as (response_id, n_compared, n_differing, n_unresolved, n_gold) tuples.

    Summed with numpy: a save refreshes one response, where a pandas group-by cost more than the rules.
    """
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


def tally(*, stage: str, group_no: int, user_id: int | None = None):
    """Labels per (response, user, rubric version) of one stage and group (of one user, when given), as a
    subquery with the columns response_id, user_id, rubric_version_id, n: kept, or recounted from the labels."""
    if _recounting():
        version = func.coalesce(_LABEL.c.rubric_version_id, NO_RUBRIC_VERSION).label("rubric_version_id")
        filters = [_LABEL.c.stage == stage, _LABEL.c.group_no == group_no]
        if user_id is not None:
            filters.append(_LABEL.c.user_id == user_id)
        return (
            select(_LABEL.c.response_id, _LABEL.c.user_id, version, func.count().label("n"))
            .where(*filters)
            .group_by(_LABEL.c.response_id, _LABEL.c.user_id, version)
            .subquery("tally")
        )
    filters = [_TALLY.c.stage == stage, _TALLY.c.group_no == group_no]
    if user_id is not None:
        filters.append(_TALLY.c.user_id == user_id)
    columns = (_TALLY.c.response_id, _TALLY.c.user_id, _TALLY.c.rubric_version_id, _TALLY.c.n)
    return select(*columns).where(*filters).subquery("tally")


def annotation_counts(session: Session, response_ids: Iterable[int], group_no: int) -> dict[int, dict[int | None, int]]:
    """response_id -> {rubric version id (None: none recorded) -> annotation labels of `group_no`}."""
    ids = sorted(set(response_ids))
    counts: dict[int, dict[int | None, int]] = {}
    source = tally(stage=Stage.annotation.value, group_no=group_no)
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
    """STATUS_COLUMNS of every labeled response, computed from all labels."""
    connection = session.connection()
    rows = connection.execute(
        select(_LABEL.c.response_id, _LABEL.c.criterion_id, _LABEL.c.stage, _LABEL.c.group_no, _LABEL.c.met)
    ).all()
    return status_of_labels(_frame(rows))


def kept_status(session: Session) -> pd.DataFrame:
    """STATUS_COLUMNS of every response as kept (for comparing with `recount_status`)."""
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
