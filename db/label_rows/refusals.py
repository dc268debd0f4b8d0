"""Every refusal of a label save, in one place: the annotator's save (a changed rubric, labels saved since,
criteria still unjudged) and the checker's and adjudicator's (a label saved since). The feedback
freeze's refusal is a policy's (db.access.policies.LabelsFinal); who may save what is the policies' too.

Each says who saved in between only as "you, in another tab" or someone else, never by name.

May import: db.label_rows.view, db.rules.
"""

from __future__ import annotations

from db.label_rows.view import LabelView
from db.rules.errors import StaleEdit, ValidationFailed


class RubricChanged(StaleEdit):
    """The case's approved rubric is not the one the page labeled against; `current` is its version number."""


class LabelsChanged(StaleEdit):
    """Labels the page had shown were saved since by someone: `by_self` when every one was the annotator's own
    save (another tab), else another member of their group. `current` holds the saved labels."""

    def __init__(self, conflicts: list[str], current: dict[str, LabelView], *, by_self: bool) -> None:
        who = "you, in another tab," if by_self else "another member of your group"
        super().__init__(
            f"{who} changed {len(conflicts)} of these labels since this page opened them "
            f"({', '.join(sorted(conflicts)[:5])}); nothing was saved",
            current=current,
            key="errors.labels_changed_by_you" if by_self else "errors.labels_changed_by_member",
            params={"n": len(conflicts)},
        )
        self.by_self = by_self
        self.conflicts = sorted(conflicts)


class UnjudgedCriteria(ValidationFailed):
    """A save with criteria still unjudged; `count` says how many."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} criteria are not judged yet; nothing was saved")
        self.count = count


class SavedSince(StaleEdit):
    """A label was saved since the page opened it; `current` is the newer one, `by_self` when the same user saved it."""

    def __init__(self, current: LabelView, *, what: str, by_self: bool) -> None:
        who = "you, in another tab," if by_self else "someone else"
        super().__init__(
            f"{who} saved this {what} ({current.criterion_id}) since you opened it; nothing was saved",
            current=current,
            key="errors.saved_since_by_you" if by_self else "errors.saved_since_by_other",
            params={"criterion": current.criterion_id},
        )
        self.by_self = by_self
