"""The checker's work: rubric audit, label check within a group, cross-group adjudication.

Every rule of the checker's side lives here, so a page (or a crafted request) cannot skip one:
- role: only active checkers act; a checker of group g sees and checks group g's labels only;
- blinding: nothing here hands a checker a model name (responses travel by their opaque code),
  and adjudication shows the two groups' labels as A and B in a per-cell, per-checker random order;
- separation of duties: no checking one's own labels, no adjudicating a response one labeled,
  no approving a rubric one wrote;
- concurrency: every save names the revision it started from (`seen_lock_version`, None for a
  new row); a save that lost a race raises StaleEdit carrying the newer value;
- every change is written to the audit log in the same transaction.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import and_, case as sql_case, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from db import gold, kept
from db.audit import record
from db.errors import NotFound, PermissionDenied, StaleEdit, ValidationFailed
from db.models import (NO_GROUP, Case, Criterion, JudgeDecision, Label, Response, Role, RubricStatus,
                       RubricVersion, Stage, User, utcnow)
from db.policies import require_role
from db.rubrics import current_approved_version

#: Longest note, comment or rationale a checker may save.
MAX_NOTE_LENGTH = 2000
#: Salt of the A/B order in adjudication; changing it reshuffles every cell.
AB_ORDER_SALT = "clinconsensus-ab-v1"


# Shared helpers ------------------------------------------------------------------------------

def _require_checker(user: User) -> None:
    require_role(user, Role.checker)


def _clean_text(value: str | None, what: str, *, required: bool = False) -> str | None:
    text = (value or "").strip()
    if required and not text:
        raise ValidationFailed(f"{what}: required")
    if len(text) > MAX_NOTE_LENGTH:
        raise ValidationFailed(f"{what}: at most {MAX_NOTE_LENGTH} characters (got {len(text)})")
    return text or None


def _username(session: Session, user_id: int | None) -> str | None:
    if user_id is None:
        return None
    user = session.get(User, user_id)
    return user.username if user else None


def current_rubric_version_id(session: Session, case_pk: int) -> int | None:
    """The id of the case's current rubric: its newest approved version."""
    version = current_approved_version(session, case_pk)
    return version.id if version else None


def _current_versions_subquery():
    newest = (select(RubricVersion.case_pk, func.max(RubricVersion.version).label("version"))
              .where(RubricVersion.status == RubricStatus.approved).group_by(RubricVersion.case_pk).subquery())
    return (select(RubricVersion.case_pk, RubricVersion.id.label("rubric_version_id"))
            .join(newest, and_(RubricVersion.case_pk == newest.c.case_pk, RubricVersion.version == newest.c.version))
            .subquery())


def _criteria(session: Session, rubric_version_id: int | None) -> list[Criterion]:
    if rubric_version_id is None:
        return []
    return list(session.execute(select(Criterion).where(Criterion.rubric_version_id == rubric_version_id)
                                .order_by(Criterion.position)).scalars())


def _response_and_case(session: Session, response_id: int) -> tuple[Response, Case]:
    response = session.get(Response, response_id)
    if response is None:
        raise NotFound(f"no response {response_id}")
    return response, session.get(Case, response.case_pk)


@dataclass(frozen=True)
class CaseText:
    """What a checker reads of a case (never a model name)."""

    case_id: str
    difficulty: str
    user_role: str
    clinical_context: str
    user_request: str

    @classmethod
    def of(cls, case: Case) -> "CaseText":
        return cls(case.case_id, case.difficulty, case.user_role, case.clinical_context, case.user_request)


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
class CriterionView:
    id: int
    position: int
    criterion_id: str
    text: str
    tags: list[str]
    review_comment: str | None


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


