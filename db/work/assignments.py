"""Who works on what: rubric authoring per case, hit labeling per response and expert group.

Rules, enforced here for the page and the command line alike:
- only an admin assigns or reassigns (`AssignmentPolicy.manage`);
- a case has one rubric author; a response has exactly one annotator in each expert group, so
  re-running an assignment adds only what is missing and never duplicates;
- work goes to the eligible annotator with the fewest current assignments of that kind (ties by
  username), so it stays balanced across people as it is handed out in rounds;
- nobody labels responses of a case whose rubric they authored (or were assigned to author);
- every assignment and reassignment is an audit entry.

`my_queue` is the annotator's own list with its state. It shows response codes, never model names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select as sa_select
from sqlmodel import Session, col, select

from db import counts
from db.access.audit import AuditWriter, record
from db.access.policies import AssignmentPolicy, SystemActor, authorize
from db.rules.enums import AssignmentKind, Role, RubricStatus
from db.rules.errors import NotFound, ValidationFailed
from db.store.current_rubric import counts_on_current_rubric, current_version_ids
from db.store.distinct import distinct_values
from db.store.models import Assignment, Case, Response, RubricVersion, User, table_of, utcnow

GROUPS = (1, 2)


@dataclass
class AssignmentSummary:
    """What one assignment run did: new assignments, and items left out with the reason."""

    created: int = 0
    already_assigned: int = 0
    per_user: Counter = field(default_factory=Counter)
    unassignable: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"assigned {self.created}, already assigned {self.already_assigned}"]
        out += [f"{name}: +{count}" for name, count in sorted(self.per_user.items())]
        out += self.unassignable
        return out


# Helpers ----------------------------------------------------------------------------------


def _active_annotators(session: Session, usernames: Iterable[str]) -> list[User]:
    names = sorted(set(usernames))
    if not names:
        raise ValidationFailed("annotators: choose at least one annotator", key="errors.annotators_none")
    found = {u.username: u for u in session.exec(select(User).where(col(User.username).in_(names))).all()}
    for name in names:
        user = found.get(name)
        if user is None:
            raise ValidationFailed(
                f"annotators: no user {name!r}", key="errors.user_unknown", params={"username": name}
            )
        if not user.is_active or user.role != Role.annotator or user.group_no not in GROUPS:
            raise ValidationFailed(
                f"annotators: {name!r} is not an active annotator of group 1 or 2",
                key="errors.not_active_annotator",
                params={"username": name},
            )
    return [found[name] for name in names]


def _load_counts(session: Session, kind: AssignmentKind, users: Sequence[_Person]) -> Counter:
    ids = [u.id for u in users]
    rows = session.exec(
        select(Assignment.user_id, func.count())
        .where(col(Assignment.kind) == kind, col(Assignment.user_id).in_(ids))
        .group_by(col(Assignment.user_id))
    ).all()
    return Counter(dict(rows))


@dataclass(frozen=True)
class _Person:
    """What balancing needs of an annotator (plain attributes: read tens of thousands of times)."""

    id: int
    username: str
    group_no: int


def _people(users: Sequence[User]) -> list[_Person]:
    # `_active_annotators` has refused anyone outside group 1 or 2, so the filter drops nobody.
    return [_Person(u.id, u.username, u.group_no) for u in users if u.group_no is not None]


def _pick(candidates: Sequence[_Person], workload: Counter, excluded: set[int]) -> _Person | None:
    eligible = [u for u in candidates if u.id not in excluded]
    if not eligible:
        return None
    return min(eligible, key=lambda u: (workload[u.id], u.username))


def rubric_authors(session: Session, case_pks: Iterable[int]) -> dict[int, set[int]]:
    """case_pk → users who authored any version of its rubric or are assigned to author it."""
    pks = list(set(case_pks))
    authors: dict[int, set[int]] = {pk: set() for pk in pks}
    for start in range(0, len(pks), 5000):
        chunk = pks[start : start + 5000]
        for case_pk, author_id in session.exec(
            select(RubricVersion.case_pk, RubricVersion.author_id).where(
                col(RubricVersion.case_pk).in_(chunk), col(RubricVersion.author_id).is_not(None)
            )
        ).all():
            if author_id is not None:  # the query keeps versions with an author only
                authors[case_pk].add(author_id)
        for case_pk, user_id in session.exec(
            select(Assignment.case_pk, Assignment.user_id).where(
                col(Assignment.kind) == AssignmentKind.rubric, col(Assignment.case_pk).in_(chunk)
            )
        ).all():
            authors[case_pk].add(user_id)
    return authors


def _cases_with_approved_rubric(session: Session) -> set[int]:
    return set(current_version_ids(session))


def _insert(session: Session, actor: User, rows: list[dict], audit_rows: list[dict]) -> None:
    if rows:
        session.execute(table_of(Assignment).insert(), rows)
        counts.refresh_assignments(session, [row["response_id"] for row in rows if row["kind"] == AssignmentKind.label])
        AuditWriter(session, actor.username).record_many(audit_rows)


def active_annotators(session: Session) -> list[User]:
    """Every active annotator, by group and username: the people work can go to."""
    return list(
        session.exec(
            select(User)
            .where(User.role == Role.annotator, User.is_active == True)  # noqa: E712
            .order_by(col(User.group_no), col(User.username))
        ).all()
    )


def specialties(session: Session) -> list[str]:
    """Every case subject (specialty), for choosing which cases to hand out: a few dozen values hopped through the
    subject's index (db.store.distinct), where DISTINCT read every case on each visit of the assignments page."""
    return sorted(s for s in distinct_values(session, table_of(Case).c.subject) if s)


