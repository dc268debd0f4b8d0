"""Feedback freezes the round (docs/REFERENCE.md §1): the rule db/work/feedback.py describes, in SQL.

Once an admin has opened the feedback of a labeling round, the annotation labels of that round's
responses are final for the groups it assigned them to: the annotator's save and draft are refused
(`LabelPolicy.change_annotation` in db/access/policies.py, with the fact read here).
A round counts as opened from its first opening on (a `feedback_round` row exists only from then
on, and closing keeps it), so closing the feedback again does not reopen the labels. Kept apart
from db/work/feedback.py so the labeling save can read it without importing the rounds' bookkeeping.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import select as sa_select
from sqlalchemy.engine import Connection
from sqlmodel import Session, col

from db.rules.enums import AssignmentKind
from db.store.models import Assignment, FeedbackRound


def _opened_round_response_ids(group_no: int):
    """SQL: responses with a label assignment of `group_no` in a round whose feedback was ever opened."""
    return (
        sa_select(col(Assignment.response_id))
        .join(FeedbackRound, col(FeedbackRound.round_at) == col(Assignment.created_at))
        .where(col(Assignment.kind) == AssignmentKind.label, col(Assignment.group_no) == group_no)
    )


def labels_final_clause(response_id, group_no: int):
    """SQL: true when the annotation labels of `group_no` on `response_id` (a column or a value) are final."""
    return _opened_round_response_ids(group_no).where(col(Assignment.response_id) == response_id).exists()


def labels_final(session: Session, response_id: int, group_no: int) -> bool:
    """True when the annotation labels of `group_no` on the response are final (feedback of its round was opened)."""
    return bool(session.execute(sa_select(labels_final_clause(response_id, group_no))).scalar())


def final_rounds(db: Session | Connection, response_ids: Iterable[int]) -> dict[tuple[int, int], datetime]:
    """(response id, group) → the round (its `round_at`) whose opened feedback made that group's annotation labels
    on the response final, for the responses of `response_ids` that have any (an admin's label import asks)."""
    wanted = sorted(set(response_ids))
    found: dict[tuple[int, int], datetime] = {}
    for start in range(0, len(wanted), 5000):
        rows = db.execute(
            sa_select(col(Assignment.response_id), col(Assignment.group_no), col(FeedbackRound.round_at))
            .join(FeedbackRound, col(FeedbackRound.round_at) == col(Assignment.created_at))
            .where(
                col(Assignment.kind) == AssignmentKind.label,
                col(Assignment.response_id).in_(wanted[start : start + 5000]),
            )
        ).all()
        for response_id, group_no, round_at in rows:
            if response_id is not None and group_no is not None:
                found[(int(response_id), int(group_no))] = round_at
    return found