def rubric_queue(session: Session, user: User) -> list[RubricQueueItem]:
    """Submitted rubrics, oldest submission first; the checker's own are marked, not hidden."""
    _require_checker(user)
    counts = (select(Criterion.rubric_version_id, func.count().label("n")).group_by(Criterion.rubric_version_id)
              .subquery())
    rows = session.execute(
        select(RubricVersion, Case.case_id, User.username, counts.c.n)
        .join(Case, Case.id == RubricVersion.case_pk)
        .outerjoin(User, User.id == RubricVersion.author_id)
        .outerjoin(counts, counts.c.rubric_version_id == RubricVersion.id)
        .where(RubricVersion.status == RubricStatus.submitted)
        .order_by(RubricVersion.submitted_at, RubricVersion.id)
    ).all()
    return [RubricQueueItem(rubric.id, case_id, rubric.version, author, rubric.submitted_at, int(n or 0),
                            rubric.author_id == user.id)
            for rubric, case_id, author, n in rows]


def rubric_for_review(session: Session, user: User, rubric_version_id: int) -> RubricView:
    _require_checker(user)
    rubric = session.get(RubricVersion, rubric_version_id)
    if rubric is None:
        raise NotFound(f"no rubric version {rubric_version_id}")
    return _rubric_view(session, rubric, user)


def _rubric_view(session: Session, rubric: RubricVersion, user: User) -> RubricView:
    case = session.get(Case, rubric.case_pk)
    criteria = [CriterionView(c.id, c.position, c.criterion_id, c.text, list(c.tags or []), c.review_comment)
                for c in _criteria(session, rubric.id)]
    earlier = session.execute(
        select(RubricVersion).where(RubricVersion.case_pk == rubric.case_pk, RubricVersion.version < rubric.version,
                                    RubricVersion.status == RubricStatus.returned)
        .order_by(RubricVersion.version.desc()).limit(1)).scalars().first()
    earlier_criteria = _criteria(session, earlier.id) if earlier else []
    return RubricView(rubric.id, rubric.version, rubric.status, rubric.lock_version,
                      _username(session, rubric.author_id), _username(session, rubric.reviewer_id),
                      rubric.review_comment, CaseText.of(case), criteria, rubric.author_id == user.id,
                      earlier.review_comment if earlier else None,
                      {c.criterion_id: c.review_comment for c in earlier_criteria if c.review_comment},
                      {c.criterion_id: c.text for c in earlier_criteria if c.review_comment})


def _rubric_snapshot(session: Session, rubric: RubricVersion) -> dict[str, Any]:
    return {"status": rubric.status, "version": rubric.version, "lock_version": rubric.lock_version,
            "reviewer": _username(session, rubric.reviewer_id), "review_comment": rubric.review_comment}


def _decide_rubric(session: Session, user: User, rubric_version_id: int, *, seen_lock_version: int,
                   status: RubricStatus, comment: str | None,
                   criterion_comments: dict[int, str | None]) -> RubricView:
    _require_checker(user)
    rubric = session.get(RubricVersion, rubric_version_id)
    if rubric is None:
        raise NotFound(f"no rubric version {rubric_version_id}")
    if rubric.author_id == user.id:
        raise PermissionDenied("you wrote this rubric; another checker must audit it")
    session.refresh(rubric)
    if rubric.lock_version != seen_lock_version:
        raise StaleEdit("the rubric was changed since you opened it", current=_rubric_snapshot(session, rubric))
    if rubric.status != RubricStatus.submitted:
        raise ValidationFailed(f"status: only a submitted rubric can be audited (this one is {rubric.status})")
    criteria = {c.id: c for c in _criteria(session, rubric.id)}
    unknown = set(criterion_comments) - set(criteria)
    if unknown:
        raise ValidationFailed(f"criterion: {sorted(unknown)} not in this rubric")
    before = _rubric_snapshot(session, rubric)
    criteria_before = {c.criterion_id: c.review_comment for c in criteria.values()}
    now = utcnow()
    changed = session.execute(
        update(RubricVersion)
        .where(RubricVersion.id == rubric.id, RubricVersion.lock_version == seen_lock_version,
               RubricVersion.status == RubricStatus.submitted)
        .values(status=status, reviewer_id=user.id, review_comment=comment, reviewed_at=now,
                lock_version=RubricVersion.lock_version + 1)
        .execution_options(synchronize_session=False)
    ).rowcount
    if changed != 1:
        session.refresh(rubric)
        raise StaleEdit("the rubric was changed since you opened it", current=_rubric_snapshot(session, rubric))
    for criterion in criteria.values():
        new_comment = criterion_comments.get(criterion.id)
        if criterion.review_comment != new_comment:
            criterion.review_comment = new_comment
            session.add(criterion)
    session.flush()
    session.refresh(rubric)
    after = _rubric_snapshot(session, rubric)
    after["criterion_comments"] = {c.criterion_id: c.review_comment for c in criteria.values() if c.review_comment}
    before["criterion_comments"] = {k: v for k, v in criteria_before.items() if v}
    case = session.get(Case, rubric.case_pk)
    record(session, user.username, action="approve" if status == RubricStatus.approved else "return",
           entity="rubric", entity_key=f"{case.case_id} v{rubric.version}", before=before, after=after)
    return _rubric_view(session, rubric, user)


