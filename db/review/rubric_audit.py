"""Rubric audit: the queue of submitted rubrics, approve or return with comments, relabel flags."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import func, select, update
from sqlalchemy.engine import CursorResult
from sqlmodel import Session, col

from db import counts
from db.access.audit import record
from db.access.policies import RubricPolicy, authorize
from db.review.shared import CaseText, _criteria, _current_versions_subquery, _username
from db.rubrics.authoring import CriterionView, criteria_of
from db.rubrics.provenance import CriterionOrigin, provenance_of
from db.rules.drafting import DELETED
from db.rules.enums import RubricStatus
from db.rules.errors import NotFound, StaleEdit, ValidationFailed
from db.rules.notes import clean_note
from db.store.current_rubric import stale_sql
from db.store.models import Case, Criterion, Label, Response, RubricVersion, User, utcnow

# Rubric audit --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RubricQueueItem:
    rubric_version_id: int
    case_id: str
    version: int
    author: str | None
    submitted_at: datetime | None
    n_criteria: int
    own: bool  # written by the checker: someone else must audit it


@dataclass(frozen=True)
class RubricView:
    rubric_version_id: int
    version: int
    status: str
    lock_version: int
    author: str | None
    reviewer: str | None
    review_comment: str | None
    case: CaseText
    criteria: list[CriterionView]
    own: bool
    # The last return of this case before this version: what the author was asked to fix.
    earlier_comment: str | None = None
    earlier_criterion_comments: dict[str, str] = field(default_factory=dict)
    earlier_criterion_texts: dict[str, str] = field(default_factory=dict)
    # Criteria whose text differs from the previous decided version (returned or approved; new ones
    # included): what to re-read. Empty, and `previous_version` None, on a first submission.
    changed_since_return: frozenset[str] = frozenset()
    previous_version: int | None = None
    # Where each criterion came from (docs/REFERENCE.md §4.3): criterion_id → origin, and the drafted
    # criteria the author left out. Empty for a version not started from an LLM draft.
    origins: dict[str, CriterionOrigin] = field(default_factory=dict)
    deleted_drafts: list[CriterionOrigin] = field(default_factory=list)


def rubric_queue(session: Session, user: User) -> list[RubricQueueItem]:
    """Submitted rubrics, oldest submission first; the checker's own are marked, not hidden."""
    user = authorize(session, user, RubricPolicy.audit())
    counts = (
        select(col(Criterion.rubric_version_id), func.count().label("n"))
        .group_by(col(Criterion.rubric_version_id))
        .subquery()
    )
    rows = session.execute(
        select(RubricVersion, col(Case.case_id), col(User.username), counts.c.n)
        .join(Case, col(Case.id) == col(RubricVersion.case_pk))
        .outerjoin(User, col(User.id) == col(RubricVersion.author_id))
        .outerjoin(counts, counts.c.rubric_version_id == RubricVersion.id)
        .where(col(RubricVersion.status) == RubricStatus.submitted)
        .order_by(col(RubricVersion.submitted_at), col(RubricVersion.id))
    ).all()
    return [
        RubricQueueItem(
            rubric.id, case_id, rubric.version, author, rubric.submitted_at, int(n or 0), rubric.author_id == user.id
        )
        for rubric, case_id, author, n in rows
    ]


def rubric_for_review(session: Session, user: User, rubric_version_id: int) -> RubricView:
    user = authorize(session, user, RubricPolicy.audit())
    rubric = session.get(RubricVersion, rubric_version_id)
    if rubric is None:
        raise NotFound(
            f"no rubric version {rubric_version_id}", key="errors.rubric_unknown", params={"version": rubric_version_id}
        )
    return _rubric_view(session, rubric, user)


def _rubric_view(session: Session, rubric: RubricVersion, user: User) -> RubricView:
    case = session.get_one(Case, rubric.case_pk)
    criteria = criteria_of(session, rubric.id)
    earlier = (
        session.execute(
            select(RubricVersion)
            .where(
                col(RubricVersion.case_pk) == rubric.case_pk,
                col(RubricVersion.version) < rubric.version,
                col(RubricVersion.status) == RubricStatus.returned,
            )
            .order_by(col(RubricVersion.version).desc())
            .limit(1)
        )
        .scalars()
        .first()
    )
    earlier_criteria = _criteria(session, earlier.id) if earlier else []
    previous = _previous_decided(session, rubric)
    if previous is None:
        previous_criteria: list[Criterion] = []
    elif earlier is not None and previous.id == earlier.id:
        previous_criteria = earlier_criteria
    else:
        previous_criteria = _criteria(session, previous.id)
    return RubricView(
        rubric.id,
        rubric.version,
        rubric.status,
        rubric.lock_version,
        _username(session, rubric.author_id),
        _username(session, rubric.reviewer_id),
        rubric.review_comment,
        CaseText.of(case),
        criteria,
        rubric.author_id == user.id,
        earlier.review_comment if earlier else None,
        {c.criterion_id: c.review_comment for c in earlier_criteria if c.review_comment},
        {c.criterion_id: c.text for c in earlier_criteria if c.review_comment},
        _changed(criteria, previous_criteria) if previous else frozenset(),
        previous.version if previous else None,
        *_origins(session, rubric),
    )


