"""Rubric versions: the annotator's authoring side (queue, drafts, submission) and reading versions.

A case's rubric is a sequence of versions (1, 2, …). The newest version is the one being worked on:
- none yet, `returned` or `approved`: the next save creates a new `draft` version (old ones stay
  readable, with the checker's comments on the returned one);
- `draft`: saves update it in place, guarded by `lock_version` (optimistic locking);
- `submitted`: waiting for a checker, not editable.
Labeling always uses the newest *approved* version (`db.store.current_rubric`).

Submission is refused while a blocking problem remains (`db.rules.lint.blocking_problems`): an empty criterion,
an exact duplicate (after normalisation), or a number of criteria other than N. Everything else the
authoring lint reports is a warning the author may accept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, func
from sqlmodel import Session, col, select

from db.access.audit import record
from db.access.policies import RubricPolicy, authorize
from db.rubrics.provenance import OfferedDraft, newest_draft, record_provenance
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import AssignmentKind, RubricStatus
from db.rules.errors import NotFound, StaleEdit, ValidationFailed
from db.rules.limits import TEXT_LIMITS
from db.rules.lint import blocking_problems
from db.rules.taxonomy import get_taxonomy
from db.store.models import Assignment, Case, Criterion, RubricDraft, RubricVersion, User, utcnow

MAX_CRITERION_CHARS = TEXT_LIMITS["criterion"]


# Views handed to pages ------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseView:
    """What a physician sees of a case: never responses, models or labels."""

    case_pk: int
    case_id: str
    difficulty: str
    task: str
    task_labels: list[str]
    subject: str
    subject_labels: list[str]
    user_role: str
    clinical_context: str
    user_request: str


@dataclass(frozen=True)
class CriterionView:
    """One criterion of a rubric version, as the author, the labeler and the checker see it."""

    position: int
    criterion_id: str
    text: str
    tags: list[str]
    review_comment: str | None = None
    id: int | None = None  # the stored row (a checker's per-criterion comment names it)


@dataclass(frozen=True)
class VersionView:
    id: int
    case_pk: int
    version: int
    status: str
    lock_version: int
    author: str | None
    review_comment: str | None
    created_at: datetime
    submitted_at: datetime | None
    reviewed_at: datetime | None
    criteria: list[CriterionView] = field(default_factory=list)
    draft_id: int | None = None  # the LLM draft the version started from (docs/REFERENCE.md §4.3)


@dataclass(frozen=True)
class AuthoringView:
    case: CaseView
    latest: VersionView | None  # the version being worked on (or waiting / approved)
    returned: VersionView | None  # the checker's last return, when it is the basis of `latest`
    history: list[VersionView]  # every version, newest first, without criteria


@dataclass(frozen=True)
class CriterionInput:
    criterion_id: str
    text: str
    tags: Sequence[str] = ()


def default_criterion_ids(n: int = RUBRIC_SIZE) -> list[str]:
    width = max(2, len(str(n)))
    return [f"c{i:0{width}d}" for i in range(1, n + 1)]


# Reading -------------------------------------------------------------------------------------


def case_view(case: Case) -> CaseView:
    return CaseView(
        case_pk=case.id,
        case_id=case.case_id,
        difficulty=case.difficulty,
        task=case.task,
        task_labels=list(case.task_labels or []),
        subject=case.subject,
        subject_labels=list(case.subject_labels or []),
        user_role=case.user_role,
        clinical_context=case.clinical_context,
        user_request=case.user_request,
    )


def criteria_of(session: Session, rubric_version_id: int) -> list[CriterionView]:
    rows = session.exec(
        select(Criterion).where(col(Criterion.rubric_version_id) == rubric_version_id).order_by(col(Criterion.position))
    ).all()
    return [
        CriterionView(c.position, c.criterion_id, c.text, list(c.tags or []), c.review_comment, id=c.id) for c in rows
    ]


def _version_view(session: Session, version: RubricVersion, *, with_criteria: bool = True) -> VersionView:
    author = session.get_one(User, version.author_id).username if version.author_id else None
    return VersionView(
        id=version.id,
        case_pk=version.case_pk,
        version=version.version,
        status=version.status,
        lock_version=version.lock_version,
        author=author,
        review_comment=version.review_comment,
        created_at=version.created_at,
        submitted_at=version.submitted_at,
        reviewed_at=version.reviewed_at,
        criteria=criteria_of(session, version.id) if with_criteria else [],
        draft_id=version.draft_id,
    )


def latest_version(session: Session, case_pk: int) -> RubricVersion | None:
    return session.exec(
        select(RubricVersion)
        .where(col(RubricVersion.case_pk) == case_pk)
        .order_by(col(RubricVersion.version).desc())
        .limit(1)
    ).first()


def _require_case(session: Session, case_pk: int) -> Case:
    case = session.get(Case, case_pk)
    if case is None:
        raise NotFound(f"no case #{case_pk}", key="errors.case_unknown", params={"case_id": case_pk})
    return case


def require_rubric_assignment(session: Session, user: User, case_pk: int) -> None:
    """Only an active annotator with a rubric assignment for the case may author its rubric."""
    user = authorize(session, user, RubricPolicy.author())  # the role, before reading the case's assignments
    assigned = session.exec(
        select(Assignment.id)
        .where(
            Assignment.user_id == user.id,
            Assignment.kind == AssignmentKind.rubric,
            Assignment.case_pk == case_pk,
        )
        .limit(1)
    ).first()
    authorize(session, user, RubricPolicy.author(assigned=assigned is not None))


def authoring_view(session: Session, user: User, case_pk: int) -> AuthoringView:
    """The case, its newest version with criteria, the checker's last return and the history."""
    require_rubric_assignment(session, user, case_pk)
    case = _require_case(session, case_pk)
    versions = session.exec(
        select(RubricVersion).where(col(RubricVersion.case_pk) == case_pk).order_by(col(RubricVersion.version).desc())
    ).all()
    latest = _version_view(session, versions[0]) if versions else None
    returned = None
    if versions and versions[0].status == RubricStatus.returned:
        returned = latest
    elif len(versions) > 1 and versions[0].status == RubricStatus.draft and versions[1].status == RubricStatus.returned:
        returned = _version_view(session, versions[1])
    history = [_version_view(session, v, with_criteria=False) for v in versions]
    return AuthoringView(case=case_view(case), latest=latest, returned=returned, history=history)


