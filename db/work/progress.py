"""How far the work has come: per person, per expert group and overall, plus open disagreements.

A labeling assignment is done when its group has an annotation label on every criterion of the
case's current approved rubric and none on an older one (the state the annotator's queue shows, kept
on the assignment by db/counts); a rubric assignment is done when the case's newest rubric version
is submitted or approved. Disagreements are counted by `db.review` (rules of `db.rules.gold`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

from sqlalchemy import case as sql_case, func
from sqlmodel import Session, col, select

from db import counts, review
from db.access.policies import DisagreementFiguresPolicy, ProgressPolicy, authorize
from db.rubrics.authoring import returned_to_author
from db.rules.enums import AssignmentKind, Role, RubricStatus
from db.store.judges import response_models
from db.store.models import Assignment, RubricVersion, User
from db.work.assignments import (
    RUBRIC_DONE_STATES,
    my_queue,
    rubric_states,
)
from db.work.status import case_and_response_rows

#: 1 for a labeling assignment whose kept state is done.
_DONE = sql_case((col(Assignment.label_status) == counts.DONE, 1), else_=0)


@dataclass
class ProgressReport:
    people: list[dict] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)
    overall: dict = field(default_factory=dict)


def unresolved_disagreement_count(session: Session, user: User) -> int:
    """Decisions on which the two groups' final labels differ and nobody adjudicated yet (db.review counts).

    Admins see every response's. A checker sees those of their own adjudication queue only: responses closed
    to them (db.access.independence), since a count that moved with their own still-open label would tell them the
    other group's. Annotators are blinded to the other group.
    """
    user = authorize(session, user, DisagreementFiguresPolicy.read())
    if user.role == Role.checker:
        return int(review.my_unresolved_count(session, user))
    return int(review.unresolved_count(session))


def open_disagreements(session: Session, user: User) -> review.OpenDisagreements:
    """`unresolved_disagreement_count` with the number of responses holding those decisions, under the same
    rules: a checker's on the responses closed to them, every response's for admins, none for annotators."""
    user = authorize(session, user, DisagreementFiguresPolicy.read())
    if user.role == Role.checker:
        return review.my_open_disagreements(session, user)
    return review.all_open_disagreements(session)


def _assignment_counts(session: Session) -> list[tuple[str, int, int | None, int, int]]:
    """(kind, user_id, group_no, assigned, done) of every owner of assignments.

    A labeling assignment is done when its kept state (db/counts, the annotator's queue's own) is done; a
    rubric assignment when the case's newest rubric version is submitted or approved.
    """
    rows: list[tuple[str, int, int | None, int, int]] = []
    # Kept per person (db/counts): a row each, where counting read every labeling assignment.
    for owner, group, assigned, n_done in counts.assignment_totals(session):
        rows.append((AssignmentKind.label, owner, group, assigned, n_done))
    rubric_rows = session.exec(
        select(Assignment.user_id, Assignment.group_no, Assignment.case_pk).where(
            Assignment.kind == AssignmentKind.rubric
        )
    ).all()
    states = rubric_states(session, {r[2] for r in rubric_rows})
    per_owner: dict[tuple[int, int | None], list[int]] = defaultdict(lambda: [0, 0])
    for user_id, group_no, case_pk in rubric_rows:
        per_owner[(user_id, group_no)][0] += 1
        per_owner[(user_id, group_no)][1] += int(states.get(case_pk) in RUBRIC_DONE_STATES)
    rows += [(AssignmentKind.rubric, uid, g, n, d) for (uid, g), (n, d) in per_owner.items()]
    return rows


def progress(session: Session, *, actor: User, with_disagreements: bool = True) -> ProgressReport:
    """Assigned and done work per annotator, per group, and the pipeline's overall state."""
    actor = authorize(session, actor, ProgressPolicy.manage())
    counted = _assignment_counts(session)
    users = {u.id: u for u in session.exec(select(User)).all()}
    per_user: dict[int, dict] = defaultdict(
        lambda: dict(rubric_assigned=0, rubric_done=0, label_assigned=0, label_done=0)
    )
    per_group: dict[int, dict] = {
        g: dict(group=g, label_assigned=0, label_done=0, rubric_assigned=0, rubric_done=0) for g in (1, 2)
    }
    for kind, user_id, group_no, assigned, done in counted:
        prefix = "rubric" if kind == AssignmentKind.rubric else "label"
        row = per_user[user_id]
        row[f"{prefix}_assigned"] += assigned
        row[f"{prefix}_done"] += done
        if group_no in per_group:
            per_group[group_no][f"{prefix}_assigned"] += assigned
            per_group[group_no][f"{prefix}_done"] += done
    people = []
    for user in sorted(users.values(), key=lambda u: (u.group_no or 0, u.username)):
        if user.role != Role.annotator and user.id not in per_user:
            continue
        person = per_user.get(user.id, dict(rubric_assigned=0, rubric_done=0, label_assigned=0, label_done=0))
        people.append(
            dict(
                username=user.username,
                display_name=user.display_name,
                group=user.group_no,
                active=user.is_active,
                **person,
            )
        )

    cases, responses = case_and_response_rows(session)
    approved_cases = session.exec(
        select(func.count(func.distinct(RubricVersion.case_pk))).where(RubricVersion.status == RubricStatus.approved)
    ).one()

    def total(kind: str, column: Literal[3, 4]) -> int:
        return sum(row[column] for row in counted if row[0] == kind)

    overall = dict(
        cases=int(cases),
        cases_with_approved_rubric=int(approved_cases),
        responses=int(responses),
        label_assigned=total(AssignmentKind.label, 3),
        label_done=total(AssignmentKind.label, 4),
        rubric_assigned=total(AssignmentKind.rubric, 3),
        rubric_done=total(AssignmentKind.rubric, 4),
    )
    if with_disagreements:
        overall["unresolved_disagreements"] = unresolved_disagreement_count(session, actor)
    return ProgressReport(people=people, groups=list(per_group.values()), overall=overall)