def approve_rubric(session: Session, user: User, rubric_version_id: int, *, seen_lock_version: int,
                   comment: str | None = None) -> RubricView:
    """Approves a submitted rubric: it becomes the case's current rubric and is frozen from now on."""
    return _decide_rubric(session, user, rubric_version_id, seen_lock_version=seen_lock_version,
                          status=RubricStatus.approved, comment=_clean_text(comment, "comment"),
                          criterion_comments={})


def return_rubric(session: Session, user: User, rubric_version_id: int, *, seen_lock_version: int,
                  comment: str | None = None, criterion_comments: dict[int, str | None] | None = None) -> RubricView:
    """Returns a submitted rubric to its author with an overall comment and/or per-criterion comments.

    `criterion_comments` maps Criterion.id to a comment; criteria without one count as approved.
    """
    cleaned = {pk: _clean_text(text, f"criterion {pk} comment") for pk, text in (criterion_comments or {}).items()}
    cleaned = {pk: text for pk, text in cleaned.items() if text}
    overall = _clean_text(comment, "comment")
    if not overall and not cleaned:
        raise ValidationFailed("comment: say what the author should change (an overall or a criterion comment)")
    return _decide_rubric(session, user, rubric_version_id, seen_lock_version=seen_lock_version,
                          status=RubricStatus.returned, comment=overall, criterion_comments=cleaned)


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


def labels_needing_relabel(session: Session, *, user_id: int | None = None, group_no: int | None = None,
                           stage: str | None = None, case_pk: int | None = None,
                           response_id: int | None = None) -> list[RelabelItem]:
    """Labels made against a rubric version that is no longer the case's current approved one.

    An approved rubric is frozen: a change makes a new version, and the labels of the old one
    must be redone. Labels without a recorded version (imports) are not flagged.
    """
    current = _current_versions_subquery()
    statement = (
        select(Label.id, Label.response_id, Response.code, Case.case_id, Label.criterion_id, Label.stage,
               Label.group_no, Label.user_id, Label.rubric_version_id, current.c.rubric_version_id)
        .join(Response, Response.id == Label.response_id)
        .join(Case, Case.id == Response.case_pk)
        .join(current, current.c.case_pk == Response.case_pk)
        .where(Label.rubric_version_id.is_not(None), Label.rubric_version_id != current.c.rubric_version_id)
    )
    if user_id is not None:
        statement = statement.where(Label.user_id == user_id)
    if group_no is not None:
        statement = statement.where(Label.group_no == group_no)
    if stage is not None:
        statement = statement.where(Label.stage == stage)
    if case_pk is not None:
        statement = statement.where(Response.case_pk == case_pk)
    if response_id is not None:
        statement = statement.where(Label.response_id == response_id)
    statement = statement.order_by(Case.case_id, Response.code, Label.criterion_id, Label.stage, Label.group_no)
    return [RelabelItem(*row) for row in session.execute(statement).all()]