def read_version(session: Session, user: User, rubric_version_id: int) -> VersionView:
    """Any version (old ones stay readable) of a case assigned to the annotator."""
    version = session.get(RubricVersion, rubric_version_id)
    if version is None:
        raise NotFound(
            f"no rubric version #{rubric_version_id}",
            key="errors.rubric_unknown",
            params={"version": rubric_version_id},
        )
    require_rubric_assignment(session, user, version.case_pk)
    return _version_view(session, version)


def offered_draft(session: Session, user: User, case_pk: int) -> OfferedDraft | None:
    """The LLM draft waiting for the case's assigned author (docs/REFERENCE.md §4.3): the one the newest
    version started from, else the case's newest; None when there is none. Nobody else receives it."""
    require_rubric_assignment(session, user, case_pk)
    latest = latest_version(session, case_pk)
    if latest is not None and latest.draft_id is not None:
        started = session.get(RubricDraft, latest.draft_id)
        if started is not None:
            return OfferedDraft(
                started.id, started.generator, list(started.criteria or []), started.created_at, dict(started.dropped)
            )
    return newest_draft(session, case_pk)


# Writing -------------------------------------------------------------------------------------


def _snapshot(criteria: Sequence[CriterionView | CriterionInput]) -> list[dict]:
    return [{"criterion_id": c.criterion_id, "text": c.text, "tags": list(c.tags)} for c in criteria]


