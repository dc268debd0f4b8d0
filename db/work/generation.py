"""Generate runs' answers: the cache of a candidate model's answers and the responses made of them.

An answer is a response only when it is complete: the endpoint finished it (finish_reason other than
`length`) and its text is one the response rules accept (not blank, within the length limit). A
truncated, empty or refused answer is kept in `generation_result` with its status and counted in its
run, never written as a response: neither a physician's queue nor a judge run can then take a
fragment for a model's answer. A later run with a larger max_tokens asks again (another cache key).
Such an answer keeps only its first `KEPT_ANSWER_CHARS` characters, and its length (`text_length`):
an endpoint may send any size, and what is kept is for reading, not for use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlmodel import Session, SQLModel, col

from db.access.policies import JudgeRunPolicy, SystemActor, authorize
from db.importers.responses import write_responses
from db.store.models import JudgeRun, Response, User, utcnow
from db.work.judge_runs import run_summary

COMPLETE, TRUNCATED, EMPTY, REFUSED = "complete", "truncated", "empty", "refused"
STATUSES = (COMPLETE, TRUNCATED, EMPTY, REFUSED)
LOOKUP_BATCH = 500
#: Characters kept of an answer that is not a response (truncated, empty, refused).
KEPT_ANSWER_CHARS = 4000
_RESULT = SQLModel.metadata.tables["generation_result"]
_RESPONSE = SQLModel.metadata.tables["response"]


@dataclass
class Generated:
    """One case's answer: new (with its text and costs) or read from the cache."""

    cache_key: str
    case_pk: int
    case_id: str
    status: str
    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    attempts: int = 0
    from_cache: bool = False


def cached_answers(connection: Connection, keys: list[str]) -> dict[str, tuple[str, str, str | None]]:
    """cache key → (status, text, finish_reason) of the keys answered before."""
    found = {}
    for start in range(0, len(keys), LOOKUP_BATCH):
        batch = keys[start : start + LOOKUP_BATCH]
        for row in connection.execute(
            select(_RESULT.c.cache_key, _RESULT.c.status, _RESULT.c.text, _RESULT.c.finish_reason).where(
                _RESULT.c.cache_key.in_(batch)
            )
        ):
            found[row.cache_key] = (row.status, row.text, row.finish_reason)
    return found


def store_generated(session: Session, run_id: int, model: str, actor: str, answers: list[Generated]) -> None:
    """New answers into the cache; complete ones as responses of `model` (as an import writes them).

    An answer read from the cache is written only where `model` has no response for its case yet (a
    re-run under another name): a re-run never overwrites a response someone replaced since."""
    connection = session.connection()
    new = [answer for answer in answers if not answer.from_cache]
    if new:
        known = set(cached_answers(connection, [answer.cache_key for answer in new]))
        rows = [
            {
                "cache_key": a.cache_key,
                "run_id": run_id,
                "case_pk": a.case_pk,
                "response_id": None,
                "text": a.text if a.status == COMPLETE else a.text[:KEPT_ANSWER_CHARS],
                "text_length": len(a.text),
                "finish_reason": a.finish_reason,
                "status": a.status,
                "prompt_tokens": a.prompt_tokens,
                "completion_tokens": a.completion_tokens,
                "latency_ms": a.latency_ms,
                "attempts": a.attempts,
                "created_at": utcnow(),
            }
            for a in {answer.cache_key: answer for answer in new if answer.cache_key not in known}.values()
        ]
        if rows:
            connection.execute(insert(_RESULT), rows)
    complete = [answer for answer in answers if answer.status == COMPLETE]
    if not complete:
        return
    existing = _response_ids(connection, model, [answer.case_pk for answer in complete])
    writes = [a for a in complete if not (a.from_cache and a.case_pk in existing)]
    if writes:
        write_responses(session, f"generate run {run_id}", actor, [(a.case_id, model, a.text) for a in writes])
        existing = _response_ids(connection, model, [answer.case_pk for answer in writes])
        links = [{"key": a.cache_key, "response": existing[a.case_pk]} for a in writes if not a.from_cache]
        if links:
            connection.execute(
                update(_RESULT)
                .where(_RESULT.c.cache_key == bindparam("key"), _RESULT.c.response_id.is_(None))
                .values(response_id=bindparam("response")),
                links,
            )


