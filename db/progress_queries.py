"""How far the work has come: per person, per expert group and overall, plus open disagreements.

A labeling assignment is done when its group has an annotation label on every criterion of the
case's current approved rubric; a rubric assignment is done when the case's newest rubric version
is submitted or approved. Disagreements are counted by `db.review` (rules of `db.gold`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import Session, select

from db import review
from db.assignments import (
    RUBRIC_DONE_STATES,
    current_label_counts,
    current_rubric_sizes,
    my_queue,
    rubric_states,
)
from db.current_rubric import current_version_ids
from db.errors import PermissionDenied
from db.models import (
    Assignment,
    AssignmentKind,
    Case,
    Response,
    Role,
    RubricStatus,
    RubricVersion,
    User,
)
from db.policies import require_active, require_admin
from db.rubrics import returned_to_author


@dataclass
class ProgressReport:
    people: list[dict] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)
    overall: dict = field(default_factory=dict)


def unresolved_disagreement_count(session: Session, user: User) -> int:
    """Decisions on which the two groups' final labels differ and nobody adjudicated yet (db.review counts).

    Admins and checkers may ask (checkers adjudicate them); annotators are blinded to the other group.
    """
    require_active(user)
    if user.role == Role.annotator:
        raise PermissionDenied("annotators do not see the other group's labels", key="errors.other_group_hidden")
    return int(review.unresolved_count(session))


def _assignment_state(session: Session) -> list[dict]:
    """Every assignment with its owner and whether it is done."""
    rows = session.exec(
        select(Assignment.kind, Assignment.user_id, Assignment.group_no, Assignment.case_pk, Assignment.response_id)
    ).all()
    label_rows = [r for r in rows if r[0] == AssignmentKind.label]
    rubric_rows = [r for r in rows if r[0] == AssignmentKind.rubric]
    states = rubric_states(session, {r[3] for r in rubric_rows})
    sizes = current_rubric_sizes(session, {r[3] for r in label_rows})
    versions = current_version_ids(session, {r[3] for r in label_rows})
    current = {r[4]: versions.get(r[3]) for r in label_rows}
    labeled = {g: current_label_counts(session, [r[4] for r in label_rows if r[2] == g], g, current) for g in (1, 2)}
    out = []
    for kind, user_id, group_no, case_pk, _response_id in rubric_rows:
        out.append(dict(kind=kind, user_id=user_id, group=group_no, done=states.get(case_pk) in RUBRIC_DONE_STATES))
    for kind, user_id, group_no, case_pk, response_id in label_rows:
        need = sizes.get(case_pk, 0)
        have = labeled.get(group_no, {}).get(response_id, 0)
        out.append(dict(kind=kind, user_id=user_id, group=group_no, done=bool(need) and have >= need))
    return out


def progress(session: Session, *, actor: User, with_disagreements: bool = True) -> ProgressReport:
    """Assigned and done work per annotator, per group, and the pipeline's overall state."""
    require_admin(actor)
    items = _assignment_state(session)
    users = {u.id: u for u in session.exec(select(User)).all()}
    per_user: dict[int, dict] = defaultdict(
        lambda: dict(rubric_assigned=0, rubric_done=0, label_assigned=0, label_done=0)
    )
    per_group: dict[int, dict] = {
        g: dict(group=g, label_assigned=0, label_done=0, rubric_assigned=0, rubric_done=0) for g in (1, 2)
    }
    for item in items:
        prefix = "rubric" if item["kind"] == AssignmentKind.rubric else "label"
        row = per_user[item["user_id"]]
        row[f"{prefix}_assigned"] += 1
        row[f"{prefix}_done"] += int(item["done"])
        if item["group"] in per_group:
            per_group[item["group"]][f"{prefix}_assigned"] += 1
            per_group[item["group"]][f"{prefix}_done"] += int(item["done"])
    people = []
    for user in sorted(users.values(), key=lambda u: (u.group_no or 0, u.username)):
        if user.role != Role.annotator and user.id not in per_user:
            continue
        counts = per_user.get(user.id, dict(rubric_assigned=0, rubric_done=0, label_assigned=0, label_done=0))
        people.append(
            dict(
                username=user.username,
                display_name=user.display_name,
                group=user.group_no,
                active=user.is_active,
                **counts,
            )
        )

    responses = session.exec(select(func.count()).select_from(Response)).one()
    cases = session.exec(select(func.count()).select_from(Case)).one()
    approved_cases = session.exec(
        select(func.count(func.distinct(RubricVersion.case_pk))).where(RubricVersion.status == RubricStatus.approved)
    ).one()
    label_items = [i for i in items if i["kind"] == AssignmentKind.label]
    overall = dict(
        cases=int(cases),
        cases_with_approved_rubric=int(approved_cases),
        responses=int(responses),
        label_assigned=len(label_items),
        label_done=sum(i["done"] for i in label_items),
        rubric_assigned=len(items) - len(label_items),
        rubric_done=sum(i["done"] for i in items if i["kind"] == AssignmentKind.rubric),
    )
    if with_disagreements:
        overall["unresolved_disagreements"] = unresolved_disagreement_count(session, actor)
    return ProgressReport(people=people, groups=list(per_group.values()), overall=overall)


def my_progress(session: Session, user: User) -> dict:
    """The sidebar's figures for an annotator: done and assigned items of their own queue."""
    require_active(user)
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
    labels = my_queue(session, user, AssignmentKind.label)  # the labeling page's own queue: one definition
    items = rubrics + labels
    returned = returned_to_author(session, user)
    return dict(
        assigned=len(items),
        done=sum(item["done"] for item in items),
        label_assigned=len(labels),
        label_done=sum(item["done"] for item in labels),
        rubric_assigned=len(rubrics),
        rubric_done=sum(item["done"] for item in rubrics),
        returned=returned.rubrics,
        returned_comments=returned.comments,
    )


def model_names(session: Session, *, actor: User) -> list[str]:
    """Models that have responses (admins only: annotators and checkers are blinded to them)."""
    require_admin(actor)
    return sorted(session.exec(select(Response.model).distinct()).all())