def validate_inputs(criteria: Sequence[CriterionInput], expected: int = RUBRIC_SIZE) -> None:
    """Shape checks every saved version must pass (a draft may still have empty criteria)."""
    if len(criteria) != expected:
        raise ValidationFailed(
            f"rubric: {len(criteria)} criteria given, the editor holds exactly {expected}",
            key="errors.rubric_size",
            params={"given": len(criteria), "expected": expected},
        )
    known_tags = {tag["id"] for tag in get_taxonomy().failure_tags()}
    seen: set[str] = set()
    for row, item in enumerate(criteria, start=1):
        cid = (item.criterion_id or "").strip()
        if not cid or len(cid) > 64:
            raise ValidationFailed(
                f"criterion {row}: criterion_id must be 1–64 characters",
                key="errors.criterion_id_length",
                params={"row": row},
            )
        if cid in seen:
            raise ValidationFailed(
                f"criterion {row}: criterion_id {cid!r} is used twice",
                key="errors.criterion_id_twice",
                params={"row": row, "criterion": cid},
            )
        seen.add(cid)
        if len(item.text or "") > MAX_CRITERION_CHARS:
            raise ValidationFailed(
                f"criterion {row} ({cid}): longer than {MAX_CRITERION_CHARS} characters",
                key="errors.criterion_too_long",
                params={"row": row, "limit": MAX_CRITERION_CHARS},
            )
        unknown = [tag for tag in item.tags if tag not in known_tags]
        if unknown:
            raise ValidationFailed(
                f"criterion {row} ({cid}): unknown tag(s) {', '.join(map(str, unknown))}",
                key="errors.criterion_unknown_tags",
                params={"row": row, "tags": ", ".join(map(str, unknown))},
            )


def _write_criteria(session: Session, version: RubricVersion, criteria: Sequence[CriterionInput]) -> None:
    # An explicit DELETE runs before the inserts; the unit of work would insert first and trip the
    # (version, criterion_id) unique constraint.
    session.execute(delete(Criterion).where(col(Criterion.rubric_version_id) == version.id))
    session.add_all(
        [
            Criterion(
                rubric_version_id=version.id,
                position=position,
                criterion_id=item.criterion_id.strip(),
                text=(item.text or "").strip(),
                tags=list(dict.fromkeys(item.tags)),
            )
            for position, item in enumerate(criteria, start=1)
        ]
    )
    session.flush()


def save_rubric_draft(
    session: Session,
    user: User,
    case_pk: int,
    criteria: Sequence[CriterionInput],
    *,
    base_version_id: int | None,
    expected_lock: int | None,
    expected_size: int = RUBRIC_SIZE,
    from_draft: int | None = None,
) -> VersionView:
    """Save the editor's N criteria as the case's draft.

    `base_version_id`/`expected_lock` are the newest version the page loaded (None, None when there
    was none). Someone else's save since then raises StaleEdit carrying the newer version.
    `from_draft` names the LLM draft the editor was filled from (docs/REFERENCE.md §4.3); a new version
    otherwise keeps the draft of the version it follows.
    """
    require_rubric_assignment(session, user, case_pk)
    case = _require_case(session, case_pk)
    validate_inputs(criteria, expected_size)
    if from_draft is not None:
        started = session.get(RubricDraft, from_draft)
        if started is None or started.case_pk != case_pk:
            raise ValidationFailed(
                f"draft #{from_draft} is not a draft of this case", key="drafts.not_this_case", params={}
            )
    latest = latest_version(session, case_pk)
    if (latest.id if latest else None) != base_version_id or (latest and latest.lock_version != expected_lock):
        raise StaleEdit(
            "the rubric was saved by someone else since you opened it",
            current=_version_view(session, latest) if latest else None,
            key="errors.rubric_saved_by_other",
        )
    if latest is not None and latest.status == RubricStatus.submitted:
        raise ValidationFailed(
            "the rubric is submitted and waits for a checker; it cannot be edited now", key="errors.rubric_waiting"
        )

    if latest is not None and latest.status == RubricStatus.draft:
        before = _snapshot(criteria_of(session, latest.id))
        after = _snapshot(criteria)
        if before == after:
            return _version_view(session, latest)
        latest.lock_version += 1
        latest.author_id = user.id
        if from_draft is not None and latest.draft_id is None:
            latest.draft_id = from_draft
        session.add(latest)
        _write_criteria(session, latest, criteria)
        record(
            session,
            user.username,
            action="update",
            entity="rubric",
            entity_key=f"{case.case_id} v{latest.version}",
            before={"criteria": before},
            after={"criteria": after},
        )
        return _version_view(session, latest)

    version = RubricVersion(
        case_pk=case_pk,
        version=(latest.version + 1) if latest else 1,
        status=RubricStatus.draft,
        author_id=user.id,
        draft_id=from_draft if from_draft is not None else (latest.draft_id if latest else None),
    )
    session.add(version)
    session.flush()
    _write_criteria(session, version, criteria)
    record(
        session,
        user.username,
        action="create",
        entity="rubric",
        entity_key=f"{case.case_id} v{version.version}",
        before={"from_version": latest.version, "status": latest.status} if latest else None,
        after={"status": RubricStatus.draft, "criteria": _snapshot(criteria)},
    )
    return _version_view(session, version)


