"""Feedback after a labeling round: where gold differed from an annotator's own label.

A **round** is the label assignments one assignment run handed out: `db.work.assignments.assign_labeling`
stamps every assignment it creates with the same `created_at`, so that timestamp names the round
(docs/REFERENCE.md §1.1). Rules, enforced here for every page:

- feedback is off by default; only an admin opens or closes it, one round at a time, and each
  opening and closing is an audit entry;
- a round opens only when its labeling is finished: every label assignment of it has its group's
  annotation label on every criterion of the case's current rubric. Feedback while the other group
  still labels the same responses would make the groups less independent; an unfinished round is
  refused (`RoundUnfinished`) and nothing changes; so is a round sharing a case with a round whose
  labeling is unfinished (`RoundSharesCase`): one case's responses can be split over rounds, and
  the case's gold must not be shown while the other round still labels it;
- an annotator sees only their own annotation labels, on responses of their own group's
  assignments in open rounds, next to final gold (`db.rules.gold`, docs/REFERENCE.md §4.1) where the
  two differ, with the adjudicator's rationale when gold came from adjudication. A response that is
  not final yet (provisional: one group only, an unchecked group; or open: a disagreement awaiting
  adjudication) is not compared; the page counts those responses instead. Responses appear under
  their code, never the model; nobody's name is shown;
- checkers and admins have no feedback view (it is the annotator's own); labels on an older
  rubric version do not count (`db.store.current_rubric`);
- feedback freezes the round (docs/REFERENCE.md §1): once a round's feedback has been opened, the
  annotation labels of its responses are final for the groups it assigned them to. The annotator's
  save and the keeping of a draft are refused (`db.access.policies.LabelsFinal`; the rule's SQL is in
  db/labeling/freeze.py, which db/labeling/annotation.py reads without importing this module's work), so gold never
  flows back into a physician's own labels. Closing the feedback again does not reopen them: gold
  has been seen, and a round counts as opened from its first opening on (a `feedback_round` row
  exists only from then on). A later rubric change does not reopen them either: the labels made on
  the older version stop counting, and that group's decisions on the response are left to the
  other group and adjudication. Checkers' check labels are not annotation labels and keep their rules.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime

import pandas as pd
from sqlalchemy import (
    func,
    select as sa_select,  # six columns: more than sqlmodel's typed select takes
)
from sqlmodel import Session, col, select

from db import counts
from db.access.audit import record
from db.access.audit_records import round_key
from db.access.policies import FeedbackPolicy, SystemActor, authorize, current_user
from db.rubrics.authoring import CaseView, case_view
from db.rules import gold as gold_rule
from db.rules.enums import AssignmentKind, Stage
from db.rules.errors import NotFound, ValidationFailed
from db.store.current_rubric import counts_on_current_rubric, current_rubric_sizes, current_version_ids
from db.store.models import Assignment, Case, Criterion, FeedbackRound, Label, Response, User, utcnow
from db.work.assignments import current_label_counts

AUDIT_ENTITY = "feedback"


class RoundUnfinished(ValidationFailed):
    """Feedback of a round whose labeling is not finished was asked for; `done` of `total` assignments are."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(
            f"feedback: labeling of this round is not finished ({done} of {total} assignments done); "
            "feedback during labeling would make the groups less independent",
            key="errors.feedback_round_unfinished",
            params={"done": done, "total": total},
        )
        self.done = done
        self.total = total


class RoundSharesCase(ValidationFailed):
    """Opening a round was asked for while another round with a response of the same case still labels."""

    def __init__(self, cases: int, rounds: int) -> None:
        super().__init__(
            f"feedback: {rounds} unfinished round(s) still label responses of {cases} case(s) of this round; "
            "feedback now would show gold of a case the other round still labels",
            key="errors.feedback_round_shares_case",
            params={"cases": cases, "rounds": rounds},
        )
        self.cases = cases
        self.rounds = rounds


@dataclass(frozen=True)
class RoundState:
    """One labeling round as the admin's control shows it."""

    round_at: datetime
    number: int  # 1 for the oldest round
    assigned_by: str | None
    assignments: int
    done: int
    responses: int
    annotators: int
    is_open: bool
    changed_at: datetime | None
    changed_by: str | None

    @property
    def finished(self) -> bool:
        return self.assignments > 0 and self.done >= self.assignments

    @property
    def done_share(self) -> float:
        return self.done / self.assignments if self.assignments else 0.0


