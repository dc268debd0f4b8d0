"""The current rubric of a case, and which labels count against it: each rule written once.

- A case's **current rubric** is its newest *approved* version. Responses are labeled against it,
  checks and adjudication show its criteria, imported labels and judge decisions must name one of
  its criteria, and the analysis reads only its criteria.
- A label **counts** when it was made on the current rubric, or when no version was recorded with
  it (labels imported as files). A label made on an older version is *stale*: it stays readable,
  but it does not count towards a response's progress and the response waits for re-labeling.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, select
from sqlalchemy.engine import Connection
from sqlmodel import Session

from db.models import RubricStatus, RubricVersion

#: Ids per `IN (...)` list, well under SQLite's limit on bound parameters.
BATCH = 5_000


def current_versions(case_pks: Iterable[int] | None = None) -> Select:
    """(case_pk, rubric_version_id) of each case's current rubric (of `case_pks` only, when given).

    A statement: run it, or join its `.subquery()`. Cases without an approved version are absent.
    """
    newest = select(RubricVersion.case_pk, func.max(RubricVersion.version).label("version")).where(
        RubricVersion.status == RubricStatus.approved
    )
    if case_pks is not None:
        newest = newest.where(RubricVersion.case_pk.in_(list(case_pks)))
    latest = newest.group_by(RubricVersion.case_pk).subquery()
    return select(RubricVersion.case_pk, RubricVersion.id.label("rubric_version_id")).join(
        latest, and_(RubricVersion.case_pk == latest.c.case_pk, RubricVersion.version == latest.c.version)
    )


def current_version_ids(executor: Session | Connection, case_pks: Iterable[int] | None = None) -> dict[int, int]:
    """case_pk → id of its current rubric version (every case, or `case_pks`; cases without one are absent)."""
    if case_pks is None:
        return dict(executor.execute(current_versions()).all())
    pks = sorted(set(case_pks))
    found: dict[int, int] = {}
    for start in range(0, len(pks), BATCH):
        rows = executor.execute(current_versions(pks[start : start + BATCH])).all()
        found.update(dict(rows))
    return found


def current_approved_version(session: Session, case_pk: int) -> RubricVersion | None:
    """The current rubric version of one case, or None while it has no approved version.

    The same row `current_versions` names (the approved version with the highest number), read in
    one statement: every save and every opened response asks this.
    """
    return session.scalars(
        select(RubricVersion)
        .where(RubricVersion.case_pk == case_pk, RubricVersion.status == RubricStatus.approved)
        .order_by(RubricVersion.version.desc())
        .limit(1)
    ).first()


def counts_on_current_rubric(label_version_id: int | None, current_version_id: int | None) -> bool:
    """Whether a label made on `label_version_id` counts while the current version is `current_version_id`."""
    return label_version_id is None or label_version_id == current_version_id


def made_on_older_version(label_version: Any, current_version: Any) -> ColumnElement[bool]:
    """SQL form of `not counts_on_current_rubric(...)`, for two version-id columns."""
    return and_(label_version.is_not(None), label_version != current_version)