def _response_ids(connection: Connection, model: str, case_pks: list[int]) -> dict[int, int]:
    found: dict[int, int] = {}
    pks = sorted(set(case_pks))
    for start in range(0, len(pks), LOOKUP_BATCH):
        rows = connection.execute(
            select(_RESPONSE.c.case_pk, _RESPONSE.c.id).where(
                _RESPONSE.c.model == model, _RESPONSE.c.case_pk.in_(pks[start : start + LOOKUP_BATCH])
            )
        )
        found.update(dict(rows.all()))
    return found


@dataclass
class ModelGeneration:
    """What generate runs made of one model: its responses, its answers by status, its runs (newest first).

    `statuses` counts distinct cases per status over every run storing as the model (a case cut at
    max_tokens once and answered completely by a later run counts under both); `unanswered` counts the
    cases whose answers were all incomplete and that the model has no response for."""

    model: str
    responses: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    unanswered: int = 0
    runs: list[dict[str, Any]] = field(default_factory=list)


def generated_models(session: Session, *, actor: User | SystemActor) -> list[str]:
    """The models generate runs have stored answers as, by name (a model may have no response yet; admins only)."""
    authorize(session, actor, JudgeRunPolicy.manage())
    names = session.scalars(select(col(JudgeRun.judge)).where(col(JudgeRun.kind) == "generate").distinct())
    return sorted(str(name) for name in names)


def models_newest_first(session: Session, *, actor: User | SystemActor) -> list[str]:
    """Every model with responses or with generate runs, the newest first: by when its latest response arrived
    (imported or generated), a model with generate runs only by when its latest run was created; ties by name
    (admins only)."""
    authorize(session, actor, JudgeRunPolicy.manage())
    newest: dict[str, Any] = {}
    latest_response = select(col(Response.model), func.max(col(Response.created_at))).group_by(col(Response.model))
    latest_run = (
        select(col(JudgeRun.judge), func.max(col(JudgeRun.created_at)))
        .where(col(JudgeRun.kind) == "generate")
        .group_by(col(JudgeRun.judge))
    )
    for statement in (latest_response, latest_run):
        for model, moment in session.execute(statement).all():
            if model is not None and moment is not None:
                newest[str(model)] = max(newest.get(str(model), moment), moment)
    return sorted(newest, key=lambda model: (-newest[model].timestamp(), model))


def model_generation(session: Session, by: User, model: str) -> ModelGeneration:
    """The generation side of `model`'s pipeline, for an admin."""
    authorize(session, by, JudgeRunPolicy.manage())
    connection = session.connection()
    runs = session.scalars(
        select(JudgeRun)
        .where(col(JudgeRun.kind) == "generate", col(JudgeRun.judge) == model)
        .order_by(col(JudgeRun.id).desc())
    )
    result = ModelGeneration(model=model, runs=[run_summary(run) for run in runs])
    result.responses = int(connection.execute(select(func.count()).where(_RESPONSE.c.model == model)).scalar_one())
    run_ids = [summary["id"] for summary in result.runs]
    if not run_ids:
        return result
    answered = set(connection.execute(select(_RESPONSE.c.case_pk).where(_RESPONSE.c.model == model)).scalars().all())
    cases: dict[str, set[int]] = {status: set() for status in STATUSES}
    for status, case_pk in connection.execute(
        select(_RESULT.c.status, _RESULT.c.case_pk).where(_RESULT.c.run_id.in_(run_ids)).distinct()
    ):
        cases.setdefault(status, set()).add(case_pk)
    result.statuses = {status: len(pks) for status, pks in cases.items()}
    incomplete = set().union(*(pks for status, pks in cases.items() if status != COMPLETE))
    result.unanswered = len(incomplete - cases[COMPLETE] - answered)
    return result
