"""One judge decision beside the physicians' labels on it, for the admin's browser of judge errors.

Admin only: it names the model and shows both groups' labels together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select
from sqlmodel import Session, col

from db.access.policies import JudgeRunPolicy, authorize
from db.rules.errors import NotFound
from db.store.current_rubric import counts_sql, current_approved_version
from db.store.models import Case, Criterion, JudgeDecision, Label, Response, User

#: Keys of a judge decision's extra fields that hold its reasoning (the official judge writes `explanation`).
EXPLANATION_KEYS = ("explanation", "rationale", "reason", "reasoning")


@dataclass(frozen=True)
class PhysicianLabel:
    stage: str
    group_no: int
    met: bool
    note: str | None
    user: str | None


@dataclass(frozen=True)
class JudgeErrorDetail:
    case_id: str
    clinical_context: str
    user_request: str
    model: str
    response: str
    criterion_id: str
    criterion: str
    tags: list[str]
    judge: str
    judge_met: bool | None
    explanation: str | None
    labels: list[PhysicianLabel] = field(default_factory=list)


def explanation_of(extra: dict | None) -> str | None:
    """The judge's reasoning kept with a decision, if any."""
    for key in EXPLANATION_KEYS:
        value = (extra or {}).get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def judge_error_detail(
    session: Session, actor: User, *, response_id: int, criterion_id: str, judge: str
) -> JudgeErrorDetail:
    authorize(session, actor, JudgeRunPolicy.manage())
    response = session.get(Response, response_id)
    if response is None:
        raise NotFound(f"no response {response_id}", key="errors.response_unknown", params={"response": response_id})
    case = session.get(Case, response.case_pk)
    if case is None or case.id is None:
        raise NotFound(
            f"no case for response {response_id}", key="errors.response_no_case", params={"response": response_id}
        )
    rubric = current_approved_version(session, case.id)
    criterion = (
        session.execute(
            select(Criterion).where(
                col(Criterion.rubric_version_id) == rubric.id, col(Criterion.criterion_id) == criterion_id
            )
        )
        .scalars()
        .first()
        if rubric
        else None
    )
    if criterion is None:
        raise NotFound(
            f"criterion {criterion_id!r} is not in case {case.case_id}'s current rubric",
            key="errors.criterion_not_current",
            params={"criterion": criterion_id, "case_id": case.case_id},
        )
    decision = (
        session.execute(
            select(JudgeDecision).where(
                col(JudgeDecision.judge) == judge,
                col(JudgeDecision.response_id) == response_id,
                col(JudgeDecision.criterion_id) == criterion_id,
            )
        )
        .scalars()
        .first()
    )
    rows = session.execute(
        select(col(Label.stage), col(Label.group_no), col(Label.met), col(Label.note), col(User.username))
        .join(User, col(User.id) == col(Label.user_id), isouter=True)
        .where(
            col(Label.response_id) == response_id,
            col(Label.criterion_id) == criterion_id,
            counts_sql(Label.rubric_version_id, case_pks=[case.id]),  # the labels the judge was measured against
        )
        .order_by(col(Label.group_no), col(Label.stage))
    ).all()
    return JudgeErrorDetail(
        case_id=case.case_id,
        clinical_context=case.clinical_context,
        user_request=case.user_request,
        model=response.model,
        response=response.text,
        criterion_id=criterion_id,
        criterion=criterion.text,
        tags=list(criterion.tags or []),
        judge=judge,
        judge_met=decision.met if decision else None,
        explanation=explanation_of(decision.extra) if decision else None,
        labels=[PhysicianLabel(stage, group_no, bool(met), note, name) for stage, group_no, met, note, name in rows],
    )