# Rubric authoring -------------------------------------------------------------------------


def assign_rubric_authoring(
    session: Session,
    *,
    actor: User | SystemActor,
    annotators: Iterable[str],
    case_ids: Iterable[str] | None = None,
    specialty: str | None = None,
    preview: bool = False,
) -> AssignmentSummary:
    """Give each chosen case that has no author yet and no approved rubric one author.

    Cases are `case_ids` (release ids) or every case of `specialty` (its subject or one of its
    subject labels); exactly one of the two must be given. With `preview`, says what it would create and
    writes nothing.
    """
    actor = authorize(session, actor, AssignmentPolicy.manage())
    if (case_ids is None) == (specialty is None):
        raise ValidationFailed("cases: give either case ids or a specialty", key="errors.cases_how")
    people = _people(_active_annotators(session, annotators))
    if case_ids is not None:
        wanted = sorted(set(case_ids))
        cases = list(session.exec(select(Case).where(col(Case.case_id).in_(wanted))).all()) if wanted else []
        missing = sorted(set(wanted) - {c.case_id for c in cases})
        if missing:
            raise ValidationFailed(
                f"case_id: unknown case {missing[0]!r}" + (f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""),
                key="errors.case_unknown_many",
                params={"case_id": missing[0], "more": len(missing) - 1},
            )
    else:
        cases = [
            c
            for c in session.exec(select(Case)).all()
            if c.subject == specialty or specialty in (c.subject_labels or [])
        ]
    cases.sort(key=lambda c: c.case_id)

    summary = AssignmentSummary()
    authored = set(session.exec(select(Assignment.case_pk).where(Assignment.kind == AssignmentKind.rubric)).all())
    approved = _cases_with_approved_rubric(session)
    workload = _load_counts(session, AssignmentKind.rubric, people)
    rows, audit_rows, now = [], [], utcnow()
    for case in cases:
        if case.id in authored:
            summary.already_assigned += 1
            continue
        if case.id in approved:
            summary.unassignable.append(f"{case.case_id}: rubric already approved")
            continue
        person = _pick(people, workload, set())
        assert person is not None  # nobody is excluded, and `_active_annotators` refuses an empty choice
        workload[person.id] += 1
        summary.created += 1
        summary.per_user[person.username] += 1
        rows.append(
            dict(
                kind=AssignmentKind.rubric.value,
                case_pk=case.id,
                response_id=None,
                user_id=person.id,
                group_no=person.group_no,
                created_at=now,
                created_by=actor.id,
            )
        )
        audit_rows.append(
            dict(
                action="assign",
                entity="assignment",
                entity_key=f"rubric:{case.case_id}",
                before=None,
                after={"kind": "rubric", "case": case.case_id, "user": person.username, "group": person.group_no},
            )
        )
    if not preview:
        _insert(session, actor, rows, audit_rows)
    return summary


# Hit labeling -----------------------------------------------------------------------------


