"""What the checker's three workflows share: note limits, the case text, current criteria."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlmodel import Session, col

from db.rules.errors import NotFound
from db.store.current_rubric import current_approved_version, current_versions
from db.store.models import Case, Criterion, Response, User

#: Salt of the A/B order in adjudication; changing it reshuffles every cell.
AB_ORDER_SALT = "clinconsensus-ab-v1"


# Shared helpers ------------------------------------------------------------------------------


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
    return current_versions().subquery()


def _criteria(session: Session, rubric_version_id: int | None) -> list[Criterion]:
    if rubric_version_id is None:
        return []
    return list(
        session.execute(
            select(Criterion)
            .where(col(Criterion.rubric_version_id) == rubric_version_id)
            .order_by(col(Criterion.position))
        ).scalars()
    )


def _response_and_case(session: Session, response_id: int) -> tuple[Response, Case]:
    response = session.get(Response, response_id)
    if response is None:
        raise NotFound(f"no response {response_id}", key="errors.response_unknown", params={"response": response_id})
    case = session.get(Case, response.case_pk)
    if case is None:
        raise NotFound(
            f"no case for response {response_id}", key="errors.response_no_case", params={"response": response_id}
        )
    return response, case


@dataclass(frozen=True)
class CaseText:
    """What a checker reads of a case (never a model name)."""

    case_id: str
    difficulty: str
    user_role: str
    clinical_context: str
    user_request: str

    @classmethod
    def of(cls, case: Case) -> CaseText:
        return cls(case.case_id, case.difficulty, case.user_role, case.clinical_context, case.user_request)
