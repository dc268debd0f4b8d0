"""Every statement that writes `label` rows: a save of one response's labels of one stage (`write`) and the label
importer's bulk load (`write_bulk`).

A save, whatever its stage: locks the labels of its (response, stage, group) in criterion order (PostgreSQL;
SQLite's writers are serialised by BEGIN IMMEDIATE already), checks the lock versions the page read (the one
optimistic lock), inserts and updates the rows (one statement each, whatever their number), makes its audit
entry and refreshes the response's kept figures once. What differs between annotation, check and adjudication
is data (`StageRule`): what a refusal calls a label and how much it names, whether a decision saved since as it
is wanted now is a conflict, whether a label saved as it is wanted is left alone, and the audit entry's shape.
Who may save what, and what a decision must hold, is the caller's (db.labeling, db.review); the importer's
checks of a file's rows are db.importers'.

May import: db.label_rows.refusals, db.label_rows.view, db.access, db.counts, db.store, db.rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import bindparam, insert, select as sa_select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, col, select

from db import counts
from db.access.audit import record
from db.access.audit_replay import bulk_label_row
from db.label_rows.refusals import LabelsChanged, SavedSince
from db.label_rows.view import label_view, own_label_view
from db.rules.enums import NO_GROUP, Stage
from db.rules.errors import NotFound, StaleEdit
from db.store.models import Label, Response, User, table_of, utcnow

LABEL_TABLE = SQLModel.metadata.tables["label"]
#: A replaced label: its new decision, author, note and rubric stamp, one revision on (a page's save
#: holds the row locked, an import replaces it in its own transaction).
_REPLACE_LABEL = (
    update(LABEL_TABLE)
    .where(LABEL_TABLE.c.id == bindparam("label_id"))
    .values(
        met=bindparam("met"),
        user_id=bindparam("user_id"),
        note=bindparam("note"),
        rubric_version_id=bindparam("rubric_version_id"),
        updated_at=bindparam("updated_at"),
        lock_version=LABEL_TABLE.c.lock_version + 1,
    )
)


@dataclass(frozen=True)
class StageRule:
    """What a save of one stage's labels does differently from the others' (the stage description)."""

    stage: Stage
    #: What a refusal calls one label of the stage.
    what: str
    #: The audit log's entity name of a label of the stage.
    entity: str
    #: A label saved since as it is wanted now is no conflict (the annotator's group agrees on it already).
    same_is_no_conflict: bool
    #: A label saved as it is wanted is left alone (no new revision, no audit); else every save is a revision.
    unchanged_left_alone: bool
    #: The audit: one entry per label (`CASE/MODEL/CRITERION/STAGE/GROUP`), else one for the response's labels
    #: (`CASE/CODE/STAGE/gN`, before and after per criterion).
    audit_per_label: bool
    #: A refusal names every conflict (LabelsChanged), else the first label saved since (SavedSince).
    names_every_conflict: bool


ANNOTATION = StageRule(Stage.annotation, "label", "label", True, True, False, True)
CHECK = StageRule(Stage.check, "check", "check", False, False, True, False)
ADJUDICATION = StageRule(Stage.adjudication, "decision", "adjudication", False, False, True, False)
RULES: dict[str, StageRule] = {rule.stage.value: rule for rule in (ANNOTATION, CHECK, ADJUDICATION)}


@dataclass(frozen=True)
class Place:
    """Where a save writes: one response's labels of one stage and group, stamped with one rubric version."""

    response: Response
    case_id: str
    group_no: int
    rubric_version_id: int | None
    #: The caller holds the response's row lock and checked its current rubric (size) already: not asked again.
    locked_rubric_size: int | None = None


@dataclass(frozen=True)
class Wanted:
    """One label as the save wants it, and the lock version of it the page read (0: it showed none)."""

    criterion_id: str
    met: bool
    note: str | None
    seen: int = 0


@dataclass(frozen=True)
class Written:
    created: int
    updated: int
    unchanged: int


def write(session: Session, actor: User, rule: StageRule, place: Place, wanted: Sequence[Wanted]) -> Written:
    """Writes the wanted labels of `place` for `actor`: refused with the stage's StaleEdit, nothing written, when a
    label the page read was saved since (or, for a label the page showed none of, inserted since)."""
    existing = _locked_labels(session, place.response.id, rule.stage, place.group_no)
    conflicts = _conflicts(rule, place, wanted, existing)
    if conflicts:
        raise _refusal(session, actor, rule, place, conflicts, existing)
    changes = _changes(actor, rule, place, wanted, existing)
    if changes.new_rows:
        _insert(session, actor, rule, place, changes.new_rows)
    if changes.changed_rows:
        session.execute(_REPLACE_LABEL, changes.changed_rows)
        for cid in changes.before:
            session.expire(existing[cid])  # the loaded rows are stale now
    if changes.after:
        _audit(session, actor, rule, place, changes)
        response_id, size = place.response.id, place.locked_rubric_size
        if size is None or place.rubric_version_id is None:
            counts.refresh(session, [response_id])
        else:
            counts.refresh(
                session,
                [response_id],
                locked=[response_id],
                known_rubrics={response_id: (place.rubric_version_id, size)},
            )
    created, updated = len(changes.new_rows), len(changes.changed_rows)
    return Written(created, updated, len(wanted) - created - updated)


