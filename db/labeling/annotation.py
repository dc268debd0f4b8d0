"""Hit labeling for annotators: the queue, the blinded response view, and saving decisions.

Blinding holds here, whatever a page asks for: an annotator gets a response under its opaque code
(never the model), and only their own group's annotation labels. Every function checks the role,
the group and the assignment itself.

A label assignment names one response and an expert group (db/work/assignments.py hands them out).
Labels are made against the case's current approved rubric version; a label made against an older
version is *stale* and the response shows in the queue for re-labeling. A save names the rubric
version the page loaded and is refused (StaleEdit) if the rubric changed since, or if someone
else changed one of the labels since the page read it (LabelsChanged says whether that was the
annotator themselves, in another tab, or another member of their group). Saving the same decisions
twice changes nothing the second time. Once the feedback of the response's round has been opened,
the group's labels on it are final and every save is refused (db/work/feedback.py).

This module decides the save itself: `save_target` (may this user save on the response against this
rubric; locks its row) and `save_on_target` (the optimistic lock, the rows, the audit entry, the kept
figures); `save_labels` is the two in turn. The labeling workbench (db/labeling/drafts.py) checks the
page's decisions between the two and calls in here; nothing here reads drafts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from sqlalchemy import bindparam, func, insert, select as sa_select, update
from sqlmodel import Session, SQLModel, col, select

from db import counts
from db.access.audit import record
from db.access.policies import LabelPolicy, authorize
from db.labeling import freeze as feedback_freeze
from db.labeling.refusals import LabelsChanged, RubricChanged
from db.labeling.view import LabelView
from db.rubrics.authoring import CaseView, CriterionView, case_view, criteria_of
from db.rules.errors import NotFound, ValidationFailed
from db.rules.notes import clean_note
from db.store.current_rubric import counts_on_current_rubric, current_approved_version, current_version_ids
from db.store.lookups import case_id_of_case, code_of_response
from db.store.models import (
    Assignment,
    AssignmentKind,
    Case,
    Criterion,
    Label,
    Response,
    RubricVersion,
    Stage,
    User,
    utcnow,
)

# The states of a group's labels on a response, and the rule that picks one: written once, in db.counts.
TODO, PARTIAL, DONE, STALE, WAITING = counts.TODO, counts.PARTIAL, counts.DONE, counts.STALE, counts.WAITING

_LABEL = SQLModel.metadata.tables["label"]
_UPDATE_LABEL = (
    update(_LABEL)
    .where(_LABEL.c.id == bindparam("label_id"))
    .values(
        met=bindparam("new_met"),
        note=bindparam("new_note"),
        rubric_version_id=bindparam("new_rubric_version_id"),
        user_id=bindparam("new_user_id"),
        updated_at=bindparam("new_updated_at"),
        lock_version=bindparam("new_lock_version"),
    )
)


@dataclass(frozen=True)
class QueueItem:
    response_id: int
    code: str
    case_pk: int
    case_id: str
    status: str  # todo | partial | done | stale (labels against an older rubric) | waiting (no rubric)
    labeled: int  # current labels of the user's group
    size: int  # criteria of the current approved rubric (0 while waiting)


@dataclass(frozen=True)
class LabelQueue:
    items: list[QueueItem]

    @property
    def done(self) -> int:
        return sum(item.status == DONE for item in self.items)

    @property
    def total(self) -> int:
        return len(self.items)

    def with_saved(self, response_id: int) -> LabelQueue:
        """The queue after a successful save of `response_id` (every criterion labeled against the current rubric)."""
        return LabelQueue(
            [
                replace(item, status=DONE, labeled=item.size) if item.response_id == response_id else item
                for item in self.items
            ]
        )

    def next_after(self, response_id: int | None) -> QueueItem | None:
        """The next item still to do after `response_id` in queue order, wrapping around."""
        open_items = [i for i in self.items if i.status in (TODO, PARTIAL, STALE)]
        if not open_items:
            return None
        ids = [i.response_id for i in self.items]
        start = ids.index(response_id) + 1 if response_id in ids else 0
        for item in self.items[start:] + self.items[:start]:
            if item.status in (TODO, PARTIAL, STALE) and item.response_id != response_id:
                return item
        return None


@dataclass(frozen=True)
class LabelingView:
    """One response as an annotator may see it: code, text, case, rubric and their group's labels."""

    response_id: int
    code: str
    text: str
    case: CaseView
    group_no: int
    rubric_version_id: int
    rubric_version: int
    criteria: list[CriterionView]
    labels: dict[str, LabelView]
    final: bool = False  # the feedback of the response's round was opened: the labels are final (db/work/feedback.py)
    mine: frozenset[str] = frozenset()  # criteria whose saved label the viewer saved last

    @property
    def expected_versions(self) -> dict[str, int]:
        return {cid: label.lock_version for cid, label in self.labels.items()}


