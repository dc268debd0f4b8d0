"""The current rubric of a case, and which labels count against it: each rule written once.

- A case's **current rubric** is its newest *approved* version. Responses are labeled against it,
  checks and adjudication show its criteria, imported labels and judge decisions must name one of
  its criteria, and the analysis reads only its criteria.
- A label **counts** only when it was made on the current rubric (docs/REFERENCE.md §4, "Labels that
  count"). Every label records the version it was made on (`Label.rubric_version_id`): a save stamps
  the version the page checked, an import the version current at import, and revision 0011 stamped
  older labels with the version current when they were written. A label made on an older version
  (or, should one ever lack it, with no version) is *stale*: it stays readable and in the audit log,
  but counts nowhere — not for gold, group finals, aligned pairs, completeness, any figure, export or
  page count — and its response waits for re-labeling.

The rule has one Python form (`counts_on_current_rubric`) and one SQL form (`counts_sql`, negated by
`stale_sql`); every reader of the label table that counts or scores uses one of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, or_, select
from sqlalchemy.engine import Connection
from sqlmodel import Session, col

from db.rules.enums import RubricStatus
from db.store.models import Criterion, RubricVersion

#: Ids per `IN (...)` list, well under SQLite's limit on bound parameters.
BATCH = 5_000


def current_versions(case_pks: Iterable[int] | None = None) -> Select:
    """(case_pk, rubric_version_id) of each case's current rubric (of `case_pks` only, when given).

    A statement: run it, or join its `.subquery()`. Cases without an approved version are absent.
    """
    newest = select(col(RubricVersion.case_pk), func.max(col(RubricVersion.version)).label("version")).where(
        col(RubricVersion.status) == RubricStatus.approved
    )
    if case_pks is not None:
        newest = newest.where(col(RubricVersion.case_pk).in_(list(case_pks)))
    latest = newest.group_by(col(RubricVersion.case_pk)).subquery()
    return select(col(RubricVersion.case_pk), col(RubricVersion.id).label("rubric_version_id")).join(
        latest, and_(col(RubricVersion.case_pk) == latest.c.case_pk, col(RubricVersion.version) == latest.c.version)
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
        .where(col(RubricVersion.case_pk) == case_pk, col(RubricVersion.status) == RubricStatus.approved)
        .order_by(col(RubricVersion.version).desc())
        .limit(1)
    ).first()


def counts_on_current_rubric(label_version_id: int | None, current_version_id: int | None) -> bool:
    """Whether a label made on `label_version_id` counts while its case's current version is `current_version_id`.

    Only a label made on the current version counts; a label without a recorded version never does.
    """
    return label_version_id is not None and label_version_id == current_version_id


def counts_sql(label_version: Any, *, case_pks: Iterable[int] | None = None) -> ColumnElement[bool]:
    """SQL form of `counts_on_current_rubric` for a label's version-id column: it names a current rubric version.

    A label's version is always a version of its own response's case (saves, imports and revision 0011
    stamp it from that case), so naming *a* current version is naming its case's: no join with the
    response is needed, and the current versions are a small set (one per case). A reader of one response's
    labels names its case (`case_pks`): the set is then that case's version, where the set of every case is
    read in full on PostgreSQL and grows with the benchmark.
    """
    return label_version.in_(select(current_versions(case_pks).subquery().c.rubric_version_id))


def stale_sql(label_version: Any) -> ColumnElement[bool]:
    """SQL form of `not counts_on_current_rubric(...)` (a missing version is stale too, not unknown)."""
    return or_(label_version.is_(None), ~counts_sql(label_version))


def current_rubric_sizes(session: Session, case_pks: Iterable[int]) -> dict[int, int]:
    """case_pk → number of criteria in its newest approved rubric (cases without one are absent)."""
    versions = current_version_ids(session, case_pks)
    by_version = {version_id: case_pk for case_pk, version_id in versions.items()}
    ids = list(by_version)
    sizes: dict[int, int] = {}
    for start in range(0, len(ids), 5000):
        for version_id, count in session.execute(
            select(col(Criterion.rubric_version_id), func.count())
            .where(col(Criterion.rubric_version_id).in_(ids[start : start + 5000]))
            .group_by(col(Criterion.rubric_version_id))
        ).all():
            sizes[by_version[version_id]] = count
    return sizes