def _locked_labels(session: Session, response_id: int, stage: str, group_no: int) -> dict[str, Label]:
    """The labels of (response, stage, group) as committed now, their rows locked in criterion order."""
    statement = (
        select(Label)
        .where(Label.response_id == response_id, Label.stage == stage, Label.group_no == group_no)
        .order_by(col(Label.criterion_id))
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return {label.criterion_id: label for label in session.exec(statement).all()}


def _same(label: Label, wanted: Wanted, rubric_version_id: int | None) -> bool:
    return (label.met, label.note, label.rubric_version_id) == (wanted.met, wanted.note, rubric_version_id)


def _conflicts(rule: StageRule, place: Place, wanted: Sequence[Wanted], existing: Mapping[str, Label]) -> list[str]:
    """The optimistic lock: the criteria whose label is not at the revision the page read."""
    found = []
    for item in wanted:
        label = existing.get(item.criterion_id)
        if (label.lock_version if label else 0) == item.seen:
            continue
        if rule.same_is_no_conflict and label is not None and _same(label, item, place.rubric_version_id):
            continue
        found.append(item.criterion_id)
    return found


def _refusal(
    session: Session, actor: User, rule: StageRule, place: Place, conflicts: list[str], existing: Mapping[str, Label]
) -> StaleEdit | NotFound:
    if rule.names_every_conflict:
        return LabelsChanged(
            conflicts,
            {cid: own_label_view(label, place.rubric_version_id) for cid, label in existing.items()},
            by_self=all(cid in existing and existing[cid].user_id == actor.id for cid in conflicts),
        )
    label = existing.get(conflicts[0])
    if label is None:  # the page showed a label that is gone
        return NotFound(
            f"no {rule.what} for criterion {conflicts[0]} any more",
            key="errors.label_gone",
            params={"criterion": conflicts[0]},
        )
    return SavedSince(label_view(session, label), what=rule.what, by_self=label.user_id == actor.id)


@dataclass(frozen=True)
class _Before:
    """A label as it was before the save changed it (read before its row is updated)."""

    met: bool
    note: str | None
    rubric_version_id: int | None
    user_id: int | None
    lock_version: int


@dataclass
class _Changes:
    """What a save writes: rows to insert and to update, and each changed label before and after (the audit)."""

    new_rows: list[dict] = field(default_factory=list)
    changed_rows: list[dict] = field(default_factory=list)
    before: dict[str, _Before] = field(default_factory=dict)
    after: dict[str, Wanted] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)  # each written label's new lock version


def _changes(
    actor: User, rule: StageRule, place: Place, wanted: Sequence[Wanted], existing: Mapping[str, Label]
) -> _Changes:
    """The new labels and the labels that change, in the order wanted."""
    now, changes = utcnow(), _Changes()
    for item in wanted:
        cid, label = item.criterion_id, existing.get(item.criterion_id)
        if label is None:
            changes.new_rows.append(
                {
                    "response_id": place.response.id,
                    "criterion_id": cid,
                    "stage": rule.stage.value,
                    "group_no": place.group_no,
                    "met": item.met,
                    "note": item.note,
                    "user_id": actor.id,
                    "rubric_version_id": place.rubric_version_id,
                    "lock_version": 1,
                    "created_at": now,
                    "updated_at": now,
                }
            )
            changes.versions[cid] = 1
        elif rule.unchanged_left_alone and _same(label, item, place.rubric_version_id):
            continue
        else:
            changes.before[cid] = _Before(
                label.met, label.note, label.rubric_version_id, label.user_id, label.lock_version
            )
            changes.changed_rows.append(
                {
                    "label_id": label.id,
                    "met": item.met,
                    "note": item.note,
                    "rubric_version_id": place.rubric_version_id,
                    "user_id": actor.id,
                    "updated_at": now,
                }
            )
            changes.versions[cid] = label.lock_version + 1
        changes.after[cid] = item
    return changes


