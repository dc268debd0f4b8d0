"""One stored label as a page shows it: the annotator's own labels and the checker's views share it.

May import: db.store.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from db.store.current_rubric import counts_on_current_rubric
from db.store.models import Label, User


@dataclass(frozen=True)
class LabelView:
    criterion_id: str
    met: bool
    note: str | None
    lock_version: int  # the version a save must name (optimistic locking)
    #: Made on an older rubric version than the case's current one (`db.store.current_rubric`); the
    #: labeling page computes it, the checker's views (which show current labels only) leave it False.
    stale: bool = False
    # Who made it and where: filled in the checker's views; an annotator's view of their own group's
    # labels leaves them empty.
    id: int | None = None
    stage: str | None = None
    group_no: int | None = None
    user: str | None = None
    user_name: str | None = None  # the person's name (display name), shown beside `user`
    user_id: int | None = None
    updated_at: datetime | None = None


def own_label_view(label: Label, current_version_id: int | None) -> LabelView:
    """A label of the annotator's own group as the labeling page shows it: no names, stale when made on an older
    rubric than `current_version_id`."""
    stale = not counts_on_current_rubric(label.rubric_version_id, current_version_id)
    return LabelView(label.criterion_id, label.met, label.note, label.lock_version, stale=stale)


def label_view(session: Session, label: Label) -> LabelView:
    """A label as the checker's views show it: who made it, where and when."""
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
