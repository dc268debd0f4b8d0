"""Writing the kept figures: every writer that changes labels, labeling assignments or a case's current rubric
calls one of these inside its own transaction, before it returns, so the figures are never ahead or behind.

- `refresh(session, response_ids)`: the responses whose labels changed (a save, a check, an adjudication, an
  import): their tally rows and what they add to each person's totals, their status, the state of their
  labeling assignments and whether each group's labels on them are ready for adjudication;
- `refresh_assignments(session, response_ids)`: responses that got new labeling assignments: their state;
- `refresh_cases(session, case_pks)`: cases whose current rubric changed (an approval, an imported rubric):
  every figure of their responses, since which labels count changed with it;
- `rebuild_*` (db/counts/rebuild.py): every figure at once (a migration, a repair).

The rules (final label, gold) are db.rules.gold's, the labels that count db.store.current_rubric's; this module
only applies them to the responses it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from sqlalchemy import Table, and_, bindparam, case, delete, false, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlmodel import Session

from db.counts.state import DONE, label_status
from db.counts.status import label_frame, status_rows
from db.counts.tables import (
    ASSIGNMENT,
    ASSIGNMENT_TOTALS,
    CRITERION,
    JUDGE_TOTALS,
    LABEL,
    READY,
    RESPONSE,
    STATUS,
    STATUS_COLUMNS,
    TALLY,
    TOTALS,
    UNRESOLVED_TOTALS,
    connection_of,
)
from db.rules.enums import AssignmentKind, Stage
from db.store.current_rubric import counts_on_current_rubric, current_version_ids
from db.store.models import NO_RUBRIC_VERSION, UNRESOLVED_SHARDS

#: Responses read per statement when refreshing many (an import): bounds memory and the IN list.
REFRESH_CHUNK = 2000

#: response_id -> (its case's current rubric version id, or None without one; that rubric's number of criteria).
Rubrics = dict[int, tuple[int | None, int]]


def refresh(
    session_or_connection: Session | Connection,
    response_ids: Iterable[int],
    *,
    locked: Iterable[int] = (),
    known_rubrics: Mapping[int, tuple[int, int]] | None = None,
) -> None:
    """Rewrites the kept figures of `response_ids` from their labels as this transaction sees them: their tally
    rows, their status and the state of their labeling assignments.

    On PostgreSQL the response rows are locked first (in id order; FOR NO KEY UPDATE, which the
    foreign-key locks of new label rows do not conflict with), so two transactions touching the same
    response take turns here and the later one counts the earlier one's committed labels; rows this
    transaction has locked already (`locked`: a label save locks its response first) are not asked for again.
    SQLite's writers are serialised by BEGIN IMMEDIATE already. `known_rubrics`: the current rubric of
    responses as the caller checked it already in this transaction (a label save), not read again.
    """
    ids = sorted({int(rid) for rid in response_ids})
    if not ids:
        return
    held = {int(rid) for rid in locked}
    known: Rubrics = dict(known_rubrics or {})
    if isinstance(session_or_connection, Session):
        session_or_connection.flush()
    connection = connection_of(session_or_connection)
    moved: TotalChanges = {}
    owners: OwnerChanges = {}
    unresolved: ShardChanges = {}
    for start in range(0, len(ids), REFRESH_CHUNK):
        chunk = ids[start : start + REFRESH_CHUNK]
        _lock_responses(connection, [rid for rid in chunk if rid not in held])
        rubrics = _current_rubrics(connection, chunk, known)
        _add_changes(moved, _refresh_tally_chunk(connection, chunk, rubrics))
        if start == 0 and len(ids) > REFRESH_CHUNK and connection.dialect.name == "postgresql":
            # The gold figures below are written a tally row at a time. A tally PostgreSQL has no statistics of
            # (filled in this transaction: an import, a build) looks to it as if (group, stage) picked out one
            # row, so each update would read every row of its group and stage: an import grew with the square
            # of the data. Statistics taken here tell it the key picks out the row; ANALYZE sees this
            # transaction's rows and costs a sample of them, once per large refresh.
            connection.exec_driver_sql(f"ANALYZE {TALLY.name}")
        # One read of the chunk's labels that count serves both the gold figures and the response status.
        counted = _counted_labels(connection, chunk, rubrics)
        _refresh_gold_figures(connection, chunk, rubrics, counted)
        _add_changes(unresolved, _refresh_status_chunk(connection, chunk, counted))
        _add_changes(owners, _refresh_assignment_chunk(connection, chunk, rubrics))
    # The totals last, once: on PostgreSQL their rows are locked after every response row this refresh locks, so
    # a writer holding a response never waits for a totals row held by one waiting for that response.
    _move_totals(connection, moved)
    _move_owner_totals(connection, owners)
    _move_unresolved_totals(connection, unresolved)


def refresh_assignments(session_or_connection: Session | Connection, response_ids: Iterable[int | None]) -> None:
    """Rewrites the state of the labeling assignments of `response_ids` (from the kept tally and the current
    rubric): a writer that made labeling assignments calls it for their responses."""
    ids = sorted({int(rid) for rid in response_ids if rid is not None})
    if isinstance(session_or_connection, Session):
        session_or_connection.flush()
    connection = connection_of(session_or_connection)
    if len(ids) > REFRESH_CHUNK and connection.dialect.name == "postgresql":
        # The assignments were just written in this transaction (an admin's handout, the demo's): to a PostgreSQL
        # with statistics of a smaller table they look like a handful of rows, it took the kind-led index for each
        # update below and read every labeling assignment per row, so handing out work grew with the square of
        # it. Statistics taken here send each update
        # through the response's index (as `refresh` does for the tally).
        connection.exec_driver_sql(f"ANALYZE {ASSIGNMENT.name}")
    owners: OwnerChanges = {}
    for start in range(0, len(ids), REFRESH_CHUNK):
        chunk = ids[start : start + REFRESH_CHUNK]
        # The lock `refresh` takes: a save and a rubric approval touching one response take turns.
        _lock_responses(connection, chunk)
        _add_changes(owners, _refresh_assignment_chunk(connection, chunk))
    _move_owner_totals(connection, owners)


def refresh_cases(session_or_connection: Session | Connection, case_pks: Iterable[int]) -> None:
    """Rewrites every kept figure of the responses of `case_pks` and the state of their labeling assignments: a
    writer that changed a case's current rubric (an approval, an imported rubric) calls it, since which labels
    count changed with it."""
    pks = sorted({int(pk) for pk in case_pks})
    if isinstance(session_or_connection, Session):
        session_or_connection.flush()
    connection = connection_of(session_or_connection)
    response_ids: set[int] = set()
    for start in range(0, len(pks), REFRESH_CHUNK):
        response_ids.update(
            connection.execute(
                select(RESPONSE.c.id).where(RESPONSE.c.case_pk.in_(pks[start : start + REFRESH_CHUNK]))
            ).scalars()
        )
    refresh(session_or_connection, response_ids)


def _lock_responses(connection: Connection, response_ids: list[int]) -> None:
    if connection.dialect.name == "sqlite" or not response_ids:
        return
    connection.execute(
        select(RESPONSE.c.id)
        .where(RESPONSE.c.id.in_(response_ids))
        .order_by(RESPONSE.c.id)
        .with_for_update(key_share=True)
    )


def _refresh_tally_chunk(connection: Connection, chunk: list[int], rubrics: Rubrics | None = None) -> TotalChanges:
    """Rewrites the tally rows of `chunk`; returns how `label_totals` moves with them (`_move_totals` applies it).
    `rubrics`: the chunk's `_current_rubrics` when the caller has read them already."""
    # An annotation label is unchecked while its group has no check label on the same criterion made on the same
    # rubric version (the label check's queue; db.access.independence's "check pending"): a check on an older version
    # counts no more than the label it checked. (response, criterion, stage, group) is unique, so the outer join
    # adds at most one row per label.
    if rubrics is None:
        rubrics = _current_rubrics(connection, chunk, {})
    # The rows taken away say what they added to the totals, the rows written what they add (RETURNING: no
    # statement of its own).
    returned = (TALLY.c.response_id, TALLY.c.group_no, TALLY.c.stage, TALLY.c.user_id, TALLY.c.counting, TALLY.c.n)
    before = connection.execute(delete(TALLY).where(TALLY.c.response_id.in_(chunk)).returning(*returned)).all()
    check = LABEL.alias("check_label")
    version = func.coalesce(LABEL.c.rubric_version_id, NO_RUBRIC_VERSION)
    unchecked = func.sum(case((check.c.id.is_(None) & (LABEL.c.stage == Stage.annotation.value), 1), else_=0))
    # A label's version is always one of its own case's (db.store.current_rubric.counts_sql), so "one of the chunk's
    # current versions" is "its case's current version".
    current = sorted({version_id for version_id, _ in rubrics.values() if version_id is not None})
    counting = case((version.in_(current), True), else_=False) if current else false()
    keys = (LABEL.c.response_id, LABEL.c.group_no, LABEL.c.stage, LABEL.c.user_id, version)
    after = connection.execute(
        insert(TALLY)
        .from_select(
            ["response_id", "group_no", "stage", "user_id", "rubric_version_id", "counting", "n", "n_unchecked"],
            select(*keys, counting, func.count(), unchecked)
            .select_from(
                LABEL.outerjoin(
                    check,
                    and_(
                        check.c.response_id == LABEL.c.response_id,
                        check.c.criterion_id == LABEL.c.criterion_id,
                        check.c.group_no == LABEL.c.group_no,
                        check.c.stage == Stage.check.value,
                        check.c.rubric_version_id == LABEL.c.rubric_version_id,
                        LABEL.c.stage == Stage.annotation.value,
                    ),
                )
            )
            .where(LABEL.c.response_id.in_(chunk))
            .group_by(*keys),
        )
        .returning(*returned)
    ).all()
    changes = _person_totals(after)
    for key, (responses, n) in _person_totals(before).items():
        _add_changes(changes, {key: (-responses, -n)})
    return changes


