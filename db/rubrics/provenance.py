"""Drafted criteria on the author's side, and the provenance of submitted criteria (docs/REFERENCE.md §4.3).

A drafting run stores LLM drafts (`rubric_draft`, written by db/work/drafting.py); the newest readable
draft of a case is offered to the case's assigned author, and to nobody else (labelers never see a
draft or an origin). A version the author started from a draft names it (`rubric_version.draft_id`,
carried over to the next version after a return). When a version is submitted, each of its criteria
gets its origin (db.rules.drafting.origins) and every drafted criterion left out is recorded as
deleted; the rows go into `criterion_provenance` and into the submission's audit entry. The rubric
auditor reads them beside each criterion; the report sums them up (analysis/provenance.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete
from sqlmodel import Session, col, select

from db.access.policies import RubricPolicy, authorize
from db.rules.drafting import DELETED, WRITTEN, origins
from db.rules.enums import Role
from db.store.models import Case, CriterionProvenance, RubricDraft, RubricVersion, User


@dataclass(frozen=True)
class OfferedDraft:
    """A draft as its author sees it: the generator's name and the criteria, in the order drafted."""

    id: int
    generator: str
    criteria: list[dict]  # {"criterion": str, "tags": [str]}
    created_at: datetime
    dropped: dict[str, int] = field(default_factory=dict)

    def texts(self) -> list[str]:
        return [item["criterion"] for item in self.criteria]


@dataclass(frozen=True)
class CriterionOrigin:
    """One criterion's origin as the rubric auditor sees it (deleted drafts have no criterion_id)."""

    criterion_id: str | None
    origin: str
    generator: str | None
    drafted_text: str | None
    edit_distance: int | None


def _offered(draft: RubricDraft) -> OfferedDraft:
    return OfferedDraft(draft.id, draft.generator, list(draft.criteria or []), draft.created_at, dict(draft.dropped))


def newest_draft(session: Session, case_pk: int) -> OfferedDraft | None:
    """The case's newest draft holding at least one criterion (no access check: callers have made theirs)."""
    draft = session.exec(
        select(RubricDraft)
        .where(col(RubricDraft.case_pk) == case_pk, col(RubricDraft.parse_ok).is_(True))
        .order_by(col(RubricDraft.id).desc())
    ).first()
    while draft is not None and not draft.criteria:
        draft = session.exec(
            select(RubricDraft)
            .where(
                col(RubricDraft.case_pk) == case_pk, col(RubricDraft.parse_ok).is_(True), col(RubricDraft.id) < draft.id
            )
            .order_by(col(RubricDraft.id).desc())
        ).first()
    return _offered(draft) if draft is not None else None


def draft_of_version(session: Session, version: RubricVersion) -> RubricDraft | None:
    return session.get(RubricDraft, version.draft_id) if version.draft_id is not None else None


def record_provenance(session: Session, version: RubricVersion, texts: list[tuple[str, str]]) -> list[dict]:
    """Write the origins of a version's criteria ((criterion_id, text) in order) at its submission.

    Returns the rows as the audit entry keeps them. A version started from no draft records every
    criterion as written."""
    session.execute(delete(CriterionProvenance).where(col(CriterionProvenance.rubric_version_id) == version.id))
    draft = draft_of_version(session, version)
    drafted = [item["criterion"] for item in (draft.criteria if draft else [])]
    generator = draft.generator if draft else None
    rows: list[dict[str, Any]] = []
    for found in origins([text for _cid, text in texts], drafted):
        rows.append(
            {
                "criterion_id": texts[found.row][0] if found.row is not None else None,
                "origin": found.origin,
                "generator": generator if found.origin != WRITTEN else None,
                "drafted_text": drafted[found.draft] if found.draft is not None else None,
                "edit_distance": found.distance if found.origin != DELETED else None,
            }
        )
    session.add_all(
        [
            CriterionProvenance(
                rubric_version_id=version.id,
                criterion_id=row["criterion_id"],
                origin=row["origin"],
                draft_id=draft.id if draft is not None and row["generator"] else None,
                generator=row["generator"],
                drafted_text=row["drafted_text"],
                edit_distance=row["edit_distance"],
            )
            for row in rows
        ]
    )
    session.flush()
    return rows


def provenance_of(session: Session, rubric_version_id: int) -> list[CriterionOrigin]:
    """The stored origins of a version (no access check: the rubric audit and the author's page check theirs)."""
    rows = session.exec(
        select(CriterionProvenance)
        .where(col(CriterionProvenance.rubric_version_id) == rubric_version_id)
        .order_by(col(CriterionProvenance.id))
    ).all()
    return [CriterionOrigin(r.criterion_id, r.origin, r.generator, r.drafted_text, r.edit_distance) for r in rows]


def version_provenance(session: Session, user: User, rubric_version_id: int) -> list[CriterionOrigin]:
    """A version's origins for a rubric auditor (checker) or an admin; nobody else."""
    if user.role != Role.admin:
        authorize(session, user, RubricPolicy.audit())
    return provenance_of(session, rubric_version_id)


@dataclass(frozen=True)
class ProvenanceRow:
    """One origin of the newest submitted or approved version of a drafted case, for the report."""

    case_id: str
    subject_labels: list[str]
    author: str
    generator: str
    origin: str
    edit_distance: int | None


def provenance_rows(session: Session) -> list[ProvenanceRow]:
    """Every origin of each drafted case's newest submitted or approved version (returned ones are superseded)."""
    versions = session.exec(
        select(RubricVersion)
        .where(col(RubricVersion.draft_id).is_not(None), col(RubricVersion.status).in_(("submitted", "approved")))
        .order_by(col(RubricVersion.case_pk), col(RubricVersion.version).desc())
    ).all()
    newest: dict[int, RubricVersion] = {}
    for version in versions:
        newest.setdefault(version.case_pk, version)
    if not newest:
        return []
    cases = {case.id: case for case in session.exec(select(Case).where(col(Case.id).in_(list(newest))))}
    authors = {
        user.id: user.username
        for user in session.exec(
            select(User).where(col(User.id).in_([v.author_id for v in newest.values() if v.author_id]))
        )
    }
    generators = {
        draft.id: draft.generator
        for draft in session.exec(
            select(RubricDraft).where(col(RubricDraft.id).in_([v.draft_id for v in newest.values()]))
        )
    }
    by_version = {version.id: version for version in newest.values()}
    result = []
    for row in session.exec(
        select(CriterionProvenance)
        .where(col(CriterionProvenance.rubric_version_id).in_(list(by_version)))
        .order_by(col(CriterionProvenance.id))
    ):
        version = by_version[row.rubric_version_id]
        case = cases[version.case_pk]
        result.append(
            ProvenanceRow(
                case.case_id,
                list(case.subject_labels or []),
                authors.get(version.author_id or -1, ""),
                generators.get(version.draft_id or -1, ""),
                row.origin,
                row.edit_distance,
            )
        )
    return result