def assign_labeling(
    session: Session,
    *,
    actor: User | SystemActor,
    annotators: Iterable[str],
    response_ids: Iterable[int] | None = None,
    preview: bool = False,
) -> AssignmentSummary:
    """Give each response one annotator of group 1 and one of group 2, where it lacks them.

    Responses are `response_ids`, or (None) every response of a case with an approved rubric.
    A named response whose case has no approved rubric is refused, and nothing is assigned.
    With `preview`, says what it would create and writes nothing.
    """
    actor = authorize(session, actor, AssignmentPolicy.manage())
    people = _people(_active_annotators(session, annotators))
    responses = _responses_to_label(session, response_ids, _cases_with_approved_rubric(session))
    existing = set(
        session.exec(
            select(Assignment.response_id, Assignment.group_no).where(Assignment.kind == AssignmentKind.label)
        ).all()
    )
    handout = _LabelingHandout(
        by_group={g: [u for u in people if u.group_no == g] for g in GROUPS},
        authors=rubric_authors(session, {r[1] for r in responses}),
        case_ids=dict(session.exec(select(Case.id, Case.case_id)).all()),
        workload=_load_counts(session, AssignmentKind.label, people),
        actor=actor,
    )
    for response_id, case_pk, code in responses:
        for group in GROUPS:
            if (response_id, group) in existing:
                handout.summary.already_assigned += 1
            else:
                handout.assign(response_id, case_pk, code, group)
    if handout.rows and not preview:
        session.execute(table_of(Assignment).insert(), handout.rows)
        counts.refresh_assignments(session, [row["response_id"] for row in handout.rows])
        AuditWriter(session, actor.username).record_many(handout.audit_rows)
    return handout.summary


def _responses_to_label(
    session: Session, response_ids: Iterable[int] | None, approved: set[int]
) -> list[tuple[int, int, str]]:
    """(response id, case pk, code) of the responses to hand out, by id: `response_ids`, or (None) every response
    of a case with an approved rubric. Refused when a named response is unknown or its case has no approved rubric.
    """
    if response_ids is None:
        every = session.exec(
            select(col(Response.id), col(Response.case_pk), col(Response.code)).order_by(col(Response.id))
        ).all()
        return [(response_id, case_pk, code) for response_id, case_pk, code in every if case_pk in approved]
    wanted = sorted(set(response_ids))
    responses: list[tuple[int, int, str]] = []
    for start in range(0, len(wanted), 5000):
        responses += session.exec(
            select(Response.id, Response.case_pk, Response.code).where(
                col(Response.id).in_(wanted[start : start + 5000])
            )
        ).all()
    responses.sort()
    missing = sorted(set(wanted) - {r[0] for r in responses})
    if missing:
        raise NotFound(
            f"response: no response with id {missing[0]}",
            key="errors.response_unknown",
            params={"response": missing[0]},
        )
    for _response_id, case_pk, code in responses:
        if case_pk not in approved:
            raise ValidationFailed(
                f"response {code}: its case has no approved rubric yet",
                key="errors.response_no_rubric",
                params={"response": code},
            )
    return responses


@dataclass
class _LabelingHandout:
    """One labeling run's choices: who gets each response in each group, the rows to insert and their audit."""

    by_group: dict[int, list[_Person]]
    authors: dict[int, set[int]]  # case pk → who authored (or was assigned to author) its rubric
    case_ids: dict[int, str]
    workload: Counter
    actor: User
    summary: AssignmentSummary = field(default_factory=AssignmentSummary)
    rows: list[dict] = field(default_factory=list)
    audit_rows: list[dict] = field(default_factory=list)
    now: datetime = field(default_factory=utcnow)

    def assign(self, response_id: int, case_pk: int, code: str, group: int) -> None:
        """The response goes to the least loaded eligible annotator of `group`, or is noted as unassignable."""
        person = _pick(self.by_group[group], self.workload, self.authors.get(case_pk, set()))
        if person is None:
            self.summary.unassignable.append(
                f"{self.case_ids.get(case_pk, case_pk)}/{code}: no eligible annotator in group {group}"
            )
            return
        self.workload[person.id] += 1
        self.summary.created += 1
        self.summary.per_user[person.username] += 1
        self.rows.append(
            dict(
                kind=AssignmentKind.label.value,
                case_pk=case_pk,
                response_id=response_id,
                user_id=person.id,
                group_no=group,
                created_at=self.now,
                created_by=self.actor.id,
            )
        )
        self.audit_rows.append(
            dict(
                action="assign",
                entity="assignment",
                entity_key=f"label:{self.case_ids.get(case_pk, case_pk)}/{code}/group{group}",
                before=None,
                after={
                    "kind": "label",
                    "case": self.case_ids.get(case_pk),
                    "response": code,
                    "user": person.username,
                    "group": group,
                },
            )
        )


