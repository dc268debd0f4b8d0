"""Cross-group adjudication: disagreements, the blinded A/B view, gold decisions with a rationale."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pandas as pd
from sqlalchemy import select
from sqlmodel import Session, col

from db import counts
from db.access import independence
from db.access.policies import LabelPolicy, authorize
from db.label_rows.view import LabelView, label_view
from db.label_rows.write import ADJUDICATION, Place, Wanted, write
from db.review.shared import (
    AB_ORDER_SALT,
    CaseText,
    _criteria,
    _response_and_case,
    current_rubric_version_id,
)
from db.rules import gold
from db.rules.enums import NO_GROUP, Stage
from db.rules.errors import ValidationFailed
from db.rules.notes import clean_note
from db.store.current_rubric import counts_sql
from db.store.models import AdjudicationOpening, Case, Label, Response, ResponseStatus, User

# Adjudication --------------------------------------------------------------------------------


def unresolved_count(session: Session) -> int:
    """Decisions where both groups have a final label, they differ, and nobody adjudicated (docs/REFERENCE.md §4).

    Every response's: the admins' figure. A checker's own is `my_unresolved_count`."""
    return counts.unresolved_total(session)


def _my_unresolved_figures(session: Session, user: User) -> list[counts.ResponseFigures]:
    """The kept figures of the responses with an unresolved disagreement that are closed to the checker (they
    took them into adjudication or opened them) and that they may adjudicate, in response order.

    Responses still open to them are left out whatever their figures: a count that moved when the checker
    flipped one of their own labels would tell them the other group's label (db.access.independence)."""
    user = authorize(session, user, LabelPolicy.read_checks())
    rows = session.execute(
        select(*(getattr(ResponseStatus, name) for name in counts.STATUS_COLUMNS))
        .join(AdjudicationOpening, col(AdjudicationOpening.response_id) == col(ResponseStatus.response_id))
        .where(col(AdjudicationOpening.user_id) == user.id, col(ResponseStatus.n_unresolved) > 0)
        .order_by(col(ResponseStatus.response_id))
    ).all()
    unresolved = [counts.ResponseFigures(*map(int, row)) for row in rows]
    refused = independence.not_adjudicable(session, user, [f.response_id for f in unresolved])
    return [f for f in unresolved if f.response_id not in refused]


def my_unresolved_count(session: Session, user: User) -> int:
    """The unresolved decisions of the checker's adjudication queue: on responses closed to them only."""
    return sum(f.n_unresolved for f in _my_unresolved_figures(session, user))


@dataclass(frozen=True)
class OpenDisagreements:
    """One count on two bases, shown together wherever it is shown: the decisions nobody adjudicated yet
    (criteria of a response on which the groups' final labels differ) and the responses holding them."""

    decisions: int
    responses: int


def my_open_disagreements(session: Session, user: User) -> OpenDisagreements:
    """The checker's: their adjudication queue's decisions and responses (closed to them only, as above)."""
    figures = _my_unresolved_figures(session, user)
    return OpenDisagreements(sum(f.n_unresolved for f in figures), len(figures))