@dataclass(frozen=True)
class LabelInput:
    criterion_id: str
    met: bool
    note: str | None = None


@dataclass(frozen=True)
class SaveOutcome:
    created: int
    updated: int
    unchanged: int
    rubric_version_id: int

    @property
    def changed(self) -> int:
        return self.created + self.updated


# Access --------------------------------------------------------------------------------------


def _require_annotator(user: User) -> None:
    authorize(user, LabelPolicy.annotate())


def _group_of(annotator: User) -> int:
    """The expert group of an annotator the policy let through (LabelPolicy.annotate requires one)."""
    assert annotator.group_no is not None
    return annotator.group_no


@dataclass(frozen=True)
class AssignedItem:
    response: Response
    case: Case
    final: bool  # the group's labels on it are final (db/work/feedback.py)


def assigned_item(session: Session, user: User, response_id: int, *, lock: bool = False) -> AssignedItem:
    """The response and its case, when a label assignment of `user` names it, and whether the labels of the
    user's group on it are final: one statement. `lock` takes the response's row lock as well (a save; see
    `save_target`).
    """
    _require_annotator(user)
    assigned = (
        select(Assignment.id)
        .where(
            Assignment.user_id == user.id,
            Assignment.kind == AssignmentKind.label,
            Assignment.response_id == Response.id,
        )
        .exists()
    )
    final = feedback_freeze.labels_final_clause(col(Response.id), _group_of(user))
    statement = (
        sa_select(Response, Case, assigned, final)
        .join(Case, col(Case.id) == col(Response.case_pk))
        .where(col(Response.id) == response_id)
    )
    if lock:
        statement = statement.with_for_update(of=Response)
    row = session.execute(statement).first()
    if row is None:
        raise NotFound(f"no response #{response_id}", key="errors.response_unknown", params={"response": response_id})
    response, case, is_assigned, is_final = row
    authorize(user, LabelPolicy.annotate(assigned=bool(is_assigned)))
    return AssignedItem(response, case, bool(is_final))


def assigned_response(session: Session, user: User, response_id: int) -> Response:
    """The response, when a label assignment of `user` names it."""
    return assigned_item(session, user, response_id).response


def _own_labels(session: Session, response_id: int, group_no: int) -> list[Label]:
    return list(
        session.exec(
            select(Label).where(
                Label.response_id == response_id, Label.stage == Stage.annotation, Label.group_no == group_no
            )
        ).all()
    )


def _label_view(label: Label, current_version_id: int | None) -> LabelView:
    stale = not counts_on_current_rubric(label.rubric_version_id, current_version_id)
    return LabelView(label.criterion_id, label.met, label.note, label.lock_version, stale=stale)


# Reading -------------------------------------------------------------------------------------


def labels_for(session: Session, user: User, response_id: int, group_no: int) -> dict[str, LabelView]:
    """The annotation labels of `group_no` on a response; only the annotator's own group."""
    authorize(user, LabelPolicy.annotate(group_no=group_no))
    response = assigned_response(session, user, response_id)
    current = current_approved_version(session, response.case_pk)
    return _label_views(session, response_id, group_no, current.id if current else None)


def _label_views(session: Session, response_id: int, group_no: int, current_id: int | None) -> dict[str, LabelView]:
    return {label.criterion_id: _label_view(label, current_id) for label in _own_labels(session, response_id, group_no)}


