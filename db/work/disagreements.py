"""Where two judges disagree: responses for physicians on which judges A and B differ on the most criteria.

`draw_disagreements` (docs/REFERENCE.md §3.7, `assign disagreements`) takes the responses that are

- on a case with an approved rubric, graded by both judges on all N criteria of that (current) rubric;
- not complete: not all N decisions have gold (docs/REFERENCE.md §4; `n_gold` of the kept figures,
  counted from the labels that count by db.rules.gold's rules);
- in no calibration sample (those never become training data, db.work.calibration) and not drawn before
  (a second draw takes the next responses instead of handing out the same ones again);
- graded differently by the two judges on at least one criterion,

ranks them by the number of criteria on which the judges differ, most first, ties by case id and then
model name (an order that depends neither on import order nor on ids), takes the first `n`, gives each
one annotator of each expert group like any labeling work (`db.work.assignments.assign_labeling`, which also
writes the assignments' audit entries) and records them in `disagreement_draw`: their physicians' labels
are the judge's next training data, and `export sft --only-disagreements` keeps exactly them. One audit
entry names the judges and the responses drawn. The judges' and models' names stay with admins: the
assignments carry response codes only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import and_, case, func, select as select_columns
from sqlmodel import Session, col, select

from db.access.audit import record
from db.access.policies import CalibrationPolicy, SystemActor, authorize
from db.rules.errors import NotFound, ValidationFailed
from db.store.current_rubric import current_rubric_sizes, current_versions
from db.store.models import (
    CalibrationSample,
    Case,
    Criterion,
    DisagreementDraw,
    JudgeDecision,
    Response,
    ResponseStatus,
    User,
    table_of,
    utcnow,
)
from db.work.assignments import AssignmentSummary, active_annotators, assign_labeling

DEFAULT_DRAW_SIZE = 100


@dataclass(frozen=True)
class Candidate:
    """A response both judges graded in full and that has no complete gold, with how much they differ."""

    response_id: int
    case_id: str
    model: str
    n_differing: int
    n_criteria: int


@dataclass
class Disagreements:
    judges: tuple[str, str]
    drawn: list[Candidate]
    assignments: AssignmentSummary = field(default_factory=AssignmentSummary)

    @property
    def response_ids(self) -> list[int]:
        return [item.response_id for item in self.drawn]

    def lines(self) -> list[str]:
        a, b = self.judges
        most = f" (most: {self.drawn[0].n_differing} of {self.drawn[0].n_criteria} criteria)" if self.drawn else ""
        return [f"drew {len(self.drawn)} responses where {a} and {b} disagree{most}", *self.assignments.lines()]


def check_judges(session: Session, judges: Sequence[str]) -> tuple[str, str]:
    """The two judges named, each with decisions in the database; refused with the reason otherwise."""
    names = [name.strip() for name in judges]
    if len(names) != 2 or not all(names):
        raise ValidationFailed("--judges: give two judge names, as A,B", key="errors.disagreement_judges")
    if names[0] == names[1]:
        raise ValidationFailed(
            f"--judges: {names[0]!r} named twice; give two different judges",
            key="errors.disagreement_same_judge",
            params={"judge": names[0]},
        )
    for name in names:
        if session.exec(select(JudgeDecision.id).where(JudgeDecision.judge == name).limit(1)).first() is None:
            if session.exec(select(Response.id).where(Response.model == name).limit(1)).first() is not None:
                raise ValidationFailed(
                    f"--judges: {name!r} is a model with responses, not a judge",
                    key="errors.disagreement_model_not_judge",
                    params={"judge": name},
                )
            raise NotFound(
                f"--judges: no decisions of a judge {name!r}", key="errors.judge_unknown", params={"judge": name}
            )
    return names[0], names[1]


def ranked_candidates(session: Session, judge_a: str, judge_b: str) -> list[Candidate]:
    """Every response the two judges could be drawn on, in the order of the draw (the module's rules)."""
    current = current_versions().subquery()
    a, b = table_of(JudgeDecision).alias("a"), table_of(JudgeDecision).alias("b")
    rows = session.execute(
        select_columns(
            col(Response.id),
            col(Response.case_pk),
            col(Case.case_id),
            col(Response.model),
            func.count(),
            func.sum(case((a.c.met != b.c.met, 1), else_=0)),
        )
        .join(Case, col(Case.id) == col(Response.case_pk))
        .join(current, current.c.case_pk == Response.case_pk)
        .join(Criterion, col(Criterion.rubric_version_id) == current.c.rubric_version_id)
        .join(a, and_(a.c.response_id == Response.id, a.c.criterion_id == Criterion.criterion_id, a.c.judge == judge_a))
        .join(b, and_(b.c.response_id == Response.id, b.c.criterion_id == Criterion.criterion_id, b.c.judge == judge_b))
        .group_by(col(Response.id), col(Response.case_pk), col(Case.case_id), col(Response.model))
    ).all()
    sizes = current_rubric_sizes(session, {case_pk for _, case_pk, *_ in rows})
    gold = dict(session.exec(select(ResponseStatus.response_id, ResponseStatus.n_gold)).all())
    left_out = set(session.exec(select(CalibrationSample.response_id)).all())
    left_out |= set(session.exec(select(DisagreementDraw.response_id)).all())
    found = [
        Candidate(int(response_id), case_id, model, int(differing or 0), sizes[case_pk])
        for response_id, case_pk, case_id, model, graded, differing in rows
        if graded == sizes.get(case_pk) and gold.get(response_id, 0) < graded and response_id not in left_out
    ]
    return sorted((item for item in found if item.n_differing > 0), key=lambda c: (-c.n_differing, c.case_id, c.model))


def draw_disagreements(
    session: Session, *, actor: User | SystemActor, judges: Sequence[str], n: int = DEFAULT_DRAW_SIZE
) -> Disagreements:
    """Draw, assign and record the `n` responses where `judges` disagree most (the caller commits)."""
    actor = authorize(session, actor, CalibrationPolicy.manage())
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValidationFailed(f"--n must be a whole number of at least 1, got {n!r}", key="errors.sample_size")
    judge_a, judge_b = check_judges(session, judges)
    drawn = ranked_candidates(session, judge_a, judge_b)[:n]
    if not drawn:
        raise ValidationFailed(
            f"no response without gold on which {judge_a} and {judge_b} differ (graded by both on every criterion)",
            key="errors.disagreement_none",
            params={"judge_a": judge_a, "judge_b": judge_b},
        )
    response_ids = [item.response_id for item in drawn]
    annotators = [user.username for user in active_annotators(session)]
    summary = assign_labeling(session, actor=actor, annotators=annotators, response_ids=response_ids)
    now = utcnow()
    session.add_all(
        DisagreementDraw(
            response_id=item.response_id,
            judge_a=judge_a,
            judge_b=judge_b,
            n_differing=item.n_differing,
            drawn_at=now,
            drawn_by=actor.username,
        )
        for item in drawn
    )
    codes = dict(
        session.exec(select(col(Response.id), col(Response.code)).where(col(Response.id).in_(response_ids))).all()
    )
    record(
        session,
        actor.username,
        action="create",
        entity="disagreement_draw",
        entity_key=f"{judge_a},{judge_b}"[:255],
        before=None,
        after={
            "judges": [judge_a, judge_b],
            "n": n,
            "responses": [codes[item.response_id] for item in drawn],
            "differing": [item.n_differing for item in drawn],
        },
    )
    session.flush()
    return Disagreements(judges=(judge_a, judge_b), drawn=drawn, assignments=summary)


def drawn_counts(session: Session, *, actor: User | SystemActor) -> dict[tuple[str, str], int]:
    """(judge A, judge B) → responses drawn where they disagree, for every pair drawn so far (admins only)."""
    authorize(session, actor, CalibrationPolicy.manage())
    rows = session.exec(
        select(DisagreementDraw.judge_a, DisagreementDraw.judge_b, func.count())
        .group_by(DisagreementDraw.judge_a, DisagreementDraw.judge_b)
        .order_by(DisagreementDraw.judge_a, DisagreementDraw.judge_b)
    ).all()
    return {(a, b): int(count) for a, b, count in rows}