def all_open_disagreements(session: Session) -> OpenDisagreements:
    """Every response's: the admins' figure."""
    return OpenDisagreements(*counts.unresolved_figures(session))


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

    Only responses closed to the checker are listed (taken into adjudication, db.access.independence), and of
    those not the ones they may not adjudicate: those they labeled, and those their group has not finished
    checking. The figures are the kept ones of db.counts, so the queue reads a few small rows, not every label.
    """
    figures = _my_unresolved_figures(session, user)
    ids = [f.response_id for f in figures]
    info = {}
    for start in range(0, len(ids), 5000):
        info.update(
            {
                rid: (code, case_id)
                for rid, code, case_id in session.execute(
                    select(col(Response.id), col(Response.code), col(Case.case_id))
                    .join(Case, col(Case.id) == col(Response.case_pk))
                    .where(col(Response.id).in_(ids[start : start + 5000]))
                ).all()
            }
        )
    items = [
        AdjudicationQueueItem(
            f.response_id,
            info[f.response_id][0],
            info[f.response_id][1],
            f.n_unresolved,
            f.n_compared,
            1.0 - f.n_differing / f.n_compared if f.n_compared else 0.0,
        )
        for f in figures
    ]
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


def _open_for_good(session: Session, user: User, response_id: int) -> None:
    """Record that the checker opens the response's adjudication, committed before anything of it is read.

    The opening is what closes the checker's own group's labels on the response to them, so it must outlive
    whatever follows in the caller's transaction: a refused adjudication (a made-up lock version, a cell the
    groups agree on) or a caller that reads the view and then rolls back. A new opening in a write transaction
    is therefore committed at once, with whatever the caller wrote before it (a read-only SQLite session has
    it committed in a short transaction of its own by `open_adjudication`).
    """
    if independence.opened_by(session, user.id, [response_id]):
        independence.require_may_adjudicate(session, user, response_id)
        return
    independence.open_adjudication(session, user, response_id)
    if not session.connection().get_execution_options().get("sqlite_read_only"):
        session.commit()


def adjudication_view(session: Session, user: User, response_id: int) -> AdjudicationView:
    """Every cell of a response on which the groups' final labels differ, with the two labels as A and B.

    Opening it is recorded and committed first: from now on the checker's own group's labels on it are closed
    to them, whatever the caller's transaction does next.
    """
    _open_for_good(session, user, response_id)
    response, case = _response_and_case(session, response_id)
    # Finals and disagreements from the labels that count on the current rubric only (db.store.current_rubric).
    labels = list(
        session.execute(
            select(Label).where(
                col(Label.response_id) == response_id,
                counts_sql(col(Label.rubric_version_id), case_pks=[case.id]),
            )
        ).scalars()
    )
    frame = pd.DataFrame(
        [(label.response_id, label.criterion_id, label.stage, label.group_no, bool(label.met)) for label in labels],
        columns=gold.LABEL_COLUMNS,
    )
    finals = gold.decisions_with_finals(frame)
    unresolved = set(gold.unresolved_disagreements(frame)["criterion_id"])
    final_stage = gold.group_final_labels(frame).set_index(["criterion_id", "group_no"])["stage"].to_dict()
    by_key = {(label.criterion_id, label.stage, label.group_no): label for label in labels}
    finals = finals.set_index("criterion_id")
    cells = []
    for criterion in _criteria(session, current_rubric_version_id(session, case.id)):
        cid = criterion.criterion_id
        if cid not in finals.index:
            continue
        g1, g2 = finals.at[cid, "group1"], finals.at[cid, "group2"]
        # pandas-stubs: `.at` may give numpy.bool, Period or Interval, which isna takes but its stub does not list.
        if pd.isna(g1) or pd.isna(g2) or bool(g1) == bool(g2):  # type: ignore[arg-type]
            continue
        sides = {}
        for group in (1, 2):
            label = by_key[(cid, final_stage[(cid, group)], group)]
            sides[group] = Side(bool(label.met), label.note)
        first, second = (1, 2) if a_is_group1(user.id, response_id, cid) else (2, 1)
        decision = by_key.get((cid, Stage.adjudication, NO_GROUP))
        cells.append(
            AdjudicationCell(
                criterion.id,
                criterion.position,
                cid,
                criterion.text,
                sides[first],
                sides[second],
                label_view(session, decision) if decision else None,
                cid in unresolved,
            )
        )
    return AdjudicationView(response.id, response.code, response.text, CaseText.of(case), cells)


def adjudicate(
    session: Session,
    user: User,
    *,
    response_id: int,
    criterion_id: str,
    met: bool,
    rationale: str,
    seen_lock_version: int | None = None,
) -> LabelView:
    """Decides one disputed cell: the decision is the gold label (source "adjudicated")."""
    decision = AdjudicationInput(criterion_id, met, rationale, seen_lock_version)
    response = _write_decisions(session, user, response_id, [decision])
    label = session.execute(
        select(Label)
        .where(
            col(Label.response_id) == response.id,
            col(Label.criterion_id) == criterion_id,
            col(Label.stage) == Stage.adjudication,
        )
        .execution_options(populate_existing=True)
    ).scalar_one()
    return label_view(session, label)


def _decision_wanted(session: Session, case: Case, response_id: int, decision: AdjudicationInput) -> Wanted:
    """The decision on one cell, when the two groups' final labels on it disagree (the caller opened the response
    for good first: this refusal tells whether the groups agree on the cell)."""
    criterion_id = decision.criterion_id
    rationale = clean_note(decision.rationale, "rationale", required=True, criterion=criterion_id)
    frame = pd.DataFrame(
        session.execute(
            select(
                col(Label.response_id), col(Label.criterion_id), col(Label.stage), col(Label.group_no), col(Label.met)
            ).where(
                col(Label.response_id) == response_id,
                col(Label.criterion_id) == criterion_id,
                counts_sql(col(Label.rubric_version_id), case_pks=[case.id]),
            )
        ).all(),
        columns=gold.LABEL_COLUMNS,
    )
    finals = gold.decisions_with_finals(frame)
    if (
        finals.empty
        or finals["group1"].isna().any()
        or finals["group2"].isna().any()
        or bool(finals["group1"].iloc[0]) == bool(finals["group2"].iloc[0])
    ):
        raise ValidationFailed(
            f"criterion {criterion_id}: the two groups do not disagree here",
            key="errors.no_disagreement",
            params={"criterion": criterion_id},
        )
    return Wanted(criterion_id, bool(decision.met), rationale, decision.seen_lock_version or 0)


@dataclass(frozen=True)
class AdjudicationInput:
    criterion_id: str
    met: bool
    rationale: str
    seen_lock_version: int | None = None  # of the decision the page showed; None when there was none


def adjudicate_many(session: Session, user: User, *, response_id: int, decisions: list[AdjudicationInput]) -> int:
    """Saves several cells of one response in one transaction (all or nothing); returns how many."""
    if decisions:
        _write_decisions(session, user, response_id, decisions)
    return len(decisions)


def _write_decisions(session: Session, user: User, response_id: int, decisions: list[AdjudicationInput]) -> Response:
    """Checks each decision and writes them in one save; returns the response. The response's opening is committed
    before any label is read (`_open_for_good`), so a refusal leaves the checker's own labels on it closed to them."""
    wanted = []
    for decision in decisions:
        _open_for_good(session, user, response_id)
        response, case = _response_and_case(session, response_id)
        wanted.append(_decision_wanted(session, case, response_id, decision))
    place = Place(response, case.case_id, NO_GROUP, current_rubric_version_id(session, case.id))
    write(session, user, ADJUDICATION, place, wanted)
    return response