@dataclass(frozen=True)
class FeedbackDecision:
    """One criterion on which gold differs from the annotator's own label."""

    position: int
    criterion_id: str
    criterion_text: str
    my_met: bool
    gold_met: bool
    gold_source: str  # db.rules.gold: adjudicated | agreement | single
    rationale: str | None  # the adjudicator's note, only when gold came from adjudication


@dataclass(frozen=True)
class FeedbackResponse:
    """A response of an open round (under its code) and the decisions where gold differed."""

    code: str
    text: str
    case: CaseView
    round_at: datetime
    decisions: list[FeedbackDecision]


@dataclass(frozen=True)
class AnnotatorFeedback:
    open_rounds: int  # open rounds in which the annotator's group has assignments
    compared: int  # the annotator's counted labels on final responses
    differing: int  # of those, where final gold differs from their label
    awaiting_gold: int  # the annotator's counted labels on responses that are not final yet
    responses: list[FeedbackResponse]  # the requested page of them (all, when no page size was given)
    total_responses: int  # responses with a decision where final gold differs, on every page
    provisional_responses: int = 0  # the annotator's responses with gold on every decision, not final yet
    open_responses: int = 0  # the annotator's responses not final with a disagreement nobody adjudicated yet

    @property
    def agreement(self) -> float | None:
        return (self.compared - self.differing) / self.compared if self.compared else None


# Rounds (admin) ------------------------------------------------------------------------------


def _round_rows(session: Session, round_at: datetime | None = None) -> list[tuple]:
    """(created_at, created_by, user_id, group_no, case_pk, response_id) of label assignments (of one round)."""
    statement = sa_select(
        col(Assignment.created_at),
        col(Assignment.created_by),
        col(Assignment.user_id),
        col(Assignment.group_no),
        col(Assignment.case_pk),
        col(Assignment.response_id),
    ).where(col(Assignment.kind) == AssignmentKind.label)
    if round_at is not None:
        statement = statement.where(col(Assignment.created_at) == round_at)
    return [tuple(row) for row in session.execute(statement).all()]


def _done_flags(session: Session, rows: list[tuple]) -> list[bool]:
    """Per label assignment row: done when its group labeled every criterion of the current rubric
    (the rule of db.work.progress and the labeling queue; older-version labels do not count)."""
    case_pks = {row[4] for row in rows}
    sizes = current_rubric_sizes(session, case_pks)
    versions = current_version_ids(session, case_pks)
    current = {row[5]: versions[row[4]] for row in rows if row[4] in versions}
    labeled = {g: current_label_counts(session, [r[5] for r in rows if r[3] == g], g, current) for g in (1, 2)}
    flags = []
    for row in rows:
        need = sizes.get(row[4], 0)
        have = labeled.get(row[3], {}).get(row[5], 0)
        flags.append(bool(need) and have >= need)
    return flags