#: (group_no, stage, user_id, counting): a row of `label_totals`.
TotalKey = tuple[int, str, int, bool]
#: How `label_totals` rows move: key -> (responses, labels) to add (negative: to take away).
TotalChanges = dict[TotalKey, tuple[int, int]]


#: How `assignment_totals` rows move: (user_id, group_no) -> (assigned, done) to add (negative: to take away).
OwnerChanges = dict[tuple[int, int], tuple[int, int]]
#: How `unresolved_totals` rows move: shard -> (unresolved decisions, responses holding some) to add.
ShardChanges = dict[int, tuple[int, int]]


def _add_changes(into: dict[Any, tuple[int, int]], changes: Mapping[Any, tuple[int, int]]) -> None:
    for key, (responses, n) in changes.items():
        had = into.get(key, (0, 0))
        into[key] = (had[0] + responses, had[1] + n)


def _person_totals(rows: Iterable[Any]) -> dict[TotalKey, tuple[int, int]]:
    """(response_id, group_no, stage, user_id, counting, n) rows summed per `label_totals` key: (responses, labels)."""
    responses: dict[TotalKey, set[int]] = {}
    labels: dict[TotalKey, int] = {}
    for response_id, group_no, stage, user_id, counting, n in rows:
        key = (int(group_no), str(stage), int(user_id), bool(counting))
        responses.setdefault(key, set()).add(int(response_id))
        labels[key] = labels.get(key, 0) + int(n)
    return {key: (len(responses[key]), labels[key]) for key in labels}


