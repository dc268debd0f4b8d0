"""One stored label as a page shows it: the annotator's own labels and the checker's views share it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


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
