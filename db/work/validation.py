"""Rubric validation runs (docs/REFERENCE.md §4.2): the cache of their answers and the anchor decisions they keep.

A validation run grades the anchor answers of each selected case (its reference answer, a refusal, a
generic answer) on each criterion of one rubric version. Its answers are cached in `anchor_result` under a
hash of the request (a second run with nothing changed sends nothing), and what each run read lands in
`anchor_decision`, never in `judge_decision`: no model's figure reads an anchor. An answer that does not
parse is kept with `met` null (counted as unreadable, never met or not met); an item the judge did not
answer (an endpoint that cannot be reached) has no row and is counted as not answered.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlmodel import Session

from db.access.policies import ReferencePolicy, authorize
from db.rubrics.references import is_rubric_author
from db.rules.anchors import ANCHORS
from db.rules.enums import Role
from db.store.current_rubric import current_version_ids
from db.store.models import AnchorDecision, AnchorResult, Criterion, JudgeRun, RubricVersion, User, table_of, utcnow

LOOKUP_BATCH = 500
_RESULT = table_of(AnchorResult)
_DECISION = table_of(AnchorDecision)
_RUN = table_of(JudgeRun)
_VERSION = table_of(RubricVersion)
_CRITERION = table_of(Criterion)


def cached_anchor_results(connection: Connection, keys: list[str]) -> dict[str, tuple[bool, bool | None]]:
    """cache key → (parse_ok, met) of the keys answered before."""
    found: dict[str, tuple[bool, bool | None]] = {}
    for start in range(0, len(keys), LOOKUP_BATCH):
        batch = keys[start : start + LOOKUP_BATCH]
        for key, parse_ok, met in connection.execute(
            select(_RESULT.c.cache_key, _RESULT.c.parse_ok, _RESULT.c.met).where(_RESULT.c.cache_key.in_(batch))
        ):
            found[key] = (bool(parse_ok), None if met is None else bool(met))
    return found


@dataclass
class AnchorAnswer:
    """One anchor item's outcome: where it belongs, and the judge's answer (new, or read from the cache)."""

    cache_key: str
    case_pk: int
    rubric_version_id: int
    anchor: str
    criterion_id: str
    parse_ok: bool
    met: bool | None
    raw_output: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    attempts: int = 0
    from_cache: bool = False


def store_anchor_answers(session: Session, run_id: int, answers: list[AnchorAnswer]) -> None:
    """New answers into the cache; every answer as the run's anchor decision (met null when unreadable).

    A resumed run meets its own earlier decisions again: they are updated, never doubled."""
    connection = session.connection()
    new = [answer for answer in answers if not answer.from_cache]
    if new:
        known = set(cached_anchor_results(connection, [answer.cache_key for answer in new]))
        rows, seen = [], set()
        for a in new:
            if a.cache_key in known or a.cache_key in seen:
                continue
            seen.add(a.cache_key)
            rows.append(
                {
                    "cache_key": a.cache_key,
                    "run_id": run_id,
                    "raw_output": a.raw_output,
                    "parse_ok": a.parse_ok,
                    "met": a.met if a.parse_ok else None,
                    "prompt_tokens": a.prompt_tokens,
                    "completion_tokens": a.completion_tokens,
                    "latency_ms": a.latency_ms,
                    "attempts": a.attempts,
                    "created_at": utcnow(),
                }
            )
        if rows:
            connection.execute(insert(_RESULT), rows)
    if not answers:
        return
    versions = sorted({a.rubric_version_id for a in answers})
    existing: set[tuple[int, str, str]] = set()
    for start in range(0, len(versions), LOOKUP_BATCH):
        batch = versions[start : start + LOOKUP_BATCH]
        for version_id, anchor, criterion_id in connection.execute(
            select(_DECISION.c.rubric_version_id, _DECISION.c.anchor, _DECISION.c.criterion_id).where(
                and_(_DECISION.c.run_id == run_id, _DECISION.c.rubric_version_id.in_(batch))
            )
        ):
            existing.add((version_id, anchor, criterion_id))
    inserts: dict[tuple[int, str, str], dict[str, Any]] = {}
    updates: dict[tuple[int, str, str], dict[str, Any]] = {}
    for a in answers:
        key = (a.rubric_version_id, a.anchor, a.criterion_id)
        met = a.met if a.parse_ok else None
        row: dict[str, Any] = {"run_id": run_id, "case_pk": a.case_pk, "version": a.rubric_version_id}
        row |= {"anchor": a.anchor, "criterion": a.criterion_id, "met": met}
        (updates if key in existing else inserts)[key] = row
    if inserts:
        connection.execute(
            insert(_DECISION),
            [
                {
                    "run_id": row["run_id"],
                    "case_pk": row["case_pk"],
                    "rubric_version_id": row["version"],
                    "anchor": row["anchor"],
                    "criterion_id": row["criterion"],
                    "met": row["met"],
                }
                for row in inserts.values()
            ],
        )
    if updates:
        connection.execute(
            update(_DECISION)
            .where(
                and_(
                    _DECISION.c.run_id == bindparam("run_id"),
                    _DECISION.c.rubric_version_id == bindparam("version"),
                    _DECISION.c.anchor == bindparam("anchor"),
                    _DECISION.c.criterion_id == bindparam("criterion"),
                )
            )
            .values(met=bindparam("met")),
            list(updates.values()),
        )


def note_anchor_items(session: Session, run_id: int, items: dict[str, int]) -> None:
    """Keep in the run's record how many items each anchor has (what its counts are read against)."""
    run = session.get(JudgeRun, run_id)
    if run is not None:
        run.params = {**(run.params or {}), "anchor_items": {anchor: int(items.get(anchor, 0)) for anchor in ANCHORS}}
        session.add(run)