def response_for_labeling(session: Session, user: User, response_id: int) -> LabelingView:
    """The blinded view of one assigned response, with the current approved rubric."""
    authorize(user, LabelPolicy.annotate(group_no=user.group_no))
    assigned = assigned_item(session, user, response_id)
    response, case = assigned.response, assigned.case
    rubric = current_approved_version(session, response.case_pk)
    if rubric is None:
        raise ValidationFailed("this case has no approved rubric yet", key="errors.no_approved_rubric")
    own = _own_labels(session, response_id, _group_of(user))
    return LabelingView(
        response_id=response.id,
        code=response.code,
        text=response.text,
        case=case_view(case),
        group_no=_group_of(user),
        rubric_version_id=rubric.id,
        rubric_version=rubric.version,
        criteria=criteria_of(session, rubric.id),
        labels={label.criterion_id: _label_view(label, rubric.id) for label in own},
        final=assigned.final,
        mine=frozenset(label.criterion_id for label in own if label.user_id == user.id),
    )


def _assigned_responses(session: Session, user: User) -> list[tuple[int, str, int, str]]:
    """(response_id, code, case_pk, case_id) of the user's label assignments, in case and code order."""
    statement = (
        select(Response.id, Response.code, Case.id, Case.case_id)
        .join(Assignment, col(Assignment.response_id) == col(Response.id))
        .join(Case, col(Case.id) == col(Response.case_pk))
        .where(Assignment.user_id == user.id, Assignment.kind == AssignmentKind.label)
        .distinct()
        .order_by(Case.case_id, Response.code)
    )
    return [
        (response_id, code, case_pk, case_id) for response_id, code, case_pk, case_id in session.exec(statement).all()
    ]


def labeling_queue(session: Session, user: User, *, recount: bool = False) -> LabelQueue:
    """The user's assigned responses in case order, each with the state of their group's labels.

    The state is the one kept on each assignment (db.counts): one row per item, no label counted here.
    `recount`: counted from the labels instead (`recounted_queue`).
    """
    _require_annotator(user)
    if recount:
        return recounted_queue(session, user)
    # looked up item by item, so the queue costs what it holds (db.store.lookups)
    code = code_of_response(col(Assignment.response_id))
    case_id = case_id_of_case(col(Assignment.case_pk))
    items = (
        sa_select(
            col(Assignment.response_id),
            code,
            col(Assignment.case_pk),
            case_id,
            col(Assignment.label_status),
            col(Assignment.labeled),
            col(Assignment.rubric_size),
        )
        .where(col(Assignment.user_id) == user.id, col(Assignment.kind) == AssignmentKind.label)
        .order_by(case_id, code)
    )
    # a response assigned to the user twice is one item
    rows = dict.fromkeys(tuple(row) for row in session.execute(items))
    return LabelQueue([QueueItem(*row) for row in rows])


def recounted_queue(session: Session, user: User) -> LabelQueue:
    """`labeling_queue` counted from the label tally against every case's current rubric (the straightforward way)."""
    _require_annotator(user)
    responses = _assigned_responses(session, user)
    if not responses:
        return LabelQueue([])
    case_pks = sorted({row[2] for row in responses})
    response_ids = [row[0] for row in responses]

    # The current rubric version of each case, and its size.
    current = current_version_ids(session, case_pks)
    sizes = dict(
        session.exec(
            select(Criterion.rubric_version_id, func.count())
            .where(col(Criterion.rubric_version_id).in_(list(current.values()) or [-1]))
            .group_by(col(Criterion.rubric_version_id))
        ).all()
    )

    per_version = counts.annotation_counts(session, response_ids, _group_of(user), recount=True)

    items = []
    for response_id, code, case_pk, case_id in responses:
        version_id = current.get(case_pk)
        size = sizes.get(version_id, 0) if version_id else 0
        by_version = per_version.get(response_id, {})
        fresh = sum(n for v, n in by_version.items() if counts_on_current_rubric(v, version_id))
        stale = sum(n for v, n in by_version.items() if not counts_on_current_rubric(v, version_id))
        status = counts.label_status(version_id, size, fresh, stale)
        items.append(QueueItem(response_id, code, case_pk, case_id, status, fresh, size))
    return LabelQueue(items)


# Writing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SaveTarget:
    """What a save of one response checks before anything else, read once per save."""

    response: Response  # its row locked until the save's transaction ends
    case_id: str
    rubric: RubricVersion
    criterion_ids: list[str]  # of the current rubric, in rubric order


def saved_by(labels: Mapping[str, Label], criterion_ids: Sequence[str], user: User) -> bool:
    """True when `user` made the last save of every label of `criterion_ids` (a label since removed counts as not)."""
    return all(cid in labels and labels[cid].user_id == user.id for cid in criterion_ids)