def _move_totals(connection: Connection, changes: Mapping[TotalKey, tuple[int, int]]) -> None:
    """Adds `changes` to `label_totals` (rows that change by nothing are not touched).

    A chunk's `before` is what its rows added, since its responses are locked (or SQLite's writer is alone). The
    rows move in key order: two writers moving the same rows take their locks in one order.
    """
    _move(connection, TOTALS, ("group_no", "stage", "user_id", "counting"), ("n_responses", "n_labels"), changes)


def _move(
    connection: Connection, table: Table, keys: tuple[str, ...], values: tuple[str, ...], changes: Mapping[Any, Any]
) -> None:
    """Adds `changes` (a key, or a tuple of the `keys` columns -> the change of the `values` columns, likewise) to a
    totals table, in key order; rows that change by nothing are not touched. Every kept total moves here."""
    rows = []
    for key, change in sorted(changes.items()):
        moved = change if isinstance(change, tuple) else (change,)
        if any(moved):
            rows.append(dict(zip(keys, key if isinstance(key, tuple) else (key,))) | dict(zip(values, moved)))
    if rows:
        connection.execute(_add_to(connection.dialect.name, table.name), rows)


def _move_owner_totals(connection: Connection, changes: Mapping[tuple[int, int], tuple[int, int]]) -> None:
    """Adds `changes` to `assignment_totals`, in key order (rows that change by nothing are not touched)."""
    _move(connection, ASSIGNMENT_TOTALS, ("user_id", "group_no"), ("n_assigned", "n_done"), changes)