# Reassignment -----------------------------------------------------------------------------


def reassign(session: Session, *, actor: User | SystemActor, assignment_id: int, to_username: str) -> Assignment:
    """Hand one assignment to another annotator (same expert group for labeling; never the author)."""
    actor = authorize(session, actor, AssignmentPolicy.manage())
    assignment = session.get(Assignment, assignment_id)
    if assignment is None:
        raise NotFound(
            f"assignment: no assignment {assignment_id}",
            key="errors.assignment_unknown",
            params={"assignment": assignment_id},
        )
    (person,) = _active_annotators(session, [to_username])
    previous = session.get(User, assignment.user_id)
    case = session.get_one(Case, assignment.case_pk)
    if assignment.kind == AssignmentKind.label:
        if person.group_no != assignment.group_no:
            raise ValidationFailed(
                f"annotator: {to_username!r} is not in expert group {assignment.group_no}",
                key="errors.reassign_other_group",
                params={"username": to_username, "group": assignment.group_no},
            )
        if person.id in rubric_authors(session, [assignment.case_pk])[assignment.case_pk]:
            raise ValidationFailed(
                f"annotator: {to_username!r} authored the rubric of case {case.case_id}",
                key="errors.reassign_author",
                params={"username": to_username, "case_id": case.case_id},
            )
    before = {"user": previous.username if previous else None, "group": assignment.group_no}
    if assignment.kind == AssignmentKind.label and assignment.group_no is not None:
        counts.move_assignment_owner(
            session,
            status=assignment.label_status,
            group_no=assignment.group_no,
            from_user=assignment.user_id,
            to_user=person.id,
        )
    assignment.user_id = person.id
    if assignment.kind == AssignmentKind.rubric:
        assignment.group_no = person.group_no
    session.add(assignment)
    session.flush()
    response = session.get(Response, assignment.response_id) if assignment.response_id else None
    key = f"{assignment.kind}:{case.case_id}" + (f"/{response.code}/group{assignment.group_no}" if response else "")
    record(
        session,
        actor.username,
        action="reassign",
        entity="assignment",
        entity_key=key,
        before=before,
        after={"user": person.username, "group": assignment.group_no},
    )
    return assignment


def reassign_candidates(session: Session, *, actor: User, assignment_id: int) -> list[str]:
    """The annotators `reassign` would accept for the assignment, by username: active, not its current holder;
    for labeling, of the same expert group and not the author of the case's rubric."""
    authorize(session, actor, AssignmentPolicy.manage())
    assignment = session.get(Assignment, assignment_id)
    if assignment is None:
        raise NotFound(
            f"assignment: no assignment {assignment_id}",
            key="errors.assignment_unknown",
            params={"assignment": assignment_id},
        )
    excluded = {assignment.user_id}
    people = active_annotators(session)
    if assignment.kind == AssignmentKind.label:
        excluded |= rubric_authors(session, [assignment.case_pk])[assignment.case_pk]
        people = [person for person in people if person.group_no == assignment.group_no]
    return [person.username for person in people if person.id not in excluded]


