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
rubric; locks its row) and `save_on_target` (the labels as the label writer, db/label_rows/write.py, takes
them: the optimistic lock, the rows, the audit entry and the kept figures are the writer's). The labeling
workbench (db/labeling/drafts.py) checks the page's decisions between the two and calls in here; nothing
here reads drafts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from db import counts
from db.access.policies import LabelPolicy, authorize
from db.label_rows.refusals import RubricChanged
from db.label_rows.view import LabelView, own_label_view
from db.label_rows.write import ANNOTATION, Place, Wanted, write
from db.labeling import freeze as feedback_freeze
from db.rubrics.authoring import CaseView, CriterionView, case_view, criteria_of
from db.rules.enums import AssignmentKind, Stage
from db.rules.errors import NotFound, ValidationFailed
from db.rules.notes import clean_note
from db.store.current_rubric import current_approved_version
from db.store.lookups import case_id_of_case, code_of_response
from db.store.models import Assignment, Case, Criterion, Label, Response, RubricVersion, User

# The states of a group's labels on a response, and the rule that picks one: written once, in db.counts.
TODO, PARTIAL, DONE, STALE, WAITING = counts.TODO, counts.PARTIAL, counts.DONE, counts.STALE, counts.WAITING


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


def _require_annotator(session: Session, user: User) -> User:
    return authorize(session, user, LabelPolicy.annotate())


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
    user = _require_annotator(session, user)
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
    authorize(session, user, LabelPolicy.annotate(assigned=bool(is_assigned)))
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


# Reading -------------------------------------------------------------------------------------


def labels_for(session: Session, user: User, response_id: int, group_no: int) -> dict[str, LabelView]:
    """The annotation labels of `group_no` on a response; only the annotator's own group."""
    user = authorize(session, user, LabelPolicy.annotate(group_no=group_no))
    response = assigned_response(session, user, response_id)
    current = current_approved_version(session, response.case_pk)
    return _label_views(session, response_id, group_no, current.id if current else None)


def _label_views(session: Session, response_id: int, group_no: int, current_id: int | None) -> dict[str, LabelView]:
    return {
        label.criterion_id: own_label_view(label, current_id) for label in _own_labels(session, response_id, group_no)
    }


def response_for_labeling(session: Session, user: User, response_id: int) -> LabelingView:
    """The blinded view of one assigned response, with the current approved rubric."""
    user = authorize(session, user, LabelPolicy.annotate(group_no=user.group_no))
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
        labels={label.criterion_id: own_label_view(label, rubric.id) for label in own},
        final=assigned.final,
        mine=frozenset(label.criterion_id for label in own if label.user_id == user.id),
    )


def labeling_queue(session: Session, user: User) -> LabelQueue:
    """The user's assigned responses in case order, each with the state of their group's labels.

    The state is the one kept on each assignment (db.counts): one row per item, no label counted here.
    """
    user = _require_annotator(session, user)
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


# Writing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SaveTarget:
    """What a save of one response checks before anything else, read once per save."""

    response: Response  # its row locked until the save's transaction ends
    case_id: str
    rubric: RubricVersion
    criterion_ids: list[str]  # of the current rubric, in rubric order


def save_target(session: Session, user: User, response_id: int, *, rubric_version_id: int) -> SaveTarget:
    """Checks the user may save labels on the response against rubric `rubric_version_id`, and locks its row.

    Two saves of the same response (two tabs of one annotator) take turns on the row lock, so the
    second reads what the first wrote and is refused by the label writer instead of silently overwriting
    it. SQLite's writers are serialised by BEGIN IMMEDIATE already; PostgreSQL needs the row lock.
    Refused with RubricChanged when the case's current rubric is another version, and with
    LabelsFinal when the feedback of the response's round was opened.
    """
    assigned = assigned_item(session, user, response_id, lock=True)
    authorize(session, user, LabelPolicy.change_annotation(final=assigned.final))
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


def save_on_target(
    session: Session,
    user: User,
    target: SaveTarget,
    decisions: Sequence[LabelInput],
    *,
    expected_versions: Mapping[str, int],
) -> SaveOutcome:
    """The labels of `decisions` (one per criterion of the rubric, db.labeling.drafts.save) saved on a response
    `save_target` has checked and locked in this transaction.

    Cleans the notes, then has the label writer (db.label_rows.write)
    check the lock versions the page loaded (LabelsChanged when someone changed a label to something else since)
    and write the new and changed labels, their audit entry and the response's kept figures.
    """
    criterion_ids = target.criterion_ids
    given = {d.criterion_id: d for d in decisions}
    wanted = [
        Wanted(
            cid,
            bool(given[cid].met),
            clean_note(given[cid].note, f"note of {cid}"),
            expected_versions.get(cid, 0),
        )
        for cid in criterion_ids
    ]
    # The response's row is locked and its current rubric checked already (`save_target`): not asked again.
    place = Place(target.response, target.case_id, _group_of(user), target.rubric.id, len(criterion_ids))
    written = write(session, user, ANNOTATION, place, wanted)
    return SaveOutcome(written.created, written.updated, written.unchanged, target.rubric.id)