def my_progress(session: Session, user: User) -> dict:
    """The sidebar's figures for an annotator: done and assigned items of their own queue."""
    user = authorize(session, user, ProgressPolicy.read_own())
    if user.role != Role.annotator:
        return dict(
            assigned=0,
            done=0,
            label_assigned=0,
            label_done=0,
            rubric_assigned=0,
            rubric_done=0,
            returned=0,
            returned_comments=0,
        )
    rubrics = my_queue(session, user, AssignmentKind.rubric)
    rubric_done = sum(item["done"] for item in rubrics)
    # The labeling page's own queue states (db/counts, kept on each assignment): one definition.
    label_assigned, label_done = _my_label_counts(session, user)
    returned = returned_to_author(session, user)
    return dict(
        assigned=len(rubrics) + label_assigned,
        done=rubric_done + label_done,
        label_assigned=label_assigned,
        label_done=label_done,
        rubric_assigned=len(rubrics),
        rubric_done=rubric_done,
        returned=returned.rubrics,
        returned_comments=returned.comments,
    )


def _my_label_counts(session: Session, user: User) -> tuple[int, int]:
    """(assigned, done) of the user's labeling queue, counted in SQL from the kept states (as many rows as
    `labeling_queue`: one per assigned response)."""
    mine = (
        select(Assignment.response_id, func.max(_DONE).label("d"))
        .where(Assignment.user_id == user.id, Assignment.kind == AssignmentKind.label)
        .group_by(col(Assignment.response_id))
        .subquery()
    )
    assigned, done = session.exec(select(func.count(), func.coalesce(func.sum(mine.c.d), 0))).one()
    return int(assigned), int(done)


def model_names(session: Session, *, actor: User) -> list[str]:
    """Models that have responses (admins only: annotators and checkers are blinded to them)."""
    authorize(session, actor, ProgressPolicy.manage())
    return response_models(session)
