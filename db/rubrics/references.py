"""Reference answers of cases (docs/REFERENCE.md §1, §3.1): stored, replaced, audited by digest, shown to few.

A case's reference answer is read by its rubric author (an annotator with the case's rubric assignment or
the author of one of its versions), by rubric auditors (checkers) and by admins; nobody else receives it
(`ReferencePolicy.read`), and the labeling, check and adjudication workflows never read it. Admins write
it: an import (`import references FILE`, or the `reference_answer` key of a case line) or the authoring
page. A write that changes the text replaces it; the audit log keeps the sha256 and length before and
after, never the text. A validation run started by an admin reads the texts through `texts_for_run`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection
from sqlmodel import Session, col

from db.access.audit import AuditWriter
from db.access.policies import ReferencePolicy, authorize
from db.rules.anchors import reference_problem, text_sha256
from db.rules.enums import AssignmentKind, Role
from db.rules.errors import NotFound, ValidationFailed
from db.store.models import Assignment, Case, ReferenceAnswer, RubricVersion, User, table_of, utcnow

_TABLE = table_of(ReferenceAnswer)
LOOKUP_BATCH = 500


@dataclass(frozen=True)
class Written:
    """What a write of reference answers did."""

    inserted: int = 0
    replaced: int = 0
    unchanged: int = 0


def _digest(text: str) -> dict:
    return {"sha256": text_sha256(text), "length": len(text)}


def write_references(connection: Connection, actor: str, texts: dict[int, tuple[str, str]]) -> tuple[Written, list]:
    """Store `texts` (case pk → (case_id, text), each already checked); returns what changed and the audit rows
    (entity `reference_answer`, keyed by case_id, with digests) for the caller's writer."""
    stored: dict[int, str] = {}
    pks = sorted(texts)
    for start in range(0, len(pks), LOOKUP_BATCH):
        batch = pks[start : start + LOOKUP_BATCH]
        for pk, sha in connection.execute(select(_TABLE.c.case_pk, _TABLE.c.sha256).where(_TABLE.c.case_pk.in_(batch))):
            stored[pk] = sha
    now = utcnow()
    new_rows, audit_rows = [], []
    inserted = replaced = unchanged = 0
    for pk in pks:
        case_id, text = texts[pk]
        digest = text_sha256(text)
        before = stored.get(pk)
        if before == digest:
            unchanged += 1
            continue
        if before is None:
            new_rows.append({"case_pk": pk, "text": text, "sha256": digest, "updated_at": now, "updated_by": actor})
            inserted += 1
            audit_rows.append(
                {
                    "action": "import",
                    "entity": "reference_answer",
                    "entity_key": case_id,
                    "before": None,
                    "after": _digest(text),
                }
            )
            continue
        old_length = connection.execute(select(_TABLE.c.text).where(_TABLE.c.case_pk == pk)).scalar_one()
        connection.execute(
            update(_TABLE)
            .where(_TABLE.c.case_pk == pk)
            .values(text=text, sha256=digest, updated_at=now, updated_by=actor)
        )
        replaced += 1
        audit_rows.append(
            {
                "action": "replace",
                "entity": "reference_answer",
                "entity_key": case_id,
                "before": {"sha256": before, "length": len(old_length)},
                "after": _digest(text),
            }
        )
    if new_rows:
        connection.execute(insert(_TABLE), new_rows)
    return Written(inserted, replaced, unchanged), audit_rows


def set_reference(session: Session, user: User, case_pk: int, text: str) -> Written:
    """An admin pastes or edits a case's reference answer (the authoring page); audited like an import."""
    user = authorize(session, user, ReferencePolicy.write())
    problem = reference_problem(text)
    if problem is not None:
        raise ValidationFailed(str(problem), key="references.refused", params={"reason": problem})
    case = session.get(Case, case_pk)
    if case is None:
        raise NotFound(f"no case #{case_pk}", key="errors.case_unknown", params={"case_id": case_pk})
    written, audit_rows = write_references(session.connection(), user.username, {case_pk: (case.case_id, text)})
    for row in audit_rows:
        row["action"] = "update" if row["action"] == "replace" else row["action"]
    AuditWriter(session, user.username).record_many(audit_rows)
    return written


def is_rubric_author(session: Session, user: User, case_pk: int) -> bool:
    """Whether `user` authors the case's rubric: assigned to write it, or the author of one of its versions."""
    assigned = session.execute(
        select(col(Assignment.id))
        .where(
            col(Assignment.user_id) == user.id,
            col(Assignment.kind) == AssignmentKind.rubric,
            col(Assignment.case_pk) == case_pk,
        )
        .limit(1)
    ).first()
    if assigned is not None:
        return True
    wrote = session.execute(
        select(col(RubricVersion.id))
        .where(col(RubricVersion.case_pk) == case_pk, col(RubricVersion.author_id) == user.id)
        .limit(1)
    ).first()
    return wrote is not None


def reference_for(session: Session, user: User, case_pk: int) -> str | None:
    """The case's reference answer for someone who may read it (None when the case has none).

    The role and authorship are checked before anything about the case is read: a refusal says the same
    whether or not the case has a reference answer."""
    if user.role == Role.annotator and user.is_active:
        user = authorize(session, user, ReferencePolicy.read(is_author=is_rubric_author(session, user, case_pk)))
    else:
        authorize(session, user, ReferencePolicy.read())
    return session.execute(select(_TABLE.c.text).where(_TABLE.c.case_pk == case_pk)).scalar()


def reference_digests(session: Session, user: User) -> dict[int, str]:
    """case pk → sha256 of its reference answer, every case that has one (admins and rubric auditors)."""
    authorize(session, user, ReferencePolicy.read())  # an annotator is refused: they read their own case's only
    return dict(session.execute(select(_TABLE.c.case_pk, _TABLE.c.sha256)).all())


def texts_for_run(connection: Connection, case_pks: list[int]) -> dict[int, str]:
    """case pk → reference answer, for a rubric validation run an admin started (docs/REFERENCE.md §1)."""
    texts: dict[int, str] = {}
    for start in range(0, len(case_pks), LOOKUP_BATCH):
        batch = case_pks[start : start + LOOKUP_BATCH]
        rows = connection.execute(select(_TABLE.c.case_pk, _TABLE.c.text).where(_TABLE.c.case_pk.in_(batch)))
        texts.update((int(pk), text) for pk, text in rows)
    return texts


def reference_cases(session: Session, user: User) -> list[tuple[int, str, bool]]:
    """(case pk, case_id, whether it has a reference answer) of every case, in case order (admins)."""
    authorize(session, user, ReferencePolicy.write())
    having = set(session.execute(select(_TABLE.c.case_pk)).scalars())
    rows = session.execute(select(col(Case.id), col(Case.case_id)).order_by(col(Case.id))).all()
    return [(int(pk), case_id, pk in having) for pk, case_id in rows]
