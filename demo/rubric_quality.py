"""The demo's reference answers and rubric validation runs (docs/REFERENCE.md §4.2), so every flag shows in the demo.

Most cases get a reference answer that states their criteria one by one; a few leave a criterion or two
out, and a few are brief (they state eight criteria, so the reference does not reach k). A deterministic
in-process judge then grades the anchors of every case with a rubric (the current approved version, and
the one waiting for audit) the way `validate rubrics` records a run: a criterion is met by the reference
when the reference states it; in a few loosely written rubrics, the refusal meets the criteria that only
ask not to invent findings (a refusal invents nothing) and the generic answer those that ask to send the
patient to a face-to-face visit. The runs are recorded as validation runs of the judge `anchor-judge`.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from db.access.audit import AuditWriter
from db.rubrics.references import texts_for_run, write_references
from db.rules.anchors import ANCHORS, GENERIC, REFERENCE, REFUSAL, WEAK_TEXTS
from db.rules.enums import JudgeRunStatus, RubricStatus
from db.store.current_rubric import current_version_ids
from db.store.engine import session_scope
from db.store.models import Case, Criterion, RubricVersion
from db.work import judge_runs, validation

JUDGE = "anchor-judge"
ACTOR = "demo"
#: What a weak anchor says that some criteria ask for (the in-process judge's reading of it).
WEAK_MEETS = {REFUSAL: ("没有编造",), GENERIC: ("替代面诊",)}
#: The point a reference states for a case whose rubric is not written yet.
_UNWRITTEN = "先明确最可能的诊断及依据，再给出需要完善的检查、处理措施、用药注意事项和随访安排"
#: Criteria a brief reference answer states.
BRIEF = 8


def reference_text(case_id: str, criteria: list[tuple[str, str]], index: int, rubric_index: int) -> str | None:
    """The demo reference answer of a case: its criteria stated as points. None for one case in eight (by
    `index`, the case's place); of the cases with a rubric (`rubric_index`, their place among those given a
    reference), one in forty is brief (only the first eight criteria) and one in ten leaves one or two out."""
    if index % 8 == 3:
        return None
    stated = list(criteria)
    if rubric_index % 40 == 4:
        stated = stated[:BRIEF]
    elif rubric_index % 10 == 1 and len(stated) > 2:
        digest = hashlib.sha256(case_id.encode()).digest()
        drop = {digest[0] % len(stated), digest[1] % len(stated)}
        stated = [item for position, item in enumerate(stated) if position not in drop]
    points = "\n".join(f"{number}. {text}。" for number, (_criterion_id, text) in enumerate(stated, 1))
    return f"参考答案（专家审定）：\n{points}"


def loose(case_id: str) -> bool:
    """About one rubric in twelve: its criteria that a weak answer plainly covers are written loosely enough
    for the in-process judge to let a weak anchor meet them."""
    return hashlib.sha256(f"loose:{case_id}".encode()).digest()[0] % 12 in (2, 7)


def judge_verdict(anchor: str, answer: str, criterion: str, loosely_written: bool) -> bool:
    """The demo's in-process judge: the reference meets what it states; a weak anchor what it plainly covers,
    in a loosely written rubric."""
    if anchor == REFERENCE:
        return f"{criterion}。" in answer
    return loosely_written and any(phrase in criterion for phrase in WEAK_MEETS.get(anchor, ()))


def add_rubric_quality(engine: Engine) -> dict[str, int]:
    """Reference answers for the demo's cases and a validation run on each rubric version kind; returns counts."""
    with session_scope(engine) as session:
        connection = session.connection()
        current = current_version_ids(session)
        submitted = dict(
            session.execute(
                select(col(RubricVersion.case_pk), func.max(col(RubricVersion.id)))
                .where(col(RubricVersion.status) == RubricStatus.submitted)
                .group_by(col(RubricVersion.case_pk))
            ).all()
        )
        case_ids = dict(session.execute(select(col(Case.id), col(Case.case_id))).all())
        criteria = _criteria(session, sorted(set(current.values()) | set(submitted.values())))
        texts = {}
        with_rubric = 0
        for index, (case_pk, case_id) in enumerate(sorted(case_ids.items())):
            # The expert states the points of the case's rubric: the approved one, else the one waiting for
            # audit; a case whose rubric is not written yet gets the general points of a good answer.
            # The one waiting for audit is given a reference leaving a point or two out (the place of one in
            # ten), so the audit page shows what a reference that misses criteria looks like.
            version = current.get(case_pk, submitted.get(case_pk))
            points = criteria.get(version, []) if version is not None else [("", _UNWRITTEN)]
            place = with_rubric if case_pk in current else (1 if version is not None else -1)
            text = reference_text(case_id, points, index, place)
            if text is not None:
                texts[case_pk] = (case_id, text)
                with_rubric += case_pk in current
        _written, audit_rows = write_references(connection, ACTOR, texts)
        AuditWriter(session, ACTOR).record_many(audit_rows)
    runs = 0
    for rubric, versions in (("current", current), ("submitted", submitted)):
        if versions:
            _record_run(engine, versions, criteria, rubric)
            runs += 1
    return {"references": len(texts), "validation_runs": runs}