def _origins(session: Session, rubric: RubricVersion) -> tuple[dict[str, CriterionOrigin], list[CriterionOrigin]]:
    if rubric.draft_id is None:
        return {}, []
    found = provenance_of(session, rubric.id)
    kept = {row.criterion_id: row for row in found if row.criterion_id is not None}
    return kept, [row for row in found if row.origin == DELETED]


def _previous_decided(session: Session, rubric: RubricVersion) -> RubricVersion | None:
    """The newest version before `rubric` that a checker decided (returned or approved): what it is compared with."""
    return (
        session.execute(
            select(RubricVersion)
            .where(
                col(RubricVersion.case_pk) == rubric.case_pk,
                col(RubricVersion.version) < rubric.version,
                col(RubricVersion.status).in_([RubricStatus.returned, RubricStatus.approved]),
            )
            .order_by(col(RubricVersion.version).desc())
            .limit(1)
        )
        .scalars()
        .first()
    )


def _changed(criteria: list[CriterionView], earlier: list[Criterion]) -> frozenset[str]:
    before = {c.criterion_id: c.text for c in earlier}
    return frozenset(c.criterion_id for c in criteria if before.get(c.criterion_id) != c.text)


def _rubric_snapshot(session: Session, rubric: RubricVersion) -> dict[str, Any]:
    return {
        "status": rubric.status,
        "version": rubric.version,
        "lock_version": rubric.lock_version,
        "reviewer": _username(session, rubric.reviewer_id),
        "review_comment": rubric.review_comment,
    }


def _decide_rubric(
    session: Session,
    user: User,
    rubric_version_id: int,
    *,
    seen_lock_version: int,
    status: RubricStatus,
    comment: str | None,
    criterion_comments: dict[int, str | None],
) -> RubricView:
    user = authorize(session, user, RubricPolicy.audit())
    rubric = _submitted_as_seen(session, user, rubric_version_id, seen_lock_version)
    criteria = _commented_criteria(session, rubric, criterion_comments)
    before = _rubric_snapshot(session, rubric)
    before["criterion_comments"] = {c.criterion_id: c.review_comment for c in criteria.values() if c.review_comment}
    _set_decision(session, user, rubric, seen_lock_version=seen_lock_version, status=status, comment=comment)
    if status == RubricStatus.approved:
        counts.refresh_cases(session, [rubric.case_pk])  # the case's current rubric changed
    _set_criterion_comments(session, criteria, criterion_comments)
    session.refresh(rubric)
    after = _rubric_snapshot(session, rubric)
    after["criterion_comments"] = {c.criterion_id: c.review_comment for c in criteria.values() if c.review_comment}
    case = session.get_one(Case, rubric.case_pk)
    record(
        session,
        user.username,
        action="approve" if status == RubricStatus.approved else "return",
        entity="rubric",
        entity_key=f"{case.case_id} v{rubric.version}",
        before=before,
        after=after,
    )
    return _rubric_view(session, rubric, user)


def _submitted_as_seen(session: Session, user: User, rubric_version_id: int, seen_lock_version: int) -> RubricVersion:
    """The rubric version, when `user` may audit it, it is the revision they opened and it is submitted."""
    rubric = session.get(RubricVersion, rubric_version_id)
    if rubric is None:
        raise NotFound(
            f"no rubric version {rubric_version_id}", key="errors.rubric_unknown", params={"version": rubric_version_id}
        )
    authorize(session, user, RubricPolicy.audit(author_id=rubric.author_id))
    session.refresh(rubric)
    if rubric.lock_version != seen_lock_version:
        raise StaleEdit(
            "the rubric was changed since you opened it",
            current=_rubric_snapshot(session, rubric),
            key="errors.rubric_changed_since",
        )
    if rubric.status != RubricStatus.submitted:
        raise ValidationFailed(
            f"status: only a submitted rubric can be audited (this one is {rubric.status})",
            key="errors.audit_not_submitted",
            params={"status": str(rubric.status)},
        )
    return rubric


def _commented_criteria(
    session: Session, rubric: RubricVersion, criterion_comments: dict[int, str | None]
) -> dict[int, Criterion]:
    """The rubric's criteria by row id; refused when a comment names a criterion of another rubric."""
    criteria = {c.id: c for c in _criteria(session, rubric.id)}
    unknown = set(criterion_comments) - set(criteria)
    if unknown:
        raise ValidationFailed(
            f"criterion: {sorted(unknown)} not in this rubric",
            key="errors.audit_unknown_criteria",
            params={"criteria": ", ".join(map(str, sorted(unknown)))},
        )
    return criteria