def _insert(session: Session, actor: User, rule: StageRule, place: Place, rows: list[dict]) -> None:
    """The new labels, in one statement; refused like a lost race when a racing writer inserted one of them first
    (the row locks cannot hold a row that did not exist yet: the unique key does)."""
    if place.locked_rubric_size is not None:
        # The caller holds the response's row lock: no other save of its labels can be inserting them now.
        session.execute(insert(LABEL_TABLE), rows)
        return
    try:
        with session.begin_nested():
            session.execute(insert(LABEL_TABLE), rows)
    except IntegrityError:
        existing = _locked_labels(session, place.response.id, rule.stage, place.group_no)
        raced = [row["criterion_id"] for row in rows if row["criterion_id"] in existing]
        if not raced:
            raise
        raise _refusal(session, actor, rule, place, raced, existing) from None


def _audit(session: Session, actor: User, rule: StageRule, place: Place, changes: _Changes) -> None:
    """The save's audit: one entry per label, or one for the response's labels (`StageRule.audit_per_label`)."""
    if not rule.audit_per_label:
        was = {
            cid: {
                "met": label.met,
                "note": label.note,
                "rubric_version_id": label.rubric_version_id,
                "user_id": label.user_id,
            }
            for cid, label in changes.before.items()
        }
        record(
            session,
            actor.username,
            action="label",
            entity=rule.entity,
            entity_key=f"{place.case_id}/{place.response.code}/{rule.stage.value}/g{place.group_no}",
            before=was or None,
            after={
                "rubric_version_id": place.rubric_version_id,
                "labels": {cid: {"met": item.met, "note": item.note} for cid, item in changes.after.items()},
            },
        )
        return
    names: dict[int | None, str | None] = {actor.id: actor.username}
    for cid, item in changes.after.items():
        label = changes.before.get(cid)
        after = _snapshot(item.met, item.note, actor.username, changes.versions[cid], place.rubric_version_id)
        before: dict[str, Any] | None = None
        if label is not None:
            if label.user_id not in names:
                author = session.get(User, label.user_id) if label.user_id is not None else None
                names[label.user_id] = author.username if author else None
            before = _snapshot(label.met, label.note, names[label.user_id], label.lock_version, label.rubric_version_id)
        record(
            session,
            actor.username,
            action="create" if label is None else "update",
            entity=rule.entity,
            entity_key=f"{place.case_id}/{place.response.model}/{cid}/{rule.stage.value}/{place.group_no}",
            before=before,
            after=after,
        )


def _snapshot(met: bool, note: str | None, user: str | None, lock_version: int, rubric: int | None) -> dict[str, Any]:
    return {"met": met, "note": note, "user": user, "lock_version": lock_version, "rubric_version_id": rubric}


# The label importer's bulk load ---------------------------------------------------------------

#: The columns of a bulk-loaded label row, in the order of its tuple.
LABEL_COLUMNS = [
    "response_id",
    "criterion_id",
    "stage",
    "group_no",
    "met",
    "user_id",
    "note",
    "rubric_version_id",
    "created_at",
    "updated_at",
    "lock_version",
]
#: Responses per read of their stored labels.
_READ_BATCH = 500


class BulkInserter(Protocol):
    """Plain rows in `LABEL_COLUMNS` order straight to the driver (db.importers.writing: executemany or COPY)."""

    def insert(self, rows: list[tuple]) -> None: ...


class BulkSummary(Protocol):
    inserted: int
    replaced: int
    unchanged: int


class BulkRun(Protocol):
    """What the bulk load needs of the import that runs it (db.importers.writing._Run)."""

    connection: Connection
    source: str
    now: datetime

    @property
    def summary(self) -> BulkSummary: ...

    def writing(self) -> bool: ...

    def audit(self, rows: list[dict]) -> None: ...


def bulk_inserter(inserter_for: Callable[..., BulkInserter]) -> BulkInserter:
    """The bulk inserter of label rows, made by the importer's `inserter_for(table, columns)`."""
    return inserter_for(LABEL_TABLE, LABEL_COLUMNS)


@dataclass(frozen=True)
class BulkChunk:
    """Label rows as the table takes them (`LABEL_COLUMNS`), what the audit log names them by (case, model,
    annotator), and their lines in the file."""

    rows: list[tuple]
    names: list[tuple[str, str, str]]
    lines: list[int]