def _criteria(session, version_ids: list[int]) -> dict[int, list[tuple[str, str]]]:
    found: dict[int, list[tuple[str, str]]] = {}
    for start in range(0, len(version_ids), 500):
        for version_id, criterion_id, text in session.execute(
            select(col(Criterion.rubric_version_id), col(Criterion.criterion_id), col(Criterion.text))
            .where(col(Criterion.rubric_version_id).in_(version_ids[start : start + 500]))
            .order_by(col(Criterion.rubric_version_id), col(Criterion.position))
        ):
            found.setdefault(version_id, []).append((criterion_id, text))
    return found


def _record_run(
    engine: Engine, versions: dict[int, int], criteria: dict[int, list[tuple[str, str]]], rubric: str
) -> None:
    """One validation run of the in-process judge over `versions` (case pk → rubric version id)."""
    with session_scope(engine) as session:
        run = judge_runs.create_run(
            session,
            ACTOR,
            judge=JUDGE,
            base_url="in-process",
            model=JUDGE,
            template="official",
            template_sha256=hashlib.sha256(JUDGE.encode()).hexdigest(),
            params={"rubric": rubric, "cases": "all"},
            kind="validate",
        )
        assert run.id is not None
        references = texts_for_run(session.connection(), sorted(versions))
        case_ids = dict(session.execute(select(col(Case.id), col(Case.case_id))).all())
        answers: list[validation.AnchorAnswer] = []
        for case_pk, version_id in sorted(versions.items()):
            said = {REFERENCE: references.get(case_pk), **WEAK_TEXTS}
            for anchor in ANCHORS:
                answer = said[anchor]
                if not answer:
                    continue
                for criterion_id, text in criteria.get(version_id, []):
                    key = hashlib.sha256(f"{JUDGE}\x00{answer}\x00{text}".encode()).hexdigest()
                    met = judge_verdict(anchor, answer, text, loose(case_ids[case_pk]))
                    answers.append(
                        validation.AnchorAnswer(key, case_pk, version_id, anchor, criterion_id, True, met, "demo", 0, 0)
                    )
        judge_runs.begin_run(session, run.id, items=len(answers), pid=0, base_urls=["in-process"])
        validation.note_anchor_items(session, run.id, {a: sum(x.anchor == a for x in answers) for a in ANCHORS})
        validation.store_anchor_answers(session, run.id, answers)
        judge_runs.record_progress(session.connection(), run.id, judge_runs.RunCounts(done=len(answers)), 0.0)
        judge_runs.end_run(session, run.id, JudgeRunStatus.finished)