def _set_decision(
    session: Session,
    user: User,
    rubric: RubricVersion,
    *,
    seen_lock_version: int,
    status: RubricStatus,
    comment: str | None,
) -> None:
    """The checker's decision on the version, landing only on the submitted revision they opened (else StaleEdit)."""
    changed = cast(
        CursorResult,
        session.execute(
            update(RubricVersion)
            .where(
                col(RubricVersion.id) == rubric.id,
                col(RubricVersion.lock_version) == seen_lock_version,
                col(RubricVersion.status) == RubricStatus.submitted,
            )
            .values(
                status=status,
                reviewer_id=user.id,
                review_comment=comment,
                reviewed_at=utcnow(),
                lock_version=col(RubricVersion.lock_version) + 1,
            )
            .execution_options(synchronize_session=False)
        ),
    ).rowcount
    if changed != 1:
        session.refresh(rubric)
        raise StaleEdit(
            "the rubric was changed since you opened it",
            current=_rubric_snapshot(session, rubric),
            key="errors.rubric_changed_since",
        )


def _set_criterion_comments(
    session: Session, criteria: dict[int, Criterion], criterion_comments: dict[int, str | None]
) -> None:
    """Each criterion's comment as the checker left it (a criterion not named loses its comment)."""
    for criterion in criteria.values():
        new_comment = criterion_comments.get(criterion.id)
        if criterion.review_comment != new_comment:
            criterion.review_comment = new_comment
            session.add(criterion)
    session.flush()


def approve_rubric(
    session: Session, user: User, rubric_version_id: int, *, seen_lock_version: int, comment: str | None = None
) -> RubricView:
    """Approves a submitted rubric: it becomes the case's current rubric and is frozen from now on."""
    return _decide_rubric(
        session,
        user,
        rubric_version_id,
        seen_lock_version=seen_lock_version,
        status=RubricStatus.approved,
        comment=clean_note(comment, "comment"),
        criterion_comments={},
    )


def return_rubric(
    session: Session,
    user: User,
    rubric_version_id: int,
    *,
    seen_lock_version: int,
    comment: str | None = None,
    criterion_comments: dict[int, str | None] | None = None,
) -> RubricView:
    """Returns a submitted rubric to its author with an overall comment and/or per-criterion comments.

    `criterion_comments` maps Criterion.id to a comment; criteria without one count as approved.
    """
    cleaned = {pk: clean_note(text, f"criterion {pk} comment") for pk, text in (criterion_comments or {}).items()}
    cleaned = {pk: text for pk, text in cleaned.items() if text}
    overall = clean_note(comment, "comment")
    if not overall and not cleaned:
        raise ValidationFailed(
            "comment: say what the author should change (an overall or a criterion comment)",
            key="errors.return_comment_missing",
        )
    return _decide_rubric(
        session,
        user,
        rubric_version_id,
        seen_lock_version=seen_lock_version,
        status=RubricStatus.returned,
        comment=overall,
        criterion_comments=cleaned,
    )


@dataclass(frozen=True)
class RelabelItem:
    label_id: int
    response_id: int
    response_code: str
    case_id: str
    criterion_id: str
    stage: str
    group_no: int
    user_id: int
    labeled_version_id: int
    current_version_id: int


def labels_needing_relabel(
    session: Session,
    *,
    user_id: int | None = None,
    group_no: int | None = None,
    stage: str | None = None,
    case_pk: int | None = None,
    response_id: int | None = None,
) -> list[RelabelItem]:
    """Labels made against a rubric version that is no longer the case's current approved one.

    An approved rubric is frozen: a change makes a new version, and the labels of the old one
    must be redone (`db.store.current_rubric`: such labels count nowhere until then).
    """
    current = _current_versions_subquery()
    statement = (
        select(
            col(Label.id),
            col(Label.response_id),
            col(Response.code),
            col(Case.case_id),
            col(Label.criterion_id),
            col(Label.stage),
            col(Label.group_no),
            col(Label.user_id),
            col(Label.rubric_version_id),
            current.c.rubric_version_id,
        )
        .join(Response, col(Response.id) == col(Label.response_id))
        .join(Case, col(Case.id) == col(Response.case_pk))
        .join(current, current.c.case_pk == Response.case_pk)
        .where(stale_sql(Label.rubric_version_id))
    )
    if user_id is not None:
        statement = statement.where(col(Label.user_id) == user_id)
    if group_no is not None:
        statement = statement.where(col(Label.group_no) == group_no)
    if stage is not None:
        statement = statement.where(col(Label.stage) == stage)
    if case_pk is not None:
        statement = statement.where(col(Response.case_pk) == case_pk)
    if response_id is not None:
        statement = statement.where(col(Label.response_id) == response_id)
    statement = statement.order_by(
        col(Case.case_id), col(Response.code), col(Label.criterion_id), col(Label.stage), col(Label.group_no)
    )
    return [RelabelItem(*row) for row in session.execute(statement).all()]