def round_states(session: Session, *, actor: User | SystemActor) -> list[RoundState]:
    """Every labeling round, oldest first, with how far its labeling is and whether feedback is open."""
    authorize(session, actor, FeedbackPolicy.manage())
    rows = _round_rows(session)
    flags = _done_flags(session, rows)
    by_round: dict[datetime, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        by_round[row[0]].append(index)
    names = dict(session.exec(select(User.id, User.username)).all())
    switches = {r.round_at: r for r in session.exec(select(FeedbackRound)).all()}
    states = []
    for number, round_at in enumerate(sorted(by_round), start=1):
        indices = by_round[round_at]
        creators = {rows[i][1] for i in indices}
        switch = switches.get(round_at)
        states.append(
            RoundState(
                round_at=round_at,
                number=number,
                assigned_by=names.get(next(iter(creators))) if len(creators) == 1 else None,
                assignments=len(indices),
                done=sum(flags[i] for i in indices),
                responses=len({rows[i][5] for i in indices}),
                annotators=len({rows[i][2] for i in indices}),
                is_open=bool(switch and switch.is_open),
                changed_at=switch.changed_at if switch else None,
                changed_by=switch.changed_by if switch else None,
            )
        )
    return states


def _refuse_shared_unfinished(session: Session, round_at: datetime, case_pks: set[int]) -> None:
    """Refuses (`RoundSharesCase`) when another round with a response of one of `case_pks` is unfinished."""
    others = [row for row in _round_rows(session) if row[0] != round_at]
    sharing = {row[0] for row in others if row[4] in case_pks}
    rows = [row for row in others if row[0] in sharing]
    if not rows:
        return
    unfinished = {row[0] for row, done in zip(rows, _done_flags(session, rows)) if not done}
    if unfinished:
        shared = {row[4] for row in rows if row[0] in unfinished and row[4] in case_pks}
        raise RoundSharesCase(len(shared), len(unfinished))


def set_feedback_open(session: Session, *, actor: User | SystemActor, round_at: datetime, is_open: bool) -> RoundState:
    """Open (or close) the feedback of the round `round_at`; opening an unfinished round is refused.

    Opening an open round or closing a closed one changes nothing and writes no audit entry.
    """
    actor = authorize(session, actor, FeedbackPolicy.manage())
    rows = _round_rows(session, round_at)
    if not rows:
        raise NotFound("feedback: no labeling round was handed out at that time", key="errors.feedback_no_round")
    key = rows[0][0]  # the round's time as the database returns it (what `round_states` keys on)
    if is_open:
        flags = _done_flags(session, rows)
        if not all(flags):
            raise RoundUnfinished(sum(flags), len(flags))
        _refuse_shared_unfinished(session, key, {row[4] for row in rows})
    switch = session.exec(select(FeedbackRound).where(FeedbackRound.round_at == key)).first()
    was_open = bool(switch and switch.is_open)
    if was_open != is_open:
        if switch is None:
            switch = FeedbackRound(round_at=key, changed_by=actor.username)
        switch.is_open = is_open
        switch.changed_at = utcnow()
        switch.changed_by = actor.username
        session.add(switch)
        session.flush()
        record(
            session,
            actor.username,
            action="open" if is_open else "close",
            entity=AUDIT_ENTITY,
            entity_key=round_key(key),
            before={"open": was_open},
            after={"open": is_open, "assignments": len(rows)},
        )
    (state,) = [s for s in round_states(session, actor=actor) if s.round_at == key]
    return state


# The annotator's feedback --------------------------------------------------------------------


def _require_annotator(session: Session, user: User) -> User:
    fresh = current_user(session, user)  # the group as the database says now
    return authorize(session, fresh, FeedbackPolicy.receive(group_no=fresh.group_no))


def open_round_count(session: Session, user: User) -> int:
    """Open rounds in which the annotator's group has label assignments (0: nothing to show yet).

    Read from the few rounds, each asking the round index whether the group has an assignment in it: read
    from the assignments, the count went through every label assignment of the group, which grows with the
    data while the annotator's own work does not."""
    user = _require_annotator(session, user)
    group_has_one = (
        sa_select(col(Assignment.id))
        .where(
            col(Assignment.created_at) == col(FeedbackRound.round_at),
            col(Assignment.kind) == AssignmentKind.label,
            col(Assignment.group_no) == user.group_no,
        )
        .exists()
    )
    return int(
        session.execute(
            sa_select(func.count()).select_from(FeedbackRound).where(col(FeedbackRound.is_open) == True, group_has_one)  # noqa: E712
        ).scalar_one()
    )


def _in_open_round(user: User, response_id):
    """SQL: `response_id` has a label assignment of the user's group in an open round.

    A condition on each of the annotator's rows, not `response_id IN (every such response)`: SQLite
    otherwise probes the label tally once per such response of the group and current rubric version
    (both lists grow with the data, so the feedback page grew with their product)."""
    return (
        sa_select(col(Assignment.response_id))
        .join(FeedbackRound, col(FeedbackRound.round_at) == col(Assignment.created_at))
        .where(
            col(Assignment.response_id) == response_id,
            col(FeedbackRound.is_open) == True,  # noqa: E712
            col(Assignment.kind) == AssignmentKind.label,
            col(Assignment.group_no) == user.group_no,
        )
        .exists()
    )


def my_feedback(session: Session, user: User, *, page: int = 0, page_size: int | None = None) -> AnnotatorFeedback:
    """The annotator's own labels in open rounds compared with final gold; the decisions where they differ.

    The figures count every such label: those on final responses are compared, those on responses that are
    not final yet wait (`awaiting_gold`), and those responses are counted as provisional or open (a
    disagreement nobody adjudicated yet, from the kept status). `responses` holds the responses with a
    differing decision in (case id, response code) order, all of them or, with `page_size`, page `page` (from 0)
    of them.
    The figures and the list of responses come from the label tally (db.counts keeps, per annotator and
    response, the labels that count on the current rubric, those where gold differs and those without
    gold); gold of the listed decisions is computed (db.rules.gold) from the labels of those responses only.
    """
    open_rounds = open_round_count(session, user)  # checks the role
    if page < 0 or (page_size is not None and page_size < 1):
        raise ValidationFailed(f"feedback: page {page} of size {page_size} does not exist", key="errors.feedback_page")
    if not open_rounds:
        return AnnotatorFeedback(0, 0, 0, 0, [], 0)
    tally = counts.feedback_tally(user_id=int(user.id or 0), group_no=int(user.group_no or 0))
    counted = (
        sa_select(
            tally.c.response_id,
            col(Response.code),
            col(Case.case_id),
            tally.c.n,
            tally.c.n_gold_differs,
            tally.c.n_no_gold,
            tally.c.n_unresolved,
        )
        .join(Response, col(Response.id) == tally.c.response_id)
        .join(Case, col(Case.id) == col(Response.case_pk))
        .where(
            _in_open_round(user, tally.c.response_id),
            tally.c.counting,  # kept on the tally row: whether its labels count on the current rubric
        )
        .subquery("counted")
    )
    n_mine = differing = awaiting = 0
    listed: set[tuple[str, str, int]] = set()  # (case id, response code, response id) with a differing decision
    waiting: dict[int, bool] = {}  # responses not final yet → whether a disagreement awaits adjudication
    for response_id, code, case_id, n, n_differs, n_no_gold, n_unresolved in session.execute(sa_select(counted)).all():
        n_mine, differing, awaiting = n_mine + int(n), differing + int(n_differs), awaiting + int(n_no_gold)
        if n_differs:
            listed.add((str(case_id), str(code), int(response_id)))
        if n_no_gold:
            waiting[int(response_id)] = waiting.get(int(response_id), False) or int(n_unresolved) > 0
    ordered = sorted(listed)
    if page_size is not None:
        ordered = ordered[page * page_size : (page + 1) * page_size]
    order = [rid for _, _, rid in ordered]
    decisions, decision_responses = _page_decisions(session, user, order)
    return AnnotatorFeedback(
        open_rounds=open_rounds,
        compared=n_mine - awaiting,
        differing=differing,
        awaiting_gold=awaiting,
        responses=_responses(
            session,
            user,
            current_version_ids(
                session,
                set(session.execute(sa_select(col(Response.case_pk)).where(col(Response.id).in_(order))).scalars()),
            )
            if order
            else {},
            decisions,
            decision_responses,
            order,
        ),
        total_responses=len(listed),
        provisional_responses=sum(not unresolved for unresolved in waiting.values()),
        open_responses=sum(waiting.values()),
    )


def _page_decisions(session: Session, user: User, response_ids: list[int]) -> tuple[list[FeedbackDecision], list[int]]:
    """The decisions of `response_ids` where final gold (db.rules.gold, from the labels that count on the current
    rubric) differs from the user's own annotation label, and the response of each; positions and texts come later.
    Decisions of responses that are not final are left out, as the kept figures leave them out."""
    if not response_ids:
        return [], []
    case_of = dict(
        session.execute(
            sa_select(col(Response.id), col(Response.case_pk)).where(col(Response.id).in_(response_ids))
        ).all()
    )
    versions = current_version_ids(session, set(case_of.values()))
    sizes = current_rubric_sizes(session, set(case_of.values()))
    rows = [
        row
        for row in session.execute(
            sa_select(
                col(Label.response_id),
                col(Label.criterion_id),
                col(Label.stage),
                col(Label.group_no),
                col(Label.met),
                col(Label.user_id),
                col(Label.rubric_version_id),
                col(Label.note),
            ).where(col(Label.response_id).in_(response_ids))
        ).all()
        if counts_on_current_rubric(row[6], versions.get(case_of[row[0]]))
    ]
    if not rows:
        return [], []
    frame = pd.DataFrame([row[:5] for row in rows], columns=gold_rule.LABEL_COLUMNS)
    frame["met"] = frame["met"].astype(bool)
    frame["stage"] = frame["stage"].astype(str)
    finals = gold_rule.decisions_with_finals(frame)
    labeled = sorted(set(frame["response_id"].tolist()))
    n_of = pd.Series([sizes.get(case_of[rid], 0) for rid in labeled], index=labeled, dtype="int64")
    states = gold_rule.gold_states(frame, n_of, finals)
    final = set(states.loc[states["final"], "response_id"].tolist())
    found = gold_rule.gold_from_decisions(finals)
    gold = {
        (int(r), str(c)): (bool(m), str(source))
        for r, c, m, source in zip(
            found["response_id"].tolist(),
            found["criterion_id"].tolist(),
            found["met"].tolist(),
            found["source"].tolist(),
        )
        if int(r) in final
    }
    rationale = {(int(r[0]), str(r[1])): r[7] for r in rows if r[2] == Stage.adjudication}
    decisions, owners = [], []
    for response_id, criterion_id, stage, group_no, met, user_id, _version, _note in sorted(
        rows, key=lambda r: (r[0], r[1])
    ):
        if user_id != user.id or stage != Stage.annotation or group_no != user.group_no:
            continue
        key = (int(response_id), str(criterion_id))
        if key not in gold or gold[key][0] == bool(met):
            continue
        gold_met, source = gold[key]
        decisions.append(
            FeedbackDecision(
                position=0,
                criterion_id=str(criterion_id),
                criterion_text="",
                my_met=bool(met),
                gold_met=gold_met,
                gold_source=source,
                rationale=rationale.get(key) if source == gold_rule.ADJUDICATED else None,
            )
        )
        owners.append(int(response_id))
    return decisions, owners


def _responses(
    session: Session,
    user: User,
    versions: dict[int, int],
    decisions: list[FeedbackDecision],
    decision_responses: list[int],
    order: list[int],
) -> list[FeedbackResponse]:
    """The responses `order` (in that order) with their `decisions` (one response id per decision), texts filled in."""
    if not order:
        return []
    responses = {
        row[0]: row
        for row in session.execute(
            sa_select(col(Response.id), col(Response.case_pk), col(Response.code), col(Response.text)).where(
                col(Response.id).in_(order)
            )
        ).all()
    }
    current = {rid: versions[row[1]] for rid, row in responses.items()}
    wanted = sorted({(current[rid], d.criterion_id) for rid, d in zip(decision_responses, decisions)})
    criteria: dict[tuple[int, str], tuple[int, str]] = {}  # (version, criterion_id) → (position, text)
    for version_id, criterion_id, position, text in session.execute(
        sa_select(
            col(Criterion.rubric_version_id), col(Criterion.criterion_id), col(Criterion.position), col(Criterion.text)
        ).where(
            col(Criterion.rubric_version_id).in_(sorted(set(current.values()))),
            col(Criterion.criterion_id).in_(sorted({criterion for _, criterion in wanted})),
        )
    ).all():
        criteria[(version_id, criterion_id)] = (position, text)
    rounds_of = dict(
        session.execute(
            sa_select(col(Assignment.response_id), col(Assignment.created_at))
            .join(FeedbackRound, col(FeedbackRound.round_at) == col(Assignment.created_at))
            .where(
                col(FeedbackRound.is_open) == True,  # noqa: E712
                col(Assignment.kind) == AssignmentKind.label,
                col(Assignment.group_no) == user.group_no,
                col(Assignment.response_id).in_(order),
            )
        ).all()
    )
    cases = {
        int(case.id or 0): case
        for case in session.exec(select(Case).where(col(Case.id).in_(sorted({row[1] for row in responses.values()}))))
    }
    by_response: dict[int, list[FeedbackDecision]] = defaultdict(list)
    for response_id, decision in zip(decision_responses, decisions):
        found = criteria.get((current[response_id], decision.criterion_id))
        by_response[response_id].append(
            replace(decision, position=found[0] if found else 0, criterion_text=found[1] if found else "")
        )
    return [
        FeedbackResponse(
            code=responses[rid][2],
            text=responses[rid][3],
            case=case_view(cases[responses[rid][1]]),
            round_at=rounds_of[rid],
            decisions=sorted(by_response[rid], key=lambda d: (d.position, d.criterion_id)),
        )
        for rid in order
    ]
