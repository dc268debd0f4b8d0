"""Send criteria the analysis flagged back to the rubric's author: a rubric return started by an admin.

The case's approved rubric stays current (labeling goes on against it) while a new version, a copy
of it with status `returned`, carries the admin's comments on the flagged criteria. From there the
usual path applies: the author's next save makes a draft, a checker audits the resubmission (and
sees these comments beside it), and once approved it becomes the case's rubric, so labels made
against the old version are flagged for relabeling like after any rubric change. Everything is
in the audit log, in the caller's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlmodel import Session, col

from db.access.audit import record
from db.access.policies import CriterionReturnPolicy, authorize
from db.review.shared import _criteria, _username
from db.rubrics.authoring import latest_version
from db.rules.enums import AssignmentKind, Role, RubricStatus
from db.rules.errors import NotFound, StaleEdit, ValidationFailed
from db.rules.notes import clean_note
from db.store.current_rubric import current_approved_version
from db.store.models import Assignment, Case, Criterion, RubricVersion, User, utcnow

#: Why the rubric came back, as recorded in the audit log.
REASON = "criterion reliability"


@dataclass(frozen=True)
class SendBackTarget:
    """What an admin needs to send a case's criteria back: the current version and who would get it."""

    case_id: str
    rubric_version_id: int
    version: int
    author: str | None  # the current version's author, else the case's rubric assignee, else None
    open_revision: str | None  # status of a newer version already under way (then nothing can be sent)


@dataclass(frozen=True)
class SendBackResult:
    case_id: str
    rubric_version_id: int
    version: int
    author: str
    criteria: list[str]


def _pk(row: Case | RubricVersion | User) -> int:
    """The id of a row read from the database (always set there)."""
    assert row.id is not None
    return row.id


def _case(session: Session, case_id: str) -> Case:
    case = session.execute(select(Case).where(col(Case.case_id) == case_id)).scalars().first()
    if case is None:
        raise NotFound(f"case_id: no case {case_id!r}", key="errors.case_unknown", params={"case_id": case_id})
    return case


def _assignee(session: Session, case_pk: int) -> User | None:
    return (
        session.execute(
            select(User)
            .join(Assignment, col(Assignment.user_id) == col(User.id))
            .where(col(Assignment.kind) == AssignmentKind.rubric, col(Assignment.case_pk) == case_pk)
            .order_by(col(Assignment.id))
        )
        .scalars()
        .first()
    )


def send_back_target(session: Session, actor: User, case_id: str) -> SendBackTarget:
    authorize(session, actor, CriterionReturnPolicy.manage())
    case = _case(session, case_id)
    current = current_approved_version(session, _pk(case))
    if current is None:
        raise ValidationFailed(
            f"case {case_id}: no approved rubric to send back",
            key="errors.no_rubric_to_return",
            params={"case_id": case_id},
        )
    latest = latest_version(session, _pk(case))
    author = _username(session, current.author_id)
    if author is None:
        assignee = _assignee(session, _pk(case))
        author = assignee.username if assignee else None
    open_revision = latest.status if latest is not None and latest.id != current.id else None
    return SendBackTarget(case.case_id, _pk(current), current.version, author, open_revision)


def send_back_criteria(
    session: Session,
    actor: User,
    case_id: str,
    criterion_comments: dict[str, str],
    *,
    seen_version_id: int,
    comment: str | None = None,
    author: str | None = None,
) -> SendBackResult:
    """Return the case's approved rubric to its author with a comment on each named criterion.

    `seen_version_id` is the approved version the admin looked at; `author` names the annotator to
    send it to when the rubric has no author (imported rubrics) or should go to someone else.
    """
    actor = authorize(session, actor, CriterionReturnPolicy.manage())
    case = _case(session, case_id)
    current = _approved_as_seen(session, case, case_id, seen_version_id)
    criteria = _criteria(session, current.id)
    comments = _criterion_comments(case_id, criteria, criterion_comments)
    overall = clean_note(comment, "comment")
    target = _target(session, case, current, author)

    _assign_rubric_work(session, actor, case, target)
    version = _returned_version(session, actor, case, current, target, overall, criteria, comments)
    record(
        session,
        actor.username,
        action="return",
        entity="rubric",
        entity_key=f"{case.case_id} v{version.version}",
        before={"from_version": current.version, "status": RubricStatus.approved},
        after={
            "status": RubricStatus.returned,
            "author": target.username,
            "reviewer": actor.username,
            "review_comment": overall,
            "criterion_comments": comments,
            "criteria": [
                {"criterion_id": c.criterion_id, "text": c.text, "tags": list(c.tags or [])} for c in criteria
            ],
            "reason": REASON,
        },
    )
    return SendBackResult(case.case_id, _pk(version), version.version, target.username, sorted(comments))


