"""Label check within a group: queues by annotator, sample or judge disagreement, and corrections."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from sqlalchemy import and_, case as sql_case, func, or_, select
from sqlmodel import Session, col

from db import counts
from db.access import independence
from db.access.policies import LabelPolicy, authorize
from db.label_rows.view import LabelView, label_view
from db.label_rows.write import CHECK, Place, Wanted, write
from db.review.shared import (
    CaseText,
    _criteria,
    _response_and_case,
    current_rubric_version_id,
)
from db.rules.enums import Stage
from db.rules.errors import NotFound, ValidationFailed
from db.rules.notes import clean_note
from db.store.current_rubric import counts_sql
from db.store.models import Case, JudgeDecision, Label, Response, User

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
    user = authorize(session, user, LabelPolicy.read_checks())
    group = _group_of(user)
    people = (col(User.id), col(User.username), col(User.display_name))
    # Kept per person (db.counts' label totals): a few rows, however many labels the group has.
    totals = counts.person_totals(stage=Stage.annotation.value, group_no=group)
    statement = select(*people, totals.c.n_responses, totals.c.n_labels).join(totals, totals.c.user_id == User.id)
    rows = session.execute(statement.where(col(User.id) != user.id).order_by(User.username)).all()
    return [
        AnnotatorSummary(uid, name, display or name, int(n_resp), int(n_lab))
        for uid, name, display, n_resp, n_lab in rows
    ]


def _require_queue_reader(session: Session, user: User, annotator_id: int) -> User:
    return authorize(session, user, LabelPolicy.read_annotator_queue(annotator_id=annotator_id))


def _group_of(checker: User) -> int:
    """The expert group of a checker (every account but an admin's has one: db.access.users.validate_account)."""
    assert checker.group_no is not None
    return checker.group_no


def _own_responses(group: int, annotator_id: int):
    """response_id, n: the annotator's annotation labels per response in `group`."""
    own_tally = counts.tally(stage=Stage.annotation.value, group_no=group, user_id=annotator_id)
    return (
        select(own_tally.c.response_id, func.sum(own_tally.c.n).label("n"))
        .group_by(own_tally.c.response_id)
        .subquery("own")
    )


def _checked_per_response(group: int, own):
    """response_id, n: the group's check labels per response, of the responses of `own` (`_own_responses`) only:
    the annotator's queue looks up its own responses, not the whole group's checks."""
    check_tally = counts.tally(stage=Stage.check.value, group_no=group)
    return (
        select(check_tally.c.response_id, func.sum(check_tally.c.n).label("n"))
        .where(check_tally.c.response_id.in_(select(own.c.response_id)))
        .group_by(check_tally.c.response_id)
        .subquery("checked")
    )


#: The queue's order ("all" mode, and within the other modes' rules): case, then response code (unique).
_QUEUE_ORDER = (Case.case_id, Response.code)


def _queue_rows(group: int, annotator_id: int):
    """response_id, code, case_id, n_labels, n_checked of the annotator's whole queue, in queue order."""
    own = _own_responses(group, annotator_id)
    checked = _checked_per_response(group, own)
    return (
        select(own.c.response_id, col(Response.code), col(Case.case_id), own.c.n, checked.c.n)
        .join(Response, Response.id == own.c.response_id)
        .join(Case, col(Case.id) == col(Response.case_pk))
        .outerjoin(checked, checked.c.response_id == own.c.response_id)
        .order_by(*_QUEUE_ORDER)
    )


def _queue_page_rows(session: Session, group: int, annotator_id: int, offset: int, limit: int) -> list[tuple]:
    """The rows of `_queue_rows` from `offset`, `limit` of them: the check labels summed for those only."""
    own = _own_responses(group, annotator_id)
    page = session.execute(
        select(own.c.response_id, col(Response.code), col(Case.case_id), own.c.n)
        .join(Response, Response.id == own.c.response_id)
        .join(Case, col(Case.id) == col(Response.case_pk))
        .order_by(*_QUEUE_ORDER)
        .offset(offset)
        .limit(limit)
    ).all()
    check_tally = counts.tally(stage=Stage.check.value, group_no=group)
    checked = dict(
        session.execute(
            select(check_tally.c.response_id, func.sum(check_tally.c.n))
            .where(check_tally.c.response_id.in_([row[0] for row in page]))
            .group_by(check_tally.c.response_id)
        ).all()
    )
    return [(*row, checked.get(row[0])) for row in page]


def _items(rows) -> list[CheckQueueItem]:
    return [
        CheckQueueItem(rid, code, case_id, int(n), int(n_checked or 0)) for rid, code, case_id, n, n_checked in rows
    ]


def sample_responses(response_ids: list[int], percent: float, *, seed: int, annotator_id: int) -> list[int]:
    """A seeded x% sample (at least one when any) of one annotator's responses; same inputs, same sample."""
    if not 0 < percent <= 100:
        raise ValidationFailed(
            f"percent: between 0 and 100 (got {percent})", key="errors.percent_range", params={"value": percent}
        )
    ordered = sorted(set(response_ids))
    if not ordered:
        return []
    size = max(1, math.ceil(len(ordered) * percent / 100))
    chosen = random.Random(f"{seed}:{annotator_id}").sample(ordered, size)
    return sorted(chosen)


def check_queue(
    session: Session,
    user: User,
    *,
    annotator_id: int,
    mode: str = CHECK_ALL,
    percent: float = 10.0,
    seed: int = 1,
    judge: str | None = None,
) -> list[CheckQueueItem]:
    """The responses of one annotator (in the checker's group) to check.

    mode "all": every response they labeled; "sample": a seeded `percent`% of them;
    "judge": every response, the ones where they disagree most with `judge` first.
    """
    user = _require_queue_reader(session, user, annotator_id)
    group = _group_of(user)
    items = _items(session.execute(_queue_rows(group, annotator_id)).all())
    if mode == CHECK_ALL:
        return items
    if mode == CHECK_SAMPLE:
        keep = set(sample_responses([i.response_id for i in items], percent, seed=seed, annotator_id=annotator_id))
        return [item for item in items if item.response_id in keep]
    if mode == CHECK_JUDGE:
        if not judge:
            raise ValidationFailed("judge: choose a judge whose decisions were imported", key="errors.judge_choose")
        differs = sql_case((col(Label.met) != col(JudgeDecision.met), 1), else_=0)
        rates = {
            rid: float(diff) / float(n)
            for rid, diff, n in session.execute(
                select(col(Label.response_id), func.sum(differs), func.count())
                .join(
                    JudgeDecision,
                    and_(
                        col(JudgeDecision.response_id) == col(Label.response_id),
                        col(JudgeDecision.criterion_id) == col(Label.criterion_id),
                    ),
                )
                .where(
                    col(Label.stage) == Stage.annotation,
                    col(Label.group_no) == group,
                    col(Label.user_id) == annotator_id,
                    col(JudgeDecision.judge) == judge,
                    counts_sql(Label.rubric_version_id),
                )
                .group_by(col(Label.response_id))
            ).all()
        }
        ranked = [
            CheckQueueItem(i.response_id, i.code, i.case_id, i.n_labels, i.n_checked, rates[i.response_id])
            for i in items
            if i.response_id in rates
        ]
        return sorted(ranked, key=lambda i: (-rates[i.response_id], i.case_id, i.code))
    raise ValidationFailed(
        f"mode: one of {CHECK_ALL}, {CHECK_SAMPLE}, {CHECK_JUDGE} (got {mode!r})", key="errors.check_mode"
    )


def _fully_checked(item: CheckQueueItem) -> bool:
    return item.n_checked >= item.n_labels


def check_queue_page(
    session: Session,
    user: User,
    *,
    annotator_id: int,
    mode: str = CHECK_ALL,
    offset: int = 0,
    limit: int = 100,
    **options,
) -> list[CheckQueueItem]:
    """`check_queue(...)[offset : offset + limit]`, same rules, order and contents. In "all" mode only
    that page is read; the sample and judge modes need the whole queue to choose and rank."""
    user = _require_queue_reader(session, user, annotator_id)
    if offset < 0 or limit < 0:
        raise ValidationFailed(f"offset and limit: 0 or more (got {offset}, {limit})", key="errors.check_page")
    if mode != CHECK_ALL:
        queue = check_queue(session, user, annotator_id=annotator_id, mode=mode, **options)
        return queue[offset : offset + limit]
    return _items(_queue_page_rows(session, _group_of(user), annotator_id, offset, limit))


def check_queue_counts(
    session: Session, user: User, *, annotator_id: int, mode: str = CHECK_ALL, **options
) -> tuple[int, int]:
    """(responses in the queue, those with as many group check labels as the annotator's labels).
    In "all" mode one aggregate query, no rows read."""
    user = _require_queue_reader(session, user, annotator_id)
    if mode != CHECK_ALL:
        items = check_queue(session, user, annotator_id=annotator_id, mode=mode, **options)
        return len(items), sum(1 for item in items if _fully_checked(item))
    group = _group_of(user)
    own = _own_responses(group, annotator_id)
    checked = _checked_per_response(group, own)
    done = sql_case((func.coalesce(checked.c.n, 0) >= own.c.n, 1), else_=0)
    # Every tally row's response exists with its case (foreign keys): no join needed to count them.
    total, n_done = session.execute(
        select(func.count(), func.coalesce(func.sum(done), 0))
        .select_from(own)
        .outerjoin(checked, checked.c.response_id == own.c.response_id)
    ).one()
    return int(total), int(n_done)


def _queue_key(session: Session, group: int, annotator_id: int, response_id: int | None) -> tuple[str, str] | None:
    """(case_id, code) of `response_id` when it is in the annotator's queue, else None."""
    if response_id is None:
        return None
    own_tally = counts.tally(stage=Stage.annotation.value, group_no=group, user_id=annotator_id)
    row = session.execute(
        select(col(Case.case_id), col(Response.code))
        .join(Case, col(Case.id) == col(Response.case_pk))
        .where(col(Response.id) == response_id)
        .where(select(own_tally.c.response_id).where(own_tally.c.response_id == response_id).exists())
    ).first()
    return None if row is None else (row[0], row[1])


def _position(session: Session, group: int, annotator_id: int, key: tuple[str, str] | None) -> int:
    """How many responses come before `key` in the annotator's "all" queue (0 without a key)."""
    if key is None:
        return 0
    case_id, code = key
    own = _own_responses(group, annotator_id)
    before = or_(col(Case.case_id) < case_id, and_(col(Case.case_id) == case_id, col(Response.code) < code))
    return int(
        session.execute(
            select(func.count())
            .select_from(own)
            .join(Response, Response.id == own.c.response_id)
            .join(Case, col(Case.id) == col(Response.case_pk))
            .where(before)
        ).scalar_one()
    )


@dataclass(frozen=True)
class CheckQueueWindow:
    """A stretch of the queue around one response, with the whole queue's counts."""

    items: list[CheckQueueItem]
    offset: int  # queue position of items[0]
    total: int
    checked: int  # responses with as many group check labels as the annotator's labels
    position: int  # queue position of the response asked for; the first one when it is not in the queue


def check_queue_window(
    session: Session,
    user: User,
    *,
    annotator_id: int,
    around: int | None,
    before: int,
    after: int,
    mode: str = CHECK_ALL,
    **options,
) -> CheckQueueWindow:
    """`before` responses of the queue before `around` and `after` from it on (from the start when
    `around` is not in the queue), and the queue's counts. In "all" mode only that stretch is read."""
    user = _require_queue_reader(session, user, annotator_id)
    if before < 0 or after < 1:
        raise ValidationFailed(f"before, after: 0 or more, 1 or more (got {before}, {after})", key="errors.check_page")
    if mode != CHECK_ALL:
        queue = check_queue(session, user, annotator_id=annotator_id, mode=mode, **options)
        ids = [item.response_id for item in queue]
        position = ids.index(around) if around in ids else 0
        start = max(0, position - before)
        return CheckQueueWindow(
            queue[start : position + after], start, len(queue), sum(1 for i in queue if _fully_checked(i)), position
        )
    total, checked = check_queue_counts(session, user, annotator_id=annotator_id)
    key = _queue_key(session, _group_of(user), annotator_id, around)
    position = _position(session, _group_of(user), annotator_id, key)
    start = max(0, position - before)
    items = check_queue_page(session, user, annotator_id=annotator_id, offset=start, limit=position + after - start)
    return CheckQueueWindow(items, start, total, checked, position)


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
    # The checker opened this response's adjudication: their group's labels on it are closed to them.
    closed: bool = False


def check_view(session: Session, user: User, response_id: int) -> CheckView:
    """One response with the checker's group's annotation and check labels, criterion by criterion."""
    user = authorize(session, user, LabelPolicy.read_checks())
    response, case = _response_and_case(session, response_id)
    group = _group_of(user)
    labels = list(
        session.execute(
            select(Label).where(
                col(Label.response_id) == response_id,
                col(Label.group_no) == group,
                col(Label.stage).in_([Stage.annotation, Stage.check]),
                counts_sql(Label.rubric_version_id, case_pks=[case.id]),  # the current rubric's labels only
            )
        ).scalars()
    )
    if not any(label.stage == Stage.annotation for label in labels):
        raise NotFound(
            f"your group has no labels on response {response.code}",
            key="errors.group_no_labels",
            params={"response": response.code},
        )
    by_key = {(label.criterion_id, label.stage): label for label in labels}
    rows = []
    for criterion in _criteria(session, current_rubric_version_id(session, case.id)):
        annotation = by_key.get((criterion.criterion_id, Stage.annotation))
        check = by_key.get((criterion.criterion_id, Stage.check))
        rows.append(
            CheckRow(
                criterion.id,
                criterion.position,
                criterion.criterion_id,
                criterion.text,
                label_view(session, annotation) if annotation else None,
                label_view(session, check) if check else None,
                annotation is not None and annotation.user_id == user.id,
            )
        )
    closed = bool(independence.opened_by(session, user.id, [response_id]))
    return CheckView(response.id, response.code, response.text, CaseText.of(case), group, rows, closed)


def save_check(
    session: Session,
    user: User,
    *,
    response_id: int,
    criterion_id: str,
    met: bool,
    note: str | None = None,
    seen_lock_version: int | None = None,
) -> LabelView:
    """Confirms (same value) or corrects (other value, note required) the group's label of one criterion."""
    user = authorize(session, user, LabelPolicy.check())
    response, case = _response_and_case(session, response_id)
    wanted = _check_wanted(session, user, response, criterion_id, met, note, seen_lock_version)
    write(session, user, CHECK, _place(session, user, response, case), [wanted])
    label = _find_label(session, response_id, criterion_id, Stage.check, _group_of(user))
    assert label is not None  # just written
    return label_view(session, label)


def _place(session: Session, user: User, response: Response, case: Case) -> Place:
    """Where a checker's save writes: the group's check labels on the response, on the case's current rubric."""
    return Place(response, case.case_id, _group_of(user), current_rubric_version_id(session, case.id))


def _find_label(session: Session, response_id: int, criterion_id: str, stage: str, group_no: int) -> Label | None:
    return session.execute(
        select(Label)
        .where(
            col(Label.response_id) == response_id,
            col(Label.criterion_id) == criterion_id,
            col(Label.stage) == stage,
            col(Label.group_no) == group_no,
        )
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()


def _check_wanted(
    session: Session,
    user: User,
    response: Response,
    criterion_id: str,
    met: bool,
    note: str | None,
    seen_lock_version: int | None,
) -> Wanted:
    """The check label a checker may save on one criterion: of their own group's annotation label, not their own,
    while the response is not closed to them; a correction needs a note."""
    group = _group_of(user)
    annotation = _find_label(session, response.id, criterion_id, Stage.annotation, group)
    if annotation is None:
        raise NotFound(
            f"criterion {criterion_id}: your group has no label to check",
            key="errors.no_label_to_check",
            params={"criterion": criterion_id},
        )
    authorize(
        session,
        user,
        LabelPolicy.check(
            annotator_id=annotation.user_id, labels_closed=independence.labels_closed_to(session, user, response.id)
        ),
    )
    note = clean_note(note, "note", required=bool(met) != bool(annotation.met), criterion=criterion_id)
    return Wanted(criterion_id, bool(met), note, seen_lock_version or 0)


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
    user = authorize(session, user, LabelPolicy.read_checks())
    existing = {
        label.criterion_id: label
        for label in session.execute(
            select(Label).where(
                col(Label.response_id) == response_id,
                col(Label.stage) == Stage.check,
                col(Label.group_no) == user.group_no,
            )
        ).scalars()
    }
    todo = []
    for decision in decisions:
        label = existing.get(decision.criterion_id)
        note = (decision.note or "").strip() or None
        if (
            label is not None
            and label.lock_version == decision.seen_lock_version
            and (bool(label.met), label.note) == (bool(decision.met), note)
        ):
            continue
        todo.append((decision, note))
    if not todo:
        return 0
    user = authorize(session, user, LabelPolicy.check())
    response, case = _response_and_case(session, response_id)
    wanted = [
        _check_wanted(session, user, response, decision.criterion_id, decision.met, note, decision.seen_lock_version)
        for decision, note in todo
    ]
    write(session, user, CHECK, _place(session, user, response, case), wanted)
    return len(wanted)