def save_target(session: Session, user: User, response_id: int, *, rubric_version_id: int) -> SaveTarget:
    """Checks the user may save labels on the response against rubric `rubric_version_id`, and locks its row.

    Two saves of the same response (two tabs of one annotator) take turns on the row lock, so the
    second reads what the first wrote and is refused by `save_labels` instead of silently overwriting
    it. SQLite's writers are serialised by BEGIN IMMEDIATE already; PostgreSQL needs the row lock.
    Refused with RubricChanged when the case's current rubric is another version, and with
    LabelsFinal when the feedback of the response's round was opened.
    """
    assigned = assigned_item(session, user, response_id, lock=True)
    authorize(user, LabelPolicy.change_annotation(final=assigned.final))
    response, case = assigned.response, assigned.case
    rubric = rubric_as_opened(session, response.case_pk, rubric_version_id)
    return SaveTarget(response, case.case_id, rubric, criterion_ids_of(session, rubric.id))


def rubric_as_opened(session: Session, case_pk: int, rubric_version_id: int) -> RubricVersion:
    """The case's current approved rubric, when it is still version `rubric_version_id` the page opened.

    Refused with RubricChanged (nothing is written) when the current rubric is another version.
    """
    rubric = current_approved_version(session, case_pk)
    if rubric is None:
        raise ValidationFailed("this case has no approved rubric yet", key="errors.no_approved_rubric")
    if rubric.id != rubric_version_id:
        raise RubricChanged(
            "the rubric of this case changed since the page was opened; nothing was written",
            current=rubric.version,
            key="errors.rubric_changed",
            params={"version": rubric.version},
        )
    return rubric


def criterion_ids_of(session: Session, rubric_version_id: int) -> list[str]:
    """The criterion ids of a rubric version, in rubric order."""
    statement = (
        select(Criterion.criterion_id)
        .where(Criterion.rubric_version_id == rubric_version_id)
        .order_by(col(Criterion.position))
    )
    return list(session.exec(statement).all())


def save_labels(
    session: Session,
    user: User,
    response_id: int,
    decisions: Sequence[LabelInput],
    *,
    rubric_version_id: int,
    expected_versions: Mapping[str, int],
) -> SaveOutcome:
    """Save the user's decisions on every criterion of the response, for their group.

    `rubric_version_id` and `expected_versions` (criterion_id → lock_version, absent = no label)
    are what the page loaded. Refused with StaleEdit when the rubric changed since, or when another
    person changed a label to something else since; re-saving identical decisions is a no-op.
    """
    target = save_target(session, user, response_id, rubric_version_id=rubric_version_id)
    return save_on_target(session, user, target, decisions, expected_versions=expected_versions)


def save_on_target(
    session: Session,
    user: User,
    target: SaveTarget,
    decisions: Sequence[LabelInput],
    *,
    expected_versions: Mapping[str, int],
) -> SaveOutcome:
    """The save of `save_labels` on a response `save_target` has checked and locked in this transaction.

    Checks one decision per criterion of the rubric and the lock versions the page loaded (LabelsChanged
    when someone changed a label to something else since), then writes the new and changed labels, their
    audit entry and the response's kept figures.
    """
    response_id, rubric_id, criterion_ids = target.response.id, target.rubric.id, target.criterion_ids
    _check_one_per_criterion(decisions, criterion_ids)
    existing = {label.criterion_id: label for label in _own_labels(session, response_id, _group_of(user))}
    wanted = {d.criterion_id: (bool(d.met), clean_note(d.note, f"note of {d.criterion_id}")) for d in decisions}
    _refuse_changed_since(existing, wanted, expected_versions, rubric_id, user)

    changes = _label_changes(user, response_id, rubric_id, criterion_ids, existing, wanted)
    _write_label_changes(session, changes, existing)
    if changes.after:
        _record_label_save(session, user, target, changes)
        # The response's row is locked and its current rubric checked already (`save_target`): not asked again.
        counts.refresh(
            session, [response_id], locked=[response_id], known_rubrics={response_id: (rubric_id, len(criterion_ids))}
        )
    created, updated = len(changes.new_rows), len(changes.changed_rows)
    return SaveOutcome(created, updated, len(criterion_ids) - created - updated, rubric_id)