def move_assignment_owner(
    session_or_connection: Session | Connection, *, status: str | None, group_no: int, from_user: int, to_user: int
) -> None:
    """A labeling assignment of `group_no` in state `status` changes hands (db.work.assignments.reassign, before
    it writes the new owner): what it adds to `assignment_totals` moves with it. An assignment whose state is
    not kept yet adds nothing."""
    if status is None or from_user == to_user:
        return
    done = int(status == DONE)
    _move_owner_totals(
        connection_of(session_or_connection), {(from_user, group_no): (-1, -done), (to_user, group_no): (1, done)}
    )


def _move_unresolved_totals(connection: Connection, changes: Mapping[int, tuple[int, int]]) -> None:
    """Adds `changes` (shard -> (decisions, responses)) to `unresolved_totals`, in shard order."""
    _move(connection, UNRESOLVED_TOTALS, ("shard",), ("n_decisions", "n_responses"), changes)


def add_judge_decisions(session_or_connection: Session | Connection, added: Mapping[str, int]) -> None:
    """Adds the decisions a writer inserted (judge -> how many) to `judge_totals`. The judge importer and a judge
    run call it in their own transaction after their insert; replacing a decision's answer changes no total."""
    _move(connection_of(session_or_connection), JUDGE_TOTALS, ("judge",), ("n_decisions",), added)


@lru_cache(maxsize=8)
def _add_to(dialect: str, table_name: str):
    """INSERT … ON CONFLICT (primary key) DO UPDATE SET n = n + the change, for every other column of a totals
    table: a row is created or moved in one statement."""
    table = {t.name: t for t in (TOTALS, JUDGE_TOTALS, ASSIGNMENT_TOTALS, UNRESOLVED_TOTALS)}[table_name]
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        statement: Any = postgresql.insert(table)
    elif dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        statement = sqlite.insert(table)
    else:
        raise NotImplementedError(f"kept figures on {dialect}")
    return statement.on_conflict_do_update(
        index_elements=list(table.primary_key.columns),
        set_={c.name: c + statement.excluded[c.name] for c in table.columns if not c.primary_key},
    )


def _counted_labels(connection: Connection, chunk: list[int], rubrics: Rubrics | None = None) -> list[Any]:
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
                LABEL.c.response_id,
                LABEL.c.criterion_id,
                LABEL.c.stage,
                LABEL.c.group_no,
                LABEL.c.met,
                LABEL.c.user_id,
                LABEL.c.rubric_version_id,
            ).where(LABEL.c.response_id.in_(chunk))
        ).all()
    )