def write_bulk(
    run: BulkRun,
    chunk: BulkChunk,
    inserter: BulkInserter,
    *,
    had_labels: bool,
    allows: Callable[[list[int]], bool],
) -> set[int]:
    """Writes a chunk of imported label rows: new ones inserted, changed ones replaced (one revision on), each
    audited; returns the responses they are on (the caller refreshes their kept figures once, at the end).

    `had_labels`: the table held labels before the import (else every row is new); `allows(indexes)`: whether the
    rows at `indexes` (those the chunk would write) may be written (the feedback freeze, db.importers.labels).
    """
    rows, names = chunk.rows, chunk.names
    if not rows or not run.writing():
        return set()
    if not had_labels:
        # Nothing was stored before this import and the file has no repeats: every row is new.
        if not allows(list(range(len(rows)))):
            return set()
        inserter.insert(rows)
        run.summary.inserted += len(rows)
        run.audit([_inserted_entry(run, rows, names)])
        return {row[0] for row in rows}
    plan = _plan_labels(run, rows, names, _stored_labels(run.connection, rows))
    if not allows(sorted(plan.new_indexes + plan.changed_indexes)):
        return set()
    inserter.insert(plan.new_rows)
    if plan.new_rows:
        plan.audit_rows.append(_inserted_entry(run, plan.new_rows, [names[i] for i in plan.new_indexes]))
    if plan.changes:
        run.connection.execute(_REPLACE_LABEL, plan.changes)
    run.summary.inserted += len(plan.new_rows)
    run.summary.replaced += len(plan.changes)
    run.audit(plan.audit_rows)
    return {row[0] for row in rows}


def _stored_labels(connection: Connection, rows: list[tuple]) -> dict[tuple, Any]:
    """The stored labels on the chunk's responses, by (response, criterion, stage, group)."""
    existing: dict[tuple, Any] = {}
    ids = sorted({row[0] for row in rows})
    for start in range(0, len(ids), _READ_BATCH):
        for label_row in connection.execute(
            sa_select(
                LABEL_TABLE.c.id,
                LABEL_TABLE.c.response_id,
                LABEL_TABLE.c.criterion_id,
                LABEL_TABLE.c.stage,
                LABEL_TABLE.c.group_no,
                LABEL_TABLE.c.met,
                LABEL_TABLE.c.user_id,
                LABEL_TABLE.c.note,
                LABEL_TABLE.c.rubric_version_id,
            ).where(LABEL_TABLE.c.response_id.in_(ids[start : start + _READ_BATCH]))
        ):
            existing[(label_row.response_id, label_row.criterion_id, label_row.stage, label_row.group_no)] = label_row
    return existing


@dataclass
class _LabelPlan:
    """What a chunk does to stored labels: rows to insert (and their places in the chunk), replacements, audit."""

    new_rows: list[tuple] = field(default_factory=list)
    new_indexes: list[int] = field(default_factory=list)
    changed_indexes: list[int] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)
    audit_rows: list[dict[str, Any]] = field(default_factory=list)


def _plan_labels(
    run: BulkRun, rows: list[tuple], names: list[tuple[str, str, str]], existing: dict[tuple, Any]
) -> _LabelPlan:
    """Each row of the chunk as new, unchanged (counted) or replacing a stored label (with its audit entry)."""
    plan = _LabelPlan()
    username_of: dict[int, str] | None = None
    for index, (row, (case_id, model, annotator)) in enumerate(zip(rows, names)):
        response_id, criterion_id, stage, group, met, user_id, note, version_id = row[:8]
        stored = existing.get((response_id, criterion_id, stage, group))
        if stored is None:
            plan.new_rows.append(row)
            plan.new_indexes.append(index)
            continue
        same = stored.met == met and stored.user_id == user_id and (stored.note or None) == note
        # The same decision made again on a newer rubric is a new label: its stamp decides whether it counts.
        if same and stored.rubric_version_id == version_id:
            run.summary.unchanged += 1
            continue
        plan.changed_indexes.append(index)
        if username_of is None:
            accounts = table_of(User).c
            username_of = dict(run.connection.execute(sa_select(accounts.id, accounts.username)).all())
        plan.changes.append(
            {
                "label_id": stored.id,
                "met": met,
                "user_id": user_id,
                "note": note,
                "rubric_version_id": version_id,
                "updated_at": run.now,
            }
        )
        group_key = "-" if group == NO_GROUP else str(group)
        plan.audit_rows.append(
            {
                "action": "replace",
                "entity": "label",
                "entity_key": f"{case_id}/{model}/{criterion_id}/{stage}/{group_key}",
                "before": {
                    "met": stored.met,
                    "note": stored.note,
                    "annotator": username_of.get(stored.user_id),
                    "rubric_version_id": stored.rubric_version_id,
                },
                "after": {"met": met, "note": note, "annotator": annotator, "rubric_version_id": version_id},
            }
        )
    return plan


def _inserted_entry(run: BulkRun, rows: list[tuple], names: list[tuple[str, str, str]]) -> dict:
    """One audit entry naming every label a chunk inserted, so `audit verify` can replay them."""
    logged = [
        bulk_label_row(case_id, model, row[1], row[2], row[3], row[4], annotator, row[6])
        for row, (case_id, model, annotator) in zip(rows, names)
    ]
    return {
        "action": "import",
        "entity": "labels",
        "entity_key": run.source[:255],
        "before": None,
        "after": {"rows": logged},
    }