def _check_one_per_criterion(decisions: Sequence[LabelInput], criterion_ids: Sequence[str]) -> None:
    """Refused (ValidationFailed) unless the decisions name every criterion of the rubric exactly once."""
    given = [d.criterion_id for d in decisions]
    if sorted(given) != sorted(criterion_ids) or len(set(given)) != len(given):
        missing = sorted(set(criterion_ids) - set(given))
        extra = sorted(set(given) - set(criterion_ids))
        raise ValidationFailed(
            f"labels: one decision per criterion is needed (missing {missing}, unknown {extra})",
            key="errors.labels_incomplete",
            params={"missing": len(missing), "unknown": len(extra)},
        )


def _refuse_changed_since(
    existing: Mapping[str, Label],
    wanted: Mapping[str, tuple[bool, str | None]],
    expected_versions: Mapping[str, int],
    rubric_id: int,
    user: User,
) -> None:
    """The optimistic lock: refused with LabelsChanged when a label the page read was saved since as something
    other than what is being saved now."""
    conflicts = []
    for cid, (met, note) in wanted.items():
        label = existing.get(cid)
        seen = expected_versions.get(cid, 0)
        current_version = label.lock_version if label else 0
        same = label is not None and (label.met, label.note, label.rubric_version_id) == (met, note, rubric_id)
        if current_version != seen and not same:
            conflicts.append(cid)
    if conflicts:
        raise LabelsChanged(
            conflicts,
            {cid: _label_view(label, rubric_id) for cid, label in existing.items()},
            by_self=saved_by(existing, conflicts, user),
        )


@dataclass(frozen=True)
class _LabelChanges:
    """What a save writes: rows to insert and to update, and each changed label before and after (the audit)."""

    new_rows: list[dict]
    changed_rows: list[dict]
    before: dict[str, dict]
    after: dict[str, dict]


def _label_changes(
    user: User,
    response_id: int,
    rubric_id: int,
    criterion_ids: Sequence[str],
    existing: Mapping[str, Label],
    wanted: Mapping[str, tuple[bool, str | None]],
) -> _LabelChanges:
    """The new labels and the labels that change, in rubric order; a label saved as it is wanted is left alone."""
    now = utcnow()
    changes = _LabelChanges([], [], {}, {})
    for cid in criterion_ids:
        met, note = wanted[cid]
        label = existing.get(cid)
        if label is None:
            changes.new_rows.append(
                {
                    "response_id": response_id,
                    "criterion_id": cid,
                    "stage": Stage.annotation.value,
                    "group_no": user.group_no,
                    "met": met,
                    "note": note,
                    "user_id": user.id,
                    "rubric_version_id": rubric_id,
                    "lock_version": 1,
                    "created_at": now,
                    "updated_at": now,
                }
            )
            changes.after[cid] = {"met": met, "note": note}
        elif (label.met, label.note, label.rubric_version_id) != (met, note, rubric_id):
            changes.before[cid] = {
                "met": label.met,
                "note": label.note,
                "rubric_version_id": label.rubric_version_id,
                "user_id": label.user_id,
            }
            changes.changed_rows.append(
                {
                    "label_id": label.id,
                    "new_met": met,
                    "new_note": note,
                    "new_rubric_version_id": rubric_id,
                    "new_user_id": user.id,
                    "new_updated_at": now,
                    "new_lock_version": label.lock_version + 1,
                }
            )
            changes.after[cid] = {"met": met, "note": note}
    return changes


def _write_label_changes(session: Session, changes: _LabelChanges, existing: Mapping[str, Label]) -> None:
    """One statement each for the new and the changed labels, whatever their number (executemany)."""
    if changes.new_rows:
        session.execute(insert(_LABEL), changes.new_rows)
    if changes.changed_rows:
        session.execute(_UPDATE_LABEL, changes.changed_rows)
        for cid in changes.before:
            session.expire(existing[cid])  # the loaded rows are stale now


def _record_label_save(session: Session, user: User, target: SaveTarget, changes: _LabelChanges) -> None:
    """The save's one audit entry: the group's labels on the response before and after."""
    record(
        session,
        user.username,
        action="label",
        entity="label",
        entity_key=f"{target.case_id}/{target.response.code}/annotation/g{user.group_no}",
        before=changes.before or None,
        after={"rubric_version_id": target.rubric.id, "labels": changes.after},
    )
