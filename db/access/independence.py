"""The independence rules of the two expert groups (docs/REFERENCE.md §1), in one place.

The groups' agreement means something only if no information flows from one group into the
other group's labels. A checker sees the other group's labels only in adjudication, so:
- a response whose labels the checker's group has not finished checking cannot be adjudicated by
  them (check first: it is the group's own judgement that goes into adjudication);
- nobody adjudicates a response they annotated;
- once a checker has opened a response's adjudication, their own group's labels on it are closed
  to them (they could otherwise copy the other group's answer into their group's check).
Opening is recorded in `adjudication_opening` by `open_adjudication`, before any label is shown, and
in the audit log (`audit verify` replays the table from it: a deleted opening would reopen the labels).

No figure leaks a label either: whether a response has a disagreement, and how many, reaches a checker
only for responses closed to them. A checker takes responses their group has finished checking into
adjudication (`take_into_adjudication`: an opening recorded for each, in case and code order); only those
count in their adjudication queue and their sidebar. Which responses may be taken in
(`ready_for_adjudication`) reads the checker's own group's labels only, so flipping one of one's own
still-open labels changes nothing a checker receives but that label.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, col

from db import counts
from db.access.audit import record
from db.access.audit_records import OPENING_ENTITY
from db.access.policies import LabelPolicy, authorize
from db.rules.enums import Stage
from db.store.current_rubric import (
    BATCH,
)
from db.store.models import AdjudicationOpening, Case, Response, User, utcnow

_TALLY = SQLModel.metadata.tables["label_tally"]


def annotated_by(session: Session, user_id: int | None, response_ids: Iterable[int] | None = None) -> set[int]:
    """Responses on which the user made an annotation label.

    Checking one's own group's labels does not count: the checker role checks and then
    adjudicates (docs/REFERENCE.md §1), and once they open the adjudication their group's labels are closed.
    """
    # The kept tally (db.counts) has a row for every (response, group, stage, person, rubric version) with labels.
    statement = select(_TALLY.c.response_id).where(
        _TALLY.c.user_id == user_id, _TALLY.c.stage == Stage.annotation.value
    )
    return _in_batches(session, statement, _TALLY.c.response_id, response_ids)


def check_pending(session: Session, user: User, response_ids: Iterable[int] | None = None) -> set[int]:
    """Responses still waiting in the checker's own check queue.

    That is: their group has an annotation label on it, made by someone else (the checker may
    check it), that has no check label of the group yet.
    """
    # Kept in the tally (db.counts): annotation labels of a person with no check label of their group yet.
    statement = select(_TALLY.c.response_id).where(
        _TALLY.c.stage == Stage.annotation.value,
        _TALLY.c.group_no == user.group_no,
        _TALLY.c.user_id != user.id,
        _TALLY.c.n_unchecked > 0,
        _TALLY.c.counting,  # the check queue lists labels that count only (kept on the tally row)
    )
    return _in_batches(session, statement, _TALLY.c.response_id, response_ids)


def _in_batches(session: Session, statement, column, response_ids: Iterable[int] | None) -> set[int]:
    """The distinct response ids `statement` selects (of `response_ids` only, when given, read in batches)."""
    if response_ids is None:
        return set(session.execute(statement.distinct()).scalars())
    wanted = sorted(set(response_ids))
    found: set[int] = set()
    for start in range(0, len(wanted), BATCH):
        found.update(session.execute(statement.where(column.in_(wanted[start : start + BATCH])).distinct()).scalars())
    return found


def opened_by(session: Session, user_id: int | None, response_ids: Iterable[int] | None = None) -> set[int]:
    """Responses whose adjudication the user has opened."""
    statement = select(col(AdjudicationOpening.response_id)).where(col(AdjudicationOpening.user_id) == user_id)
    if response_ids is not None:
        statement = statement.where(col(AdjudicationOpening.response_id).in_(list(response_ids)))
    return set(session.execute(statement).scalars())


def not_adjudicable(session: Session, user: User, response_ids: Iterable[int]) -> set[int]:
    """Of `response_ids`, those the checker may not adjudicate (annotated them, or their group's check is pending)."""
    wanted = list(response_ids)
    if not wanted:
        return set()
    return annotated_by(session, user.id, wanted) | check_pending(session, user, wanted)


def require_may_adjudicate(session: Session, user: User, response_id: int) -> None:
    """The adjudication policy, with the facts it needs about this response read for this checker."""
    user = authorize(session, user, LabelPolicy.adjudicate())  # the role, before anything about the response is read
    authorize(
        session,
        user,
        LabelPolicy.adjudicate(
            annotated_it=bool(annotated_by(session, user.id, [response_id])),
            check_pending=bool(check_pending(session, user, [response_id])),
        ),
    )


def open_adjudication(session: Session, user: User, response_id: int) -> None:
    """Records, durably and before any label is shown, that the checker sees both groups' labels of the response.

    In a write session the record joins its transaction; a read-only session (SQLite's shared
    read) gets it committed in a short write transaction of its own first.
    """
    require_may_adjudicate(session, user, response_id)
    if opened_by(session, user.id, [response_id]):
        return
    if session.connection().get_execution_options().get("sqlite_read_only"):
        from db.store.engine import session_scope

        bind = session.get_bind()
        engine = bind if isinstance(bind, Engine) else bind.engine
        with session_scope(engine) as writer:
            _insert_opening(writer, user.id, response_id)
    else:
        _insert_opening(session, user.id, response_id)


def _insert_opening(session: Session, user_id: int | None, response_id: int) -> None:
    try:
        with session.begin_nested():
            session.execute(
                insert(AdjudicationOpening).values(user_id=user_id, response_id=response_id, opened_at=utcnow())
            )
            _record_openings(session, user_id, [response_id])
    except IntegrityError:
        pass  # opened at the same moment in another tab: recorded either way


def _record_openings(session: Session, user_id: int | None, response_ids: list[int]) -> None:
    """One audit entry naming the responses whose adjudication the checker opened (`audit verify` replays it)."""
    username = session.execute(select(col(User.username)).where(col(User.id) == user_id)).scalar_one()
    named = {
        response_id: [case_id, code]
        for start in range(0, len(response_ids), BATCH)
        for response_id, case_id, code in session.execute(
            select(col(Response.id), col(Case.case_id), col(Response.code))
            .join(Case, col(Case.id) == col(Response.case_pk))
            .where(col(Response.id).in_(response_ids[start : start + BATCH]))
        )
    }
    record(
        session,
        username,
        action="open",
        entity=OPENING_ENTITY,
        entity_key=username,
        after={"user": username, "responses": [named[response_id] for response_id in response_ids]},
    )


def ready_for_adjudication(session: Session, user: User) -> list[int]:
    """Responses the checker may take into adjudication, in case and code order.

    Their group's labels on it are complete on the current rubric and every one is checked, the checker
    annotated none of it, and has not taken it in (or opened it) yet. Only the checker's own group's labels
    are read: the list says nothing about the other group. The group's part is kept (db.counts, one row per
    ready response), so a visit reads the ready responses, not every label of the group.
    """
    user = authorize(session, user, LabelPolicy.read_checks())
    if user.group_no not in (1, 2):
        return []  # a checker outside the two groups checks nothing, so nothing is ready
    ready = counts.ready_for_adjudication(group_no=user.group_no)
    rows = session.execute(
        select(ready.c.response_id)
        .join(Response, col(Response.id) == ready.c.response_id)
        .join(Case, col(Case.id) == col(Response.case_pk))
        .order_by(col(Case.case_id), col(Response.code), ready.c.response_id)
    ).scalars()
    # A check pending on a ready response is the checker's own label's (kept ready means all are checked), and
    # a checker never takes in what they annotated: the per-person sets below are all that is left to refuse.
    refused = annotated_by(session, user.id) | opened_by(session, user.id)
    return [response_id for response_id in rows if response_id not in refused]


def count_ready_for_adjudication(session: Session, user: User) -> int:
    """How many responses `ready_for_adjudication` lists, without reading the list: a count of the group's kept
    ready rows, less those the checker annotated or opened (their own few, looked up among the ready rows).

    A page that shows the number runs this on every visit; the list is read only when responses are taken in.
    """
    user = authorize(session, user, LabelPolicy.read_checks())
    if user.group_no not in (1, 2):
        return 0
    ready = counts.ready_for_adjudication(group_no=user.group_no)
    total = int(session.execute(select(func.count()).select_from(ready)).scalar_one())
    refused = sorted(annotated_by(session, user.id) | opened_by(session, user.id))
    for start in range(0, len(refused), BATCH):
        batch = refused[start : start + BATCH]
        total -= int(
            session.execute(select(func.count()).select_from(ready).where(ready.c.response_id.in_(batch))).scalar_one()
        )
    return total


def take_into_adjudication(session: Session, user: User, *, limit: int | None = None) -> int:
    """Closes the checker's group's labels on the first `limit` (all when None) responses ready for adjudication
    to them, recording an opening for each; from now on their disagreements count in the checker's queue and
    sidebar. Returns how many were taken in."""
    ready = ready_for_adjudication(session, user)
    chosen = ready if limit is None else ready[: max(0, limit)]
    if not chosen:
        return 0
    rows = [dict(user_id=user.id, response_id=response_id, opened_at=utcnow()) for response_id in chosen]
    try:
        with session.begin_nested():
            for start in range(0, len(rows), BATCH):
                session.execute(insert(AdjudicationOpening), rows[start : start + BATCH])
            _record_openings(session, user.id, chosen)
    except IntegrityError:  # another tab took some of them at the same moment: record the rest one by one
        for response_id in chosen:
            _insert_opening(session, user.id, response_id)
    return len(chosen)


def labels_closed_to(session: Session, user: User, response_id: int) -> bool:
    """Whether the user opened the response's adjudication: then their own group's labels on it are closed to them."""
    return bool(opened_by(session, user.id, [response_id]))


def require_group_labels_open(session: Session, user: User, response_id: int) -> None:
    """Refuses a change of the user's own group's labels on a response whose adjudication they opened."""
    authorize(session, user, LabelPolicy.check(labels_closed=labels_closed_to(session, user, response_id)))
