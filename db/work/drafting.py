"""Drafting runs' answers (docs/REFERENCE.md §4.3): the cache of LLM drafts, which is also where drafts wait.

Every answer of a drafting run is one `rubric_draft` row keyed by a hash of its request, readable or
not (an unreadable one, after its re-asks, is kept with `parse_ok` false and no criteria, so a re-run
with the same request does not ask again, and the run counts it). A readable draft is never a rubric
version: it waits for the case's assigned author (db.rubrics.authoring.offered_draft). Which cases a
run drafts: `missing` (no approved rubric and nothing submitted or drafted by an author yet), `all`,
or the ids of a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import Session, SQLModel, col

from db.access.audit import AuditWriter
from db.store.models import Case, RubricDraft, RubricVersion, utcnow

LOOKUP_BATCH = 500
_DRAFT = SQLModel.metadata.tables["rubric_draft"]


@dataclass
class Drafted:
    """One case's draft: new (with its costs) or read from the cache."""

    cache_key: str
    case_pk: int
    case_id: str
    parse_ok: bool
    criteria: list[dict] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    raw_output: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    attempts: int = 0
    from_cache: bool = False


def cached_drafts(connection: Connection, keys: list[str]) -> dict[str, tuple[bool, list, dict]]:
    """cache key → (parse_ok, criteria, dropped) of the keys answered before."""
    found = {}
    for start in range(0, len(keys), LOOKUP_BATCH):
        batch = keys[start : start + LOOKUP_BATCH]
        for row in connection.execute(
            select(_DRAFT.c.cache_key, _DRAFT.c.parse_ok, _DRAFT.c.criteria, _DRAFT.c.dropped).where(
                _DRAFT.c.cache_key.in_(batch)
            )
        ):
            found[row.cache_key] = (bool(row.parse_ok), list(row.criteria or []), dict(row.dropped or {}))
    return found


def store_drafts(session: Session, run_id: int | None, generator: str, actor: str, drafts: list[Drafted]) -> int:
    """New drafts into `rubric_draft` (audited, one entry per batch); returns how many were written."""
    new = [draft for draft in drafts if not draft.from_cache]
    if not new:
        return 0
    known = set(cached_drafts(session.connection(), [draft.cache_key for draft in new]))
    fresh = list({d.cache_key: d for d in new if d.cache_key not in known}.values())
    if not fresh:
        return 0
    session.add_all(
        [
            RubricDraft(
                cache_key=d.cache_key,
                run_id=run_id,
                case_pk=d.case_pk,
                generator=generator,
                criteria=d.criteria,
                dropped=d.dropped,
                parse_ok=d.parse_ok,
                raw_output=d.raw_output,
                prompt_tokens=d.prompt_tokens,
                completion_tokens=d.completion_tokens,
                latency_ms=d.latency_ms,
                attempts=d.attempts,
                created_at=utcnow(),
            )
            for d in fresh
        ]
    )
    session.flush()
    AuditWriter(session, actor).record(
        action="create",
        entity="rubric_draft",
        entity_key=f"run {run_id}" if run_id is not None else generator,
        after={
            "generator": generator,
            "drafts": [
                {"case_id": d.case_id, "criteria": len(d.criteria), "parse_ok": d.parse_ok, "dropped": d.dropped}
                for d in fresh
            ],
        },
    )
    return len(fresh)


def cases_to_draft(session: Session, scope: str, case_ids: list[str] | None = None) -> list[Case]:
    """The cases a drafting run asks about, in case order: `missing`, `all`, or the given ids."""
    cases = list(session.execute(select(Case).order_by(col(Case.id))).scalars())
    if case_ids:
        wanted = set(case_ids)
        return [case for case in cases if case.case_id in wanted]
    if scope == "all":
        return cases
    started = set(session.execute(select(col(RubricVersion.case_pk)).distinct()).scalars())
    return [case for case in cases if case.id not in started]