def _approved_as_seen(session: Session, case: Case, case_id: str, seen_version_id: int) -> RubricVersion:
    """The case's approved rubric, when it is the version the admin looked at and no newer version is under way."""
    current = current_approved_version(session, _pk(case))
    if current is None:
        raise ValidationFailed(
            f"case {case_id}: no approved rubric to send back",
            key="errors.no_rubric_to_return",
            params={"case_id": case_id},
        )
    if current.id != seen_version_id:
        raise StaleEdit(
            f"case {case_id}: its rubric changed since you opened it (now version {current.version})",
            key="errors.case_rubric_changed",
            params={"case_id": case_id, "version": current.version},
        )
    latest = latest_version(session, _pk(case))
    if latest is not None and latest.id != current.id:
        raise ValidationFailed(
            f"case {case_id}: version {latest.version} is already {latest.status}; finish that revision first",
            key="errors.revision_open",
            params={"case_id": case_id, "version": latest.version, "status": str(latest.status)},
        )
    return current


def _criterion_comments(case_id: str, criteria: list[Criterion], criterion_comments: dict[str, str]) -> dict[str, str]:
    """The cleaned, non-empty comments by criterion id; refused for a criterion not in the rubric or no comment."""
    known = {criterion.criterion_id for criterion in criteria}
    unknown = sorted(set(criterion_comments) - known)
    if unknown:
        raise ValidationFailed(
            f"criterion_id: {unknown[0]!r} is not in case {case_id}'s rubric",
            key="errors.criterion_not_in_rubric",
            params={"criterion": unknown[0], "case_id": case_id},
        )
    cleaned = {cid: clean_note(text, f"criterion {cid} comment") for cid, text in criterion_comments.items()}
    comments = {cid: text for cid, text in cleaned.items() if text}
    if not comments:
        raise ValidationFailed(
            "comment: say for at least one criterion what the author should change", key="errors.return_comment_needed"
        )
    return comments


def _assign_rubric_work(session: Session, actor: User, case: Case, target: User) -> None:
    """Hands the case's rubric to `target` (audited) unless a rubric assignment names them already."""
    if session.execute(
        select(col(Assignment.id)).where(
            col(Assignment.kind) == AssignmentKind.rubric,
            col(Assignment.case_pk) == _pk(case),
            col(Assignment.user_id) == target.id,
        )
    ).first():
        return
    session.add(
        Assignment(
            kind=AssignmentKind.rubric,
            case_pk=_pk(case),
            user_id=_pk(target),
            group_no=target.group_no,
            created_by=actor.id,
        )
    )
    record(
        session,
        actor.username,
        action="assign",
        entity="assignment",
        entity_key=f"rubric:{case.case_id}",
        before=None,
        after={"kind": "rubric", "case": case.case_id, "user": target.username, "group": target.group_no},
    )


def _returned_version(
    session: Session,
    actor: User,
    case: Case,
    current: RubricVersion,
    target: User,
    overall: str | None,
    criteria: list[Criterion],
    comments: dict[str, str],
) -> RubricVersion:
    """The new version with status `returned`: a copy of the current criteria, each with its comment."""
    version = RubricVersion(
        case_pk=_pk(case),
        version=current.version + 1,
        status=RubricStatus.returned,
        author_id=target.id,
        reviewer_id=actor.id,
        review_comment=overall,
        reviewed_at=utcnow(),
    )
    session.add(version)
    session.flush()
    session.add_all(
        [
            Criterion(
                rubric_version_id=_pk(version),
                position=criterion.position,
                criterion_id=criterion.criterion_id,
                text=criterion.text,
                tags=list(criterion.tags or []),
                review_comment=comments.get(criterion.criterion_id),
            )
            for criterion in criteria
        ]
    )
    session.flush()
    return version


def _target(session: Session, case: Case, current: RubricVersion, author: str | None) -> User:
    if author:
        user = session.execute(select(User).where(col(User.username) == author)).scalars().first()
        if user is None:
            raise NotFound(f"author: no user {author!r}", key="errors.user_unknown", params={"username": author})
    else:
        user = session.get(User, current.author_id) if current.author_id else _assignee(session, _pk(case))
        if user is None:
            raise ValidationFailed(
                f"case {case.case_id}: the rubric has no author; name an annotator to send it to",
                key="errors.rubric_no_author",
                params={"case_id": case.case_id},
            )
    if user.role != Role.annotator or not user.is_active:
        raise ValidationFailed(
            f"author: {user.username} is not an active annotator",
            key="errors.author_inactive",
            params={"username": user.username},
        )
    return user