def _refresh_gold_figures(
    connection: Connection,
    chunk: list[int],
    rubrics: Rubrics | None = None,
    counted: list[Any] | None = None,
) -> None:
    """`n_gold_differs` and `n_no_gold` of the annotation rows of the tally of `chunk` (rows written already).

    Feedback compares with final gold (docs/REFERENCE.md §4.1): a label on a final response counts in
    `n_gold_differs` when gold differs from it; every label on a response that is not final yet counts in
    `n_no_gold`, whatever its decision's provisional gold says. Only labels that count on the case's current
    rubric take part, on both sides: the annotator's label and the labels gold and the final state are decided
    from (db.store.current_rubric, db.rules.gold), as the annotator's feedback compares them.
    `counted` are the chunk's labels that count when the caller has read them already (`_counted_labels`).
    """
    import pandas as pd

    from db.rules import gold

    if rubrics is None:
        rubrics = _current_rubrics(connection, chunk, {})
    if counted is None:
        counted = _counted_labels(connection, chunk, rubrics)
    if not counted:
        return
    labels = label_frame([row[:5] for row in counted])
    finals = gold.decisions_with_finals(labels)
    labeled = sorted({int(row[0]) for row in counted})
    sizes = pd.Series([rubrics.get(rid, (None, 0))[1] for rid in labeled], index=labeled, dtype="int64")
    states = gold.gold_states(labels, sizes, finals)
    final = set(states.loc[states["final"], "response_id"].tolist())
    found = gold.gold_from_decisions(finals)
    gold_of = {
        (int(r), str(c)): bool(m)
        for r, c, m in zip(found["response_id"].tolist(), found["criterion_id"].tolist(), found["met"].tolist())
        if int(r) in final
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
            update(TALLY)
            .where(
                TALLY.c.response_id == bindparam("r"),
                TALLY.c.group_no == bindparam("g"),
                TALLY.c.stage == Stage.annotation.value,
                TALLY.c.user_id == bindparam("u"),
                TALLY.c.rubric_version_id == bindparam("v"),
            )
            .values(n_gold_differs=bindparam("d"), n_no_gold=bindparam("w")),
            changes,
        )


def _refresh_status_chunk(connection: Connection, chunk: list[int], counted: list[Any] | None = None) -> ShardChanges:
    """Rewrites the status rows of `chunk`; returns how `unresolved_totals` moves with them (shard -> (unresolved
    decisions, responses holding some)), from the rows as they were (their responses are locked) and as written."""
    # From the labels that count only (`counted`, read here when not given): gold, finals and disagreements
    # on an older rubric version are nobody's business any more.
    if counted is None:
        counted = _counted_labels(connection, chunk)
    were = connection.execute(
        select(STATUS.c.response_id, STATUS.c.n_unresolved).where(
            STATUS.c.response_id.in_(chunk), STATUS.c.n_unresolved > 0
        )
    ).all()
    labels = label_frame([row[:5] for row in counted])
    records = [dict(zip(STATUS_COLUMNS, row)) for row in status_rows(labels)]
    unlabeled = sorted(set(chunk) - {record["response_id"] for record in records})
    if unlabeled:
        connection.execute(delete(STATUS).where(STATUS.c.response_id.in_(unlabeled)))
    if records:
        connection.execute(_upsert_status(connection.dialect.name), records)
    changes: dict[int, tuple[int, int]] = {}
    moves = [(int(rid), -int(n)) for rid, n in were]
    moves += [(int(r["response_id"]), int(r["n_unresolved"])) for r in records if r["n_unresolved"] > 0]
    for response_id, n in moves:
        shard = response_id % UNRESOLVED_SHARDS
        decisions, responses = changes.get(shard, (0, 0))
        changes[shard] = (decisions + n, responses + (1 if n > 0 else -1))
    return changes