def submit_rubric(
    session: Session, user: User, rubric_version_id: int, *, expected_lock: int, expected_size: int = RUBRIC_SIZE
) -> VersionView:
    """Hand a draft to the checkers; refused while a blocking problem remains."""
    version = session.get(RubricVersion, rubric_version_id)
    if version is None:
        raise NotFound(
            f"no rubric version #{rubric_version_id}",
            key="errors.rubric_unknown",
            params={"version": rubric_version_id},
        )
    require_rubric_assignment(session, user, version.case_pk)
    if version.lock_version != expected_lock:
        raise StaleEdit(
            "the rubric was saved by someone else since you opened it",
            current=_version_view(session, version),
            key="errors.rubric_saved_by_other",
        )
    if version.status != RubricStatus.draft:
        raise ValidationFailed(
            f"only a draft can be submitted (this version is {version.status})",
            key="errors.submit_not_draft",
            params={"status": str(version.status)},
        )
    criteria = criteria_of(session, version.id)
    problems = blocking_problems([c.text for c in criteria], expected_size)
    if problems:
        first = problems[0]
        where = f"criterion {first.row + 1}" if first.row is not None else "rubric"
        raise ValidationFailed(
            f"{where}: {first.code} — {len(problems)} problem(s) block submission",
            key="errors.rubric_blocked",
            params={"n": len(problems)},
        )
    case = _require_case(session, version.case_pk)
    version.status = RubricStatus.submitted
    version.submitted_at = utcnow()
    version.lock_version += 1
    session.add(version)
    provenance = record_provenance(session, version, [(c.criterion_id, c.text) for c in criteria])
    after: dict = {"status": RubricStatus.submitted}
    if version.draft_id is not None:  # what an entry does not say (no generator for a written one) is left out
        after["provenance"] = [{key: value for key, value in row.items() if value is not None} for row in provenance]
    record(
        session,
        user.username,
        action="submit",
        entity="rubric",
        entity_key=f"{case.case_id} v{version.version}",
        before={"status": RubricStatus.draft},
        after=after,
    )
    session.flush()
    return _version_view(session, version)


# Returned work ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReturnedWork:
    rubrics: int  # the author's cases whose newest version was returned to them
    comments: int  # the checker's comments on those versions (per criterion, and overall)


def returned_to_author(session: Session, user: User) -> ReturnedWork:
    """What waits for the author after a return: "returned to you (N comments)"."""
    user = authorize(session, user, RubricPolicy.author())
    case_pks = session.exec(
        select(Assignment.case_pk).where(Assignment.user_id == user.id, Assignment.kind == AssignmentKind.rubric)
    ).all()
    if not case_pks:
        return ReturnedWork(0, 0)
    newest = (
        select(RubricVersion.case_pk, func.max(RubricVersion.version).label("version"))
        .where(col(RubricVersion.case_pk).in_(list(case_pks)))
        .group_by(col(RubricVersion.case_pk))
        .subquery()
    )
    returned = session.exec(
        select(RubricVersion.id, RubricVersion.review_comment)
        .join(
            newest, (col(RubricVersion.case_pk) == newest.c.case_pk) & (col(RubricVersion.version) == newest.c.version)
        )
        .where(RubricVersion.status == RubricStatus.returned)
    ).all()
    if not returned:
        return ReturnedWork(0, 0)
    ids = [version_id for version_id, _ in returned]
    comments = session.exec(
        select(func.count())
        .select_from(Criterion)
        .where(col(Criterion.rubric_version_id).in_(ids), col(Criterion.review_comment).is_not(None))
        .where(Criterion.review_comment != "")
    ).one()
    overall = sum(bool((comment or "").strip()) for _, comment in returned)
    return ReturnedWork(len(returned), int(comments) + overall)


def unchanged_commented(returned: VersionView | None, criteria: Sequence[CriterionInput]) -> list[str]:
    """Criteria the checker commented on whose text is still the returned one (the author is asked first)."""
    if returned is None:
        return []
    texts = {c.criterion_id: c.text for c in criteria}
    return [
        c.criterion_id
        for c in returned.criteria
        if (c.review_comment or "").strip() and texts.get(c.criterion_id, "").strip() == c.text.strip()
    ]