# Saving a label with optimistic locking -----------------------------------------------------

@dataclass(frozen=True)
class LabelView:
    id: int
    criterion_id: str
    stage: str
    group_no: int
    met: bool
    note: str | None
    user: str | None
    user_id: int
    lock_version: int
    updated_at: datetime | None


def _label_view(session: Session, label: Label) -> LabelView:
    return LabelView(label.id, label.criterion_id, label.stage, label.group_no, label.met, label.note,
                     _username(session, label.user_id), label.user_id, label.lock_version, label.updated_at)


def _label_snapshot(session: Session, label: Label) -> dict[str, Any]:
    return {"met": label.met, "note": label.note, "user": _username(session, label.user_id),
            "lock_version": label.lock_version, "rubric_version_id": label.rubric_version_id}


def _find_label(session: Session, response_id: int, criterion_id: str, stage: str, group_no: int) -> Label | None:
    return session.execute(
        select(Label).where(Label.response_id == response_id, Label.criterion_id == criterion_id,
                            Label.stage == stage, Label.group_no == group_no)
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()


def _stale(session: Session, label: Label, what: str) -> StaleEdit:
    view = _label_view(session, label)
    return StaleEdit(f"this {what} was saved by {view.user} since you opened it", current=view)


def save_label(session: Session, actor: User, *, response: Response, case: Case, criterion_id: str, stage: str,
               group_no: int, met: bool, note: str | None, seen_lock_version: int | None) -> Label:
    """Inserts or updates one label row, refusing to overwrite a revision the caller did not see.

    seen_lock_version None means "I saw no label here": a row that exists (or is inserted by a
    racing writer) is a StaleEdit. Otherwise the UPDATE only lands on exactly that revision.
    Rules (who may save what) are the caller's; this only persists, locks and audits.
    """
    rubric_version_id = current_rubric_version_id(session, case.id)
    entity_key = f"{case.case_id}/{response.model}/{criterion_id}/{stage}/{group_no}"
    now = utcnow()
    what = {Stage.check: "check", Stage.adjudication: "decision"}.get(stage, "label")
    if seen_lock_version is None:
        existing = _find_label(session, response.id, criterion_id, stage, group_no)
        if existing is not None:
            raise _stale(session, existing, what)
        label = Label(response_id=response.id, criterion_id=criterion_id, stage=stage, group_no=group_no, met=met,
                      user_id=actor.id, note=note, rubric_version_id=rubric_version_id, created_at=now,
                      updated_at=now, lock_version=1)
        try:
            with session.begin_nested():
                session.add(label)
                session.flush()
        except IntegrityError:
            # Another writer inserted the same (response, criterion, stage, group) first.
            existing = _find_label(session, response.id, criterion_id, stage, group_no)
            if existing is None:
                raise
            raise _stale(session, existing, what) from None
        record(session, actor.username, action="create", entity=stage_entity(stage), entity_key=entity_key,
               after=_label_snapshot(session, label))
        kept.touch(session, [response.id])
        return label
    existing = _find_label(session, response.id, criterion_id, stage, group_no)
    if existing is None:
        raise NotFound(f"no {what} for criterion {criterion_id} any more")
    before = _label_snapshot(session, existing)
    changed = session.execute(
        update(Label)
        .where(Label.id == existing.id, Label.lock_version == seen_lock_version)
        .values(met=met, note=note, user_id=actor.id, rubric_version_id=rubric_version_id, updated_at=now,
                lock_version=Label.lock_version + 1)
        .execution_options(synchronize_session=False)
    ).rowcount
    label = _find_label(session, response.id, criterion_id, stage, group_no)
    if changed != 1:
        raise _stale(session, label, what)
    record(session, actor.username, action="update", entity=stage_entity(stage), entity_key=entity_key,
           before=before, after=_label_snapshot(session, label))
    kept.touch(session, [response.id])
    return label


def stage_entity(stage: str) -> str:
    """The audit log's entity name of a label of `stage`."""
    return {Stage.annotation: "label", Stage.check: "check", Stage.adjudication: "adjudication"}[Stage(stage)]


# Label check within a group ------------------------------------------------------------------

CHECK_ALL, CHECK_SAMPLE, CHECK_JUDGE = "all", "sample", "judge"


@dataclass(frozen=True)
class AnnotatorSummary:
    user_id: int
    username: str
    display_name: str
    n_responses: int
    n_labels: int


@dataclass(frozen=True)
class CheckQueueItem:
    response_id: int
    code: str
    case_id: str
    n_labels: int
    n_checked: int
    judge_disagreement: float | None = None  # share of criteria where annotator and judge differ


def check_annotators(session: Session, user: User) -> list[AnnotatorSummary]:
    """The annotators of the checker's group with annotation labels in that group (never the checker)."""
    _require_checker(user)
    group = user.group_no
    tally = kept.tally_source()
    rows = session.execute(
        select(User.id, User.username, User.display_name, func.count(func.distinct(tally.c.response_id)),
               func.sum(tally.c.n))
        .join(tally, tally.c.user_id == User.id)
        .where(tally.c.stage == Stage.annotation, tally.c.group_no == group, User.id != user.id)
        .group_by(User.id, User.username, User.display_name).order_by(User.username)
    ).all()
    return [AnnotatorSummary(uid, name, display or name, int(n_resp), int(n_lab))
            for uid, name, display, n_resp, n_lab in rows]


def judges_available(session: Session) -> list[str]:
    return list(session.execute(select(JudgeDecision.judge).distinct().order_by(JudgeDecision.judge)).scalars())


def sample_responses(response_ids: list[int], percent: float, *, seed: int, annotator_id: int) -> list[int]:
    """A seeded x% sample (at least one when any) of one annotator's responses; same inputs, same sample."""
    if not 0 < percent <= 100:
        raise ValidationFailed(f"percent: between 0 and 100 (got {percent})")
    ordered = sorted(set(response_ids))
    if not ordered:
        return []
    size = max(1, math.ceil(len(ordered) * percent / 100))
    chosen = random.Random(f"{seed}:{annotator_id}").sample(ordered, size)
    return sorted(chosen)


def check_queue(session: Session, user: User, *, annotator_id: int, mode: str = CHECK_ALL,
                percent: float = 10.0, seed: int = 1, judge: str | None = None) -> list[CheckQueueItem]:
    """The responses of one annotator (in the checker's group) to check.

    mode "all": every response they labeled; "sample": a seeded `percent`% of them;
    "judge": every response, the ones where they disagree most with `judge` first.
    """
    _require_checker(user)
    if annotator_id == user.id:
        raise PermissionDenied("you cannot check your own labels")
    group = user.group_no
    tally = kept.tally_source()
    own = (select(tally.c.response_id, func.sum(tally.c.n).label("n"))
           .where(tally.c.stage == Stage.annotation, tally.c.group_no == group, tally.c.user_id == annotator_id)
           .group_by(tally.c.response_id).subquery())
    checked = (select(tally.c.response_id, func.sum(tally.c.n).label("n"))
               .where(tally.c.stage == Stage.check, tally.c.group_no == group).group_by(tally.c.response_id)
               .subquery())
    rows = session.execute(
        select(own.c.response_id, Response.code, Case.case_id, own.c.n, checked.c.n)
        .join(Response, Response.id == own.c.response_id).join(Case, Case.id == Response.case_pk)
        .outerjoin(checked, checked.c.response_id == own.c.response_id)
        .order_by(Case.case_id, Response.code)
    ).all()
    items = [CheckQueueItem(rid, code, case_id, int(n), int(n_checked or 0)) for rid, code, case_id, n, n_checked in rows]
    if mode == CHECK_ALL:
        return items
    if mode == CHECK_SAMPLE:
        keep = set(sample_responses([i.response_id for i in items], percent, seed=seed, annotator_id=annotator_id))
        return [item for item in items if item.response_id in keep]
    if mode == CHECK_JUDGE:
        if not judge:
            raise ValidationFailed("judge: choose a judge whose decisions were imported")
        differs = sql_case((Label.met != JudgeDecision.met, 1), else_=0)
        rates = dict((rid, float(diff) / float(n)) for rid, diff, n in session.execute(
            select(Label.response_id, func.sum(differs), func.count())
            .join(JudgeDecision, and_(JudgeDecision.response_id == Label.response_id,
                                      JudgeDecision.criterion_id == Label.criterion_id))
            .where(Label.stage == Stage.annotation, Label.group_no == group, Label.user_id == annotator_id,
                   JudgeDecision.judge == judge)
            .group_by(Label.response_id)
        ).all())
        ranked = [CheckQueueItem(i.response_id, i.code, i.case_id, i.n_labels, i.n_checked, rates[i.response_id])
                  for i in items if i.response_id in rates]
        return sorted(ranked, key=lambda i: (-i.judge_disagreement, i.case_id, i.code))
    raise ValidationFailed(f"mode: one of {CHECK_ALL}, {CHECK_SAMPLE}, {CHECK_JUDGE} (got {mode!r})")


@dataclass(frozen=True)
class CheckRow:
    criterion_pk: int
    position: int
    criterion_id: str
    text: str
    annotation: LabelView | None
    check: LabelView | None
    own: bool  # the checker made the annotation: they may not check it


@dataclass(frozen=True)
class CheckView:
    response_id: int
    code: str
    response_text: str
    case: CaseText
    group_no: int
    rows: list[CheckRow] = field(default_factory=list)


def check_view(session: Session, user: User, response_id: int) -> CheckView:
    """One response with the checker's group's annotation and check labels, criterion by criterion."""
    _require_checker(user)
    response, case = _response_and_case(session, response_id)
    group = user.group_no
    labels = list(session.execute(
        select(Label).where(Label.response_id == response_id, Label.group_no == group,
                            Label.stage.in_([Stage.annotation, Stage.check]))).scalars())
    if not any(label.stage == Stage.annotation for label in labels):
        raise NotFound(f"your group has no labels on response {response.code}")
    by_key = {(label.criterion_id, label.stage): label for label in labels}
    rows = []
    for criterion in _criteria(session, current_rubric_version_id(session, case.id)):
        annotation = by_key.get((criterion.criterion_id, Stage.annotation))
        check = by_key.get((criterion.criterion_id, Stage.check))
        rows.append(CheckRow(criterion.id, criterion.position, criterion.criterion_id, criterion.text,
                             _label_view(session, annotation) if annotation else None,
                             _label_view(session, check) if check else None,
                             annotation is not None and annotation.user_id == user.id))
    return CheckView(response.id, response.code, response.text, CaseText.of(case), group, rows)


def save_check(session: Session, user: User, *, response_id: int, criterion_id: str, met: bool,
               note: str | None = None, seen_lock_version: int | None = None) -> LabelView:
    """Confirms (same value) or corrects (other value, note required) the group's label of one criterion."""
    _require_checker(user)
    if user.group_no not in (1, 2):
        raise PermissionDenied("checkers act within their expert group")
    response, case = _response_and_case(session, response_id)
    group = user.group_no
    annotation = _find_label(session, response_id, criterion_id, Stage.annotation, group)
    if annotation is None:
        raise NotFound(f"criterion {criterion_id}: your group has no label to check")
    if annotation.user_id == user.id:
        raise PermissionDenied("you cannot check your own labels")
    note = _clean_text(note, "note", required=bool(met) != bool(annotation.met))
    label = save_label(session, user, response=response, case=case, criterion_id=criterion_id, stage=Stage.check,
                       group_no=group, met=bool(met), note=note, seen_lock_version=seen_lock_version)
    return _label_view(session, label)


@dataclass(frozen=True)
class CheckInput:
    criterion_id: str
    met: bool
    note: str | None = None
    seen_lock_version: int | None = None  # of the check label the page showed; None when there was none


def save_checks(session: Session, user: User, *, response_id: int, decisions: list[CheckInput]) -> int:
    """Saves the checker's decisions on a response in one transaction; unchanged ones are skipped.

    Returns the number of check labels written. Any refusal (StaleEdit, PermissionDenied, a
    missing note) leaves nothing saved, since the caller's transaction rolls back.
    """
    _require_checker(user)
    existing = {label.criterion_id: label for label in session.execute(
        select(Label).where(Label.response_id == response_id, Label.stage == Stage.check,
                            Label.group_no == user.group_no)).scalars()}
    written = 0
    for decision in decisions:
        label = existing.get(decision.criterion_id)
        note = (decision.note or "").strip() or None
        if label is not None and label.lock_version == decision.seen_lock_version \
                and (bool(label.met), label.note) == (bool(decision.met), note):
            continue
        save_check(session, user, response_id=response_id, criterion_id=decision.criterion_id, met=decision.met,
                   note=note, seen_lock_version=decision.seen_lock_version)
        written += 1
    return written


# Adjudication --------------------------------------------------------------------------------

def unresolved_count(session: Session) -> int:
    """Decisions where both groups have a final label, they differ, and nobody adjudicated (DESIGN §4)."""
    return kept.unresolved_total(session)


def _labeled_responses(session: Session, user_id: int) -> set[int]:
    """Responses on which the user made an annotation or check label (adjudication would be judging oneself)."""
    return kept.responses_labeled_by(session, user_id)


@dataclass(frozen=True)
class AdjudicationQueueItem:
    response_id: int
    code: str
    case_id: str
    n_unresolved: int
    n_compared: int  # decisions both groups labeled
    agreement: float  # share of those on which the groups' final labels agree


def adjudication_queue(session: Session, user: User) -> list[AdjudicationQueueItem]:
    """Responses with unresolved disagreements, lowest agreement between the groups first.

    Responses the checker labeled are left out (they may not adjudicate them).
    """
    _require_checker(user)
    own = _labeled_responses(session, user.id)
    figures = [f for f in kept.responses_with_unresolved(session) if f.response_id not in own]
    if not figures:
        return []
    info = {}
    ids = [f.response_id for f in figures]
    for start in range(0, len(ids), 5000):
        info.update({rid: (code, case_id) for rid, code, case_id in session.execute(
            select(Response.id, Response.code, Case.case_id).join(Case, Case.id == Response.case_pk)
            .where(Response.id.in_(ids[start:start + 5000]))).all()})
    items = [AdjudicationQueueItem(f.response_id, info[f.response_id][0], info[f.response_id][1], f.n_unresolved,
                                   f.n_compared, 1.0 - f.n_differing / f.n_compared if f.n_compared else 0.0)
             for f in figures]
    return sorted(items, key=lambda i: (i.agreement, -i.n_unresolved, i.case_id, i.code))


def a_is_group1(user_id: int, response_id: int, criterion_id: str) -> bool:
    """Which group's label a checker sees as A: random per cell and checker, stable across visits."""
    digest = hashlib.sha256(f"{AB_ORDER_SALT}:{user_id}:{response_id}:{criterion_id}".encode()).digest()
    return digest[0] % 2 == 0


@dataclass(frozen=True)
class Side:
    met: bool
    note: str | None


@dataclass(frozen=True)
class AdjudicationCell:
    criterion_pk: int
    position: int
    criterion_id: str
    text: str
    a: Side
    b: Side
    decision: LabelView | None  # the adjudication already saved, if any
    unresolved: bool


@dataclass(frozen=True)
class AdjudicationView:
    response_id: int
    code: str
    response_text: str
    case: CaseText
    cells: list[AdjudicationCell]

    @property
    def n_open(self) -> int:
        return sum(cell.unresolved for cell in self.cells)


def _require_may_adjudicate(session: Session, user: User, response_id: int) -> None:
    _require_checker(user)
    if response_id in _labeled_responses(session, user.id):
        raise PermissionDenied("you labeled this response; another checker must adjudicate it")


def adjudication_view(session: Session, user: User, response_id: int) -> AdjudicationView:
    """Every cell of a response on which the groups' final labels differ, with the two labels as A and B."""
    _require_may_adjudicate(session, user, response_id)
    response, case = _response_and_case(session, response_id)
    labels = list(session.execute(select(Label).where(Label.response_id == response_id)).scalars())
    frame = pd.DataFrame([(l.response_id, l.criterion_id, l.stage, l.group_no, bool(l.met)) for l in labels],
                         columns=gold.LABEL_COLUMNS)
    finals = gold.decisions_with_finals(frame)
    unresolved = set(gold.unresolved_disagreements(frame)["criterion_id"])
    final_stage = gold.group_final_labels(frame).set_index(["criterion_id", "group_no"])["stage"].to_dict()
    by_key = {(l.criterion_id, l.stage, l.group_no): l for l in labels}
    finals = finals.set_index("criterion_id")
    cells = []
    for criterion in _criteria(session, current_rubric_version_id(session, case.id)):
        cid = criterion.criterion_id
        if cid not in finals.index:
            continue
        g1, g2 = finals.at[cid, "group1"], finals.at[cid, "group2"]
        if pd.isna(g1) or pd.isna(g2) or bool(g1) == bool(g2):
            continue
        sides = {}
        for group in (1, 2):
            label = by_key[(cid, final_stage[(cid, group)], group)]
            sides[group] = Side(bool(label.met), label.note)
        first, second = (1, 2) if a_is_group1(user.id, response_id, cid) else (2, 1)
        decision = by_key.get((cid, Stage.adjudication, NO_GROUP))
        cells.append(AdjudicationCell(criterion.id, criterion.position, cid, criterion.text, sides[first],
                                      sides[second], _label_view(session, decision) if decision else None,
                                      cid in unresolved))
    return AdjudicationView(response.id, response.code, response.text, CaseText.of(case), cells)


def adjudicate(session: Session, user: User, *, response_id: int, criterion_id: str, met: bool, rationale: str,
               seen_lock_version: int | None = None) -> LabelView:
    """Decides one disputed cell: the decision is the gold label (source "adjudicated")."""
    _require_may_adjudicate(session, user, response_id)
    rationale = _clean_text(rationale, "rationale", required=True)
    response, case = _response_and_case(session, response_id)
    frame = pd.DataFrame(
        session.execute(select(Label.response_id, Label.criterion_id, Label.stage, Label.group_no, Label.met)
                        .where(Label.response_id == response_id, Label.criterion_id == criterion_id)).all(),
        columns=gold.LABEL_COLUMNS)
    finals = gold.decisions_with_finals(frame)
    if finals.empty or finals["group1"].isna().any() or finals["group2"].isna().any() \
            or bool(finals["group1"].iloc[0]) == bool(finals["group2"].iloc[0]):
        raise ValidationFailed(f"criterion {criterion_id}: the two groups do not disagree here")
    label = save_label(session, user, response=response, case=case, criterion_id=criterion_id,
                       stage=Stage.adjudication, group_no=NO_GROUP, met=bool(met), note=rationale,
                       seen_lock_version=seen_lock_version)
    return _label_view(session, label)


@dataclass(frozen=True)
class AdjudicationInput:
    criterion_id: str
    met: bool
    rationale: str
    seen_lock_version: int | None = None  # of the decision the page showed; None when there was none


def adjudicate_many(session: Session, user: User, *, response_id: int,
                    decisions: list[AdjudicationInput]) -> int:
    """Saves several cells of one response in one transaction (all or nothing); returns how many."""
    for decision in decisions:
        adjudicate(session, user, response_id=response_id, criterion_id=decision.criterion_id, met=decision.met,
                   rationale=decision.rationale, seen_lock_version=decision.seen_lock_version)
    return len(decisions)