def list_assignments(
    session: Session, *, actor: User | SystemActor, kind: AssignmentKind, username: str | None = None, limit: int = 500
) -> list[dict]:
    """Assignments for the admin's table (with model names: admins are not blinded)."""
    authorize(session, actor, AssignmentPolicy.manage())
    statement = (
        sa_select(
            col(Assignment.id),
            col(Case.case_id),
            col(Response.code),
            col(Response.model),
            col(User.username),
            col(Assignment.group_no),
            col(Assignment.created_at),
        )
        .join(Case, col(Case.id) == col(Assignment.case_pk))
        .join(User, col(User.id) == col(Assignment.user_id))
        .join(Response, col(Response.id) == col(Assignment.response_id), isouter=True)
        .where(col(Assignment.kind) == kind)
        .order_by(col(Case.case_id), col(Response.code), col(Assignment.group_no))
        .limit(limit)
    )
    if username:
        # One person's assignments, through the (user, kind) index: theirs are sorted, not everyone's.
        statement = statement.where(col(User.username) == username)
    else:
        # Everyone's: the first `limit` rows in (case, response, group) order lie in the first `limit` cases that
        # have an assignment of this kind, found in case order through the case_id index, so the page sorts the
        # assignments of a page of cases rather than every assignment of the round.
        held = sa_select(col(Assignment.id)).where(
            col(Assignment.case_pk) == col(Case.id), col(Assignment.kind) == kind
        )
        first_cases = sa_select(col(Case.id)).where(held.exists()).order_by(col(Case.case_id)).limit(limit)
        statement = statement.where(col(Assignment.case_pk).in_(first_cases))
    return [
        dict(id=row[0], case_id=row[1], response=row[2], model=row[3], user=row[4], group=row[5], created_at=row[6])
        for row in session.execute(statement).all()
    ]


# The annotator's own queue ----------------------------------------------------------------


def rubric_states(session: Session, case_pks: Iterable[int]) -> dict[int, str]:
    """case_pk → status of its newest rubric version (cases without one are absent)."""
    pks = list(set(case_pks))
    states: dict[int, str] = {}
    for start in range(0, len(pks), 5000):
        chunk = pks[start : start + 5000]
        newest = (
            select(RubricVersion.case_pk, func.max(RubricVersion.version).label("version"))
            .where(col(RubricVersion.case_pk).in_(chunk))
            .group_by(col(RubricVersion.case_pk))
            .subquery()
        )
        rows = session.exec(
            select(RubricVersion.case_pk, RubricVersion.status).join(
                newest,
                (col(RubricVersion.case_pk) == newest.c.case_pk) & (col(RubricVersion.version) == newest.c.version),
            )
        ).all()
        states.update(dict(rows))
    return states


def current_label_counts(
    session: Session, response_ids: Iterable[int], group_no: int, current_version: dict[int, int]
) -> dict[int, int]:
    """response_id → annotation labels of `group_no` made on the current rubric (`current_version`:
    response_id → its case's current approved rubric version id). Labels on an older version do not
    count, as on the labeling page (`db.labeling.annotation`)."""
    labeled: dict[int, int] = {}
    for response_id, by_version in counts.annotation_counts(session, response_ids, group_no).items():
        for version_id, n in by_version.items():
            if counts_on_current_rubric(version_id, current_version.get(response_id)):
                labeled[response_id] = labeled.get(response_id, 0) + n
    return labeled


RUBRIC_DONE_STATES = (RubricStatus.submitted, RubricStatus.approved)


def my_queue(session: Session, user: User, kind: AssignmentKind | str) -> list[dict]:
    """The annotator's assigned work, oldest case first, each item with its state and `done` flag.

    rubric items: assignment_id, case_pk, case_id, subject, status (newest rubric version, or None), done.
    label items (from `db.labeling.annotation.labeling_queue`): case_pk, case_id, response_id, code, status, labeled,
    criteria, done.
    """
    user = authorize(session, user, AssignmentPolicy.read_own())
    kind = AssignmentKind(kind)
    if kind == AssignmentKind.rubric:
        rows = session.exec(
            select(Assignment.id, Case.id, Case.case_id, Case.subject)
            .join(Case, col(Case.id) == col(Assignment.case_pk))
            .where(Assignment.kind == kind, Assignment.user_id == user.id)
            .order_by(Case.case_id)
        ).all()
        states = rubric_states(session, [r[1] for r in rows])
        return [
            dict(
                assignment_id=a,
                case_pk=pk,
                case_id=cid,
                subject=subject,
                status=states.get(pk),
                done=states.get(pk) in RUBRIC_DONE_STATES,
            )
            for a, pk, cid, subject in rows
        ]
    from db.labeling.annotation import DONE, labeling_queue  # the labeling page's own queue and rules

    return [
        dict(
            case_pk=item.case_pk,
            case_id=item.case_id,
            response_id=item.response_id,
            code=item.code,
            status=item.status,
            labeled=item.labeled,
            criteria=item.size,
            done=item.status == DONE,
        )
        for item in labeling_queue(session, user).items
    ]