@lru_cache(maxsize=4)
def _upsert_status(dialect: str):
    """INSERT … ON CONFLICT (response_id) DO UPDATE: one statement where a delete and an insert were two."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        statement = postgresql.insert(STATUS)
        set_ = {name: statement.excluded[name] for name in STATUS_COLUMNS if name != "response_id"}
        return statement.on_conflict_do_update(index_elements=[STATUS.c.response_id], set_=set_)
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        lite = sqlite.insert(STATUS)
        set_ = {name: lite.excluded[name] for name in STATUS_COLUMNS if name != "response_id"}
        return lite.on_conflict_do_update(index_elements=[STATUS.c.response_id], set_=set_)
    raise NotImplementedError(f"kept figures on {dialect}")


def _current_rubrics(connection: Connection, ids: list[int], known: Rubrics) -> Rubrics:
    """response_id -> (its case's current rubric version id or None, that rubric's size)."""
    out = {rid: known[rid] for rid in ids if rid in known}
    unknown = [rid for rid in ids if rid not in out]
    if not unknown:
        return out
    case_of = dict(
        connection.execute(select(RESPONSE.c.id, RESPONSE.c.case_pk).where(RESPONSE.c.id.in_(unknown))).all()
    )
    current = current_version_ids(connection, set(case_of.values()))
    sizes: dict[int, int] = dict(
        connection.execute(
            select(CRITERION.c.rubric_version_id, func.count())
            .where(CRITERION.c.rubric_version_id.in_(sorted(set(current.values()))))
            .group_by(CRITERION.c.rubric_version_id)
        ).all()
    )
    for rid in unknown:
        version_id = current.get(case_of.get(rid, -1))
        out[rid] = (version_id, sizes.get(version_id, 0) if version_id is not None else 0)
    return out


def _refresh_assignment_chunk(connection: Connection, ids: list[int], rubrics: Rubrics | None = None) -> OwnerChanges:
    """Rewrites the state of the labeling assignments of `ids`; returns how `assignment_totals` moves with them
    (the caller applies it once, after its last response lock)."""
    # The state of (response, group) depends on that group's annotation labels and the case's current rubric only;
    # every labeling assignment of the pair is set to it (one UPDATE for the chunk). Each assignment's state as it
    # was says what it added to its owner's totals (nothing while none was kept).
    # The pair is ready for adjudication when that state is done and no label that counts waits for its check.
    if rubrics is None:
        rubrics = _current_rubrics(connection, ids, {})
    labeled: dict[tuple[int, int], dict[int | None, tuple[int, int]]] = {}
    for response_id, group_no, version_id, n, unchecked in connection.execute(
        select(
            TALLY.c.response_id,
            TALLY.c.group_no,
            TALLY.c.rubric_version_id,
            func.sum(TALLY.c.n),
            func.sum(TALLY.c.n_unchecked),
        )
        .where(TALLY.c.response_id.in_(ids), TALLY.c.stage == Stage.annotation.value)
        .group_by(TALLY.c.response_id, TALLY.c.group_no, TALLY.c.rubric_version_id)
    ).all():
        version = None if version_id == NO_RUBRIC_VERSION else int(version_id)
        labeled.setdefault((int(response_id), int(group_no)), {})[version] = (int(n), int(unchecked))
    changes, ready = [], []
    states: dict[tuple[int, int], str] = {}
    for rid in ids:
        version_id, size = rubrics[rid]
        for group_no in (1, 2):
            by_version = labeled.get((rid, group_no), {})
            counting = [figures for v, figures in by_version.items() if counts_on_current_rubric(v, version_id)]
            fresh = sum(n for n, _ in counting)
            stale = sum(n for v, (n, _) in by_version.items() if not counts_on_current_rubric(v, version_id))
            state = label_status(version_id, size, fresh, stale)
            states[(rid, group_no)] = state
            changes.append({"r": rid, "g": group_no, "s": state, "l": fresh, "z": size})
            if state == DONE and not any(unchecked for _, unchecked in counting):
                ready.append({"response_id": rid, "group_no": group_no})
    owners: OwnerChanges = {}
    for user_id, group_no, response_id, before in connection.execute(
        select(ASSIGNMENT.c.user_id, ASSIGNMENT.c.group_no, ASSIGNMENT.c.response_id, ASSIGNMENT.c.label_status).where(
            ASSIGNMENT.c.kind == AssignmentKind.label.value, ASSIGNMENT.c.response_id.in_(ids)
        )
    ):
        after = states.get((int(response_id), int(group_no)))
        if after is None:
            continue
        had = (0, 0) if before is None else (1, int(before == DONE))
        change = (1 - had[0], int(after == DONE) - had[1])
        if change != (0, 0):
            _add_changes(owners, {(int(user_id), int(group_no)): change})
    connection.execute(
        update(ASSIGNMENT)
        .where(
            ASSIGNMENT.c.kind == AssignmentKind.label.value,
            ASSIGNMENT.c.response_id == bindparam("r"),
            ASSIGNMENT.c.group_no == bindparam("g"),
        )
        .values(label_status=bindparam("s"), labeled=bindparam("l"), rubric_size=bindparam("z")),
        changes,
    )
    connection.execute(delete(READY).where(READY.c.response_id.in_(ids)))
    if ready:
        connection.execute(insert(READY), ready)
    return owners