def anchor_counts(connection: Connection, run_id: int) -> dict[str, dict[str, int]]:
    """anchor → items, decided (met or not met), unreadable (the answer did not parse) and not answered (no answer:
    the endpoint could not be reached or failed) of one validation run."""
    params = connection.execute(select(_RUN.c.params).where(_RUN.c.id == run_id)).scalar() or {}
    items = dict(params.get("anchor_items") or {})
    decided: Counter = Counter()
    unreadable: Counter = Counter()
    for anchor, met, n in connection.execute(
        select(_DECISION.c.anchor, _DECISION.c.met.is_(None), func.count())
        .where(_DECISION.c.run_id == run_id)
        .group_by(_DECISION.c.anchor, _DECISION.c.met.is_(None))
    ):
        (unreadable if met else decided)[anchor] += int(n)
    result = {}
    for anchor in ANCHORS:
        total = int(items.get(anchor, decided[anchor] + unreadable[anchor]))
        result[anchor] = {
            "items": total,
            "decided": decided[anchor],
            "unreadable": unreadable[anchor],
            "not_answered": max(total - decided[anchor] - unreadable[anchor], 0),
        }
    return result


def newest_anchor_decisions(connection: Connection, version_ids: list[int] | None = None) -> list[dict[str, Any]]:
    """The anchor decisions of the newest validation run on each rubric version (of `version_ids`, or every
    version): rows of case_pk, rubric_version_id, version (its number), run_id, judge, anchor, criterion_id, met."""
    newest = select(_DECISION.c.rubric_version_id, func.max(_DECISION.c.run_id).label("run_id")).group_by(
        _DECISION.c.rubric_version_id
    )
    if version_ids is not None:
        newest = newest.where(_DECISION.c.rubric_version_id.in_(version_ids))
    chosen = newest.subquery()
    query = (
        select(
            _DECISION.c.case_pk,
            _DECISION.c.rubric_version_id,
            _VERSION.c.version,
            _DECISION.c.run_id,
            _RUN.c.judge,
            _DECISION.c.anchor,
            _DECISION.c.criterion_id,
            _DECISION.c.met,
        )
        .join(
            chosen,
            and_(chosen.c.rubric_version_id == _DECISION.c.rubric_version_id, chosen.c.run_id == _DECISION.c.run_id),
        )
        .join(_RUN, _RUN.c.id == _DECISION.c.run_id)
        .join(_VERSION, _VERSION.c.id == _DECISION.c.rubric_version_id)
        .order_by(_DECISION.c.case_pk, _DECISION.c.id)
    )
    # unpacked by position: a full-scale report reads every validation's rows, and a Row's attribute lookups
    # were most of that read
    return [
        {
            "case_pk": case_pk,
            "rubric_version_id": version_id,
            "version": version,
            "run_id": run_id,
            "judge": judge,
            "anchor": anchor,
            "criterion_id": criterion_id,
            "met": None if met is None else bool(met),
        }
        for case_pk, version_id, version, run_id, judge, anchor, criterion_id, met in connection.execute(query)
    ]


@dataclass(frozen=True)
class VersionValidation:
    """What a page shows of a rubric version's validation: the newest run's anchor decisions (rows as
    `newest_anchor_decisions`), the version's case, and the criterion texts of the case's current approved
    version (item–rest and redundancy were computed on those)."""

    rows: list[dict[str, Any]]
    case_pk: int | None
    current_texts: dict[str, str]


def validation_of_version(session: Session, user: User, rubric_version_id: int) -> VersionValidation:
    """The validation of one rubric version, for the people who may see its case's reference answer (the case's
    rubric author, rubric auditors, admins). The role and authorship are checked before anything else is read."""
    version = session.get(RubricVersion, rubric_version_id)
    if user.role == Role.annotator and user.is_active:
        is_author = version is not None and is_rubric_author(session, user, version.case_pk)
        user = authorize(session, user, ReferencePolicy.read(is_author=is_author))
    else:
        authorize(session, user, ReferencePolicy.read())
    if version is None:
        return VersionValidation([], None, {})
    current = current_version_ids(session, [version.case_pk]).get(version.case_pk)
    texts: dict[str, str] = {}
    if current is not None:
        texts = dict(
            session.execute(
                select(_CRITERION.c.criterion_id, _CRITERION.c.text).where(_CRITERION.c.rubric_version_id == current)
            ).all()
        )
    return VersionValidation(newest_anchor_decisions(session.connection(), [rubric_version_id]), version.case_pk, texts)
