"""Rewriting every kept figure at once (a migration, a repair), by the chunked refreshes of db/counts/write.py."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlmodel import Session

from db.counts.tables import (
    ASSIGNMENT,
    ASSIGNMENT_TOTALS,
    JUDGE_DECISION,
    JUDGE_TOTALS,
    LABEL,
    READY,
    STATUS,
    TALLY,
    TOTALS,
    UNRESOLVED_TOTALS,
    connection_of,
)
from db.counts.write import (
    REFRESH_CHUNK,
    TotalChanges,
    _add_changes,
    _move_totals,
    _refresh_gold_figures,
    _refresh_status_chunk,
    _refresh_tally_chunk,
    refresh,
    refresh_assignments,
)
from db.rules.enums import AssignmentKind, Stage
from db.store.models import UNRESOLVED_SHARDS


def rebuild_all(session_or_connection: Session | Connection) -> None:
    """Rewrites every kept figure (a repair)."""
    connection = connection_of(session_or_connection)
    connection.execute(delete(TALLY))
    connection.execute(delete(TOTALS))
    connection.execute(delete(STATUS))
    connection.execute(delete(UNRESOLVED_TOTALS))
    connection.execute(delete(READY))
    refresh(session_or_connection, connection.execute(select(LABEL.c.response_id).distinct()).scalars())
    rebuild_assignments(session_or_connection)
    rebuild_judge_totals(connection)


def rebuild_judge_totals(connection: Connection) -> None:
    """Rewrites `judge_totals` from every judge decision (a repair, a migration)."""
    connection.execute(delete(JUDGE_TOTALS))
    connection.execute(
        insert(JUDGE_TOTALS).from_select(
            ["judge", "n_decisions"],
            select(JUDGE_DECISION.c.judge, func.count()).group_by(JUDGE_DECISION.c.judge),
        )
    )


def _every_labeled_chunk(connection: Connection) -> Iterator[list[int]]:
    ids = sorted(connection.execute(select(LABEL.c.response_id).distinct()).scalars())
    for start in range(0, len(ids), REFRESH_CHUNK):
        yield ids[start : start + REFRESH_CHUNK]


def rebuild_status(connection: Connection) -> None:
    """Rewrites every response's status (a migration); `unresolved_totals` are the caller's to rebuild after
    (`rebuild_unresolved_totals`: the revisions that rebuild the status came before that table)."""
    connection.execute(delete(STATUS))
    for chunk in _every_labeled_chunk(connection):
        _refresh_status_chunk(connection, chunk)


def rebuild_unresolved_totals(connection: Connection) -> None:
    """Rewrites `unresolved_totals` from every response's status (a repair, a migration)."""
    connection.execute(delete(UNRESOLVED_TOTALS))
    shard = STATUS.c.response_id % UNRESOLVED_SHARDS
    connection.execute(
        insert(UNRESOLVED_TOTALS).from_select(
            ["shard", "n_decisions", "n_responses"],
            select(shard, func.sum(STATUS.c.n_unresolved), func.count())
            .where(STATUS.c.n_unresolved > 0)
            .group_by(shard),
        )
    )


def rebuild_tally(connection: Connection) -> None:
    """Rewrites the whole label tally and the totals kept from it (a migration)."""
    connection.execute(delete(TALLY))
    connection.execute(delete(TOTALS))
    moved: TotalChanges = {}
    for chunk in _every_labeled_chunk(connection):
        _add_changes(moved, _refresh_tally_chunk(connection, chunk))
        _refresh_gold_figures(connection, chunk)
    _move_totals(connection, moved)


def rebuild_assignments(session_or_connection: Session | Connection) -> None:
    """Rewrites the state of every labeling assignment, each person's assigned and done totals, and which
    responses are ready for adjudication."""
    connection = connection_of(session_or_connection)
    connection.execute(delete(READY))
    # From nothing: no assignment's state is kept, so the refresh below adds every one to its owner's totals.
    connection.execute(delete(ASSIGNMENT_TOTALS))
    connection.execute(
        update(ASSIGNMENT).where(ASSIGNMENT.c.kind == AssignmentKind.label.value).values(label_status=None)
    )
    assigned = select(ASSIGNMENT.c.response_id).where(
        ASSIGNMENT.c.kind == AssignmentKind.label.value, ASSIGNMENT.c.response_id.is_not(None)
    )
    annotated = select(TALLY.c.response_id).where(TALLY.c.stage == Stage.annotation.value)
    refresh_assignments(session_or_connection, connection.execute(assigned.union(annotated)).scalars())
