"""Saving one label with optimistic locking: a save names the revision it started from; a lost race raises StaleEdit.

The refusal (`SavedSince`) says who saved in between only as "you, in another tab" or "someone else"
(`by_self`): the page words it for the stage (another member of your group, another checker), never by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from db.access.audit import record
from db.labeling.refusals import SavedSince
from db.labeling.view import LabelView
from db.review.shared import _username, current_rubric_version_id
from db.rules.errors import NotFound
from db.store.models import Case, Label, Response, Stage, User, utcnow

# Saving a label with optimistic locking -----------------------------------------------------


def _label_view(session: Session, label: Label) -> LabelView:
    author = session.get(User, label.user_id) if label.user_id is not None else None
    return LabelView(
        criterion_id=label.criterion_id,
        met=label.met,
        note=label.note,
        lock_version=label.lock_version,
        id=label.id,
        stage=label.stage,
        group_no=label.group_no,
        user=author.username if author else None,
        user_name=author.display_name if author else None,
        user_id=label.user_id,
        updated_at=label.updated_at,
    )


def _label_snapshot(session: Session, label: Label) -> dict[str, Any]:
    return {
        "met": label.met,
        "note": label.note,
        "user": _username(session, label.user_id),
        "lock_version": label.lock_version,
        "rubric_version_id": label.rubric_version_id,
    }


def _find_label(session: Session, response_id: int, criterion_id: str, stage: str, group_no: int) -> Label | None:
    return session.execute(
        select(Label)
        .where(
            col(Label.response_id) == response_id,
            col(Label.criterion_id) == criterion_id,
            col(Label.stage) == stage,
            col(Label.group_no) == group_no,
        )
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()


def _stale(session: Session, label: Label, what: str, actor: User) -> SavedSince:
    return SavedSince(_label_view(session, label), what=what, by_self=label.user_id == actor.id)


def save_label(
    session: Session,
    actor: User,
    *,
    response: Response,
    case: Case,
    criterion_id: str,
    stage: str,
    group_no: int,
    met: bool,
    note: str | None,
    seen_lock_version: int | None,
) -> Label:
    """Inserts or updates one label row, refusing to overwrite a revision the caller did not see.

    seen_lock_version None means "I saw no label here": a row that exists (or is inserted by a
    racing writer) is a StaleEdit. Otherwise the UPDATE only lands on exactly that revision.
    Rules (who may save what) are the caller's; this only persists, locks and audits. The caller refreshes the
    response's kept figures (db.counts.refresh) before its transaction ends, once for all the labels it saved.
    """
    rubric_version_id = current_rubric_version_id(session, case.id)
    entity_key = f"{case.case_id}/{response.model}/{criterion_id}/{stage}/{group_no}"
    slot = _LabelSlot(response.id, criterion_id, stage, group_no, _WHAT_OF.get(stage, "label"))
    saved = _SavedValues(met, note, rubric_version_id, utcnow())
    if seen_lock_version is None:
        label = _insert_label(session, actor, slot, saved)
        record(
            session,
            actor.username,
            action="create",
            entity=stage_entity(stage),
            entity_key=entity_key,
            after=_label_snapshot(session, label),
        )
        return label
    before, label = _update_label(session, actor, slot, saved, seen_lock_version)
    record(
        session,
        actor.username,
        action="update",
        entity=stage_entity(stage),
        entity_key=entity_key,
        before=before,
        after=_label_snapshot(session, label),
    )
    return label


#: What a refusal calls a label of each stage.
_WHAT_OF: dict[str, str] = {Stage.check: "check", Stage.adjudication: "decision"}


@dataclass(frozen=True)
class _LabelSlot:
    """Where one label lives (response, criterion, stage, group), and what a refusal calls it."""

    response_id: int
    criterion_id: str
    stage: str
    group_no: int
    what: str

    def find(self, session: Session) -> Label | None:
        return _find_label(session, self.response_id, self.criterion_id, self.stage, self.group_no)


@dataclass(frozen=True)
class _SavedValues:
    """What a save writes into the label besides its author and lock version."""

    met: bool
    note: str | None
    rubric_version_id: int | None
    at: datetime


def _insert_label(session: Session, actor: User, slot: _LabelSlot, saved: _SavedValues) -> Label:
    """The first label of its slot; refused with SavedSince when one exists or a racing writer inserts it first."""
    existing = slot.find(session)
    if existing is not None:
        raise _stale(session, existing, slot.what, actor)
    label = Label(
        response_id=slot.response_id,
        criterion_id=slot.criterion_id,
        stage=slot.stage,
        group_no=slot.group_no,
        met=saved.met,
        user_id=actor.id,
        note=saved.note,
        rubric_version_id=saved.rubric_version_id,
        created_at=saved.at,
        updated_at=saved.at,
        lock_version=1,
    )
    try:
        with session.begin_nested():
            session.add(label)
            session.flush()
    except IntegrityError:
        # Another writer inserted the same (response, criterion, stage, group) first.
        existing = slot.find(session)
        if existing is None:
            raise
        raise _stale(session, existing, slot.what, actor) from None
    return label


def _update_label(
    session: Session, actor: User, slot: _LabelSlot, saved: _SavedValues, seen_lock_version: int
) -> tuple[dict[str, Any], Label]:
    """The label before (its audit snapshot) and after an UPDATE that lands only on revision `seen_lock_version`;
    refused with NotFound when the label is gone and with SavedSince when another revision was saved since."""
    existing = slot.find(session)
    if existing is None:
        raise NotFound(
            f"no {slot.what} for criterion {slot.criterion_id} any more",
            key="errors.label_gone",
            params={"criterion": slot.criterion_id},
        )
    before = _label_snapshot(session, existing)
    changed = cast(
        CursorResult,
        session.execute(
            update(Label)
            .where(col(Label.id) == existing.id, col(Label.lock_version) == seen_lock_version)
            .values(
                met=saved.met,
                note=saved.note,
                user_id=actor.id,
                rubric_version_id=saved.rubric_version_id,
                updated_at=saved.at,
                lock_version=col(Label.lock_version) + 1,
            )
            .execution_options(synchronize_session=False)
        ),
    ).rowcount
    label = slot.find(session)
    assert label is not None  # `existing` was read in this transaction, and labels are never deleted
    if changed != 1:
        raise _stale(session, label, slot.what, actor)
    return before, label


def stage_entity(stage: str) -> str:
    """The audit log's entity name of a label of `stage`."""
    return {Stage.annotation: "label", Stage.check: "check", Stage.adjudication: "adjudication"}[Stage(stage)]
