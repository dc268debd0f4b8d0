"""Judge runs and their result cache: the records a run writes and the rules for who may see or steer them.

Pages call the functions that take a `User` (admins only); the runner process (started by the
command line or by the page) calls the ones that take an `actor` name. A run's answers land in
`judge_result` (the cache, keyed by a hash of model, messages and parameters) and, when they parse,
as `judge_decision` rows of the run's judge name; an answer that does not parse is kept with its
raw output and counted, never stored as met or not met.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, insert, select, update
from sqlalchemy.engine import Connection
from sqlmodel import Session, SQLModel

from db import counts
from db.access.audit import AuditWriter
from db.access.audit_records import judge_digests_entry
from db.access.policies import JudgeRunPolicy, authorize
from db.rules.enums import JudgeRunStatus
from db.rules.errors import NotFound, ValidationFailed, said_from_record, said_record
from db.rules.records import LookAlikes
from db.store.judges import judge_names, response_models
from db.store.models import JudgeRun, User, utcnow

#: A running run whose process has not written for this long was stopped without saying so (killed).
STALE_AFTER = timedelta(seconds=30)
INTERRUPTED = "interrupted"
#: The base URL a batch's run records: its requests go out in a file, not to an endpoint.
BATCH_BASE_URL = "batch"
LOOKUP_BATCH = 500
_RESULT = SQLModel.metadata.tables["judge_result"]
_DECISION = SQLModel.metadata.tables["judge_decision"]
_RUN = SQLModel.metadata.tables["judge_run"]


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def shown_status(run: JudgeRun, now: datetime | None = None) -> str:
    """The status to show: a running run without a recent heartbeat was interrupted (its process died)."""
    if run.status == JudgeRunStatus.running:
        beat = _aware(run.heartbeat_at or run.started_at or run.created_at)
        if beat is not None and (now or utcnow()) - beat > STALE_AFTER:
            return INTERRUPTED
    return run.status


def run_summary(run: JudgeRun, now: datetime | None = None) -> dict[str, Any]:
    """What `judge runs` and the page show of a run (no API key: only the variable's name is known)."""
    answered = max(run.done - run.cached, 0)
    status = shown_status(run, now)
    rate = answered / run.wall_seconds if run.wall_seconds > 0 else None
    remaining = max(run.items - run.done, 0)
    params = dict(run.params or {})
    return {
        "id": run.id,
        "kind": run.kind or "judge",
        "judge": run.judge,
        "model": run.model,
        "base_url": run.base_url,
        "base_urls": list(params.get("base_urls") or [run.base_url]),
        "endpoints": [_share_summary(share) for share in run.endpoints or []],
        "status": status,
        "template": run.template,
        "template_sha256": run.template_sha256,
        "params": params,
        "created_by": run.created_by,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "items": run.items,
        "done": run.done,
        "cached": run.cached,
        "requests": run.requests,
        "parse_failures": run.parse_failures,
        "truncated": run.truncated,
        "empty": run.empty,
        "errors": run.errors,
        "retries": run.retries,
        "reasks": run.reasks,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "wall_seconds": round(run.wall_seconds, 3),
        "items_per_second": round(rate, 3) if rate else None,
        # Time left at this pass's pace (items answered by the endpoint per second of run time).
        "eta_seconds": round(remaining / rate, 1) if rate and status == JudgeRunStatus.running else None,
        # English as a str; the catalog entry rides along for the page (db.rules.errors.Said).
        "message": said_from_record(run.message_said) if run.message_said else run.message,
    }


def _share_summary(share: dict[str, Any]) -> dict[str, Any]:
    shown = {name: value for name, value in share.items() if name != "left_out_said"}
    if share.get("left_out_said"):
        shown["left_out"] = said_from_record(share["left_out_said"])
    return shown


def _iso(moment: datetime | None) -> str | None:
    moment = _aware(moment)
    return moment.isoformat(timespec="seconds") if moment else None


# Run records ----------------------------------------------------------------------------------


def _actor(session: Session, by: User | str) -> str:
    """The name a record keeps; a User must be an admin (a plain name is the command line)."""
    if isinstance(by, User):
        return authorize(session, by, JudgeRunPolicy.manage()).username
    return str(by or "cli")[:64]


#: The option that names what a run of each kind stores its work under (a judge's decisions, a model's answers).
_STORED_AS = {"judge": "--judge", "generate": "--as"}


def _refuse_lookalike(session: Session, name: str, kind: str) -> None:
    """Refuses a judge or model name that looks like a different existing one (NFKC, case folded), naming the option."""
    option = _STORED_AS.get(kind)
    if option is None:
        return
    known = judge_names(session) if kind == "judge" else response_models(session)
    earlier = select(_RUN.c.judge).where(_RUN.c.kind == kind).distinct()
    names = LookAlikes([*known, *session.execute(earlier).scalars()])
    other = names.clash(name)
    if other is not None:
        said = names.said(option, name, other)
        raise ValidationFailed(
            str(said), key="import.field.lookalike", params={"field": option, "name": name, "other": other}
        )


def create_run(
    session: Session,
    by: User | str,
    *,
    judge: str,
    base_url: str,
    model: str,
    template: str,
    template_sha256: str,
    params: dict[str, Any],
    kind: str = "judge",
) -> JudgeRun:
    actor = _actor(session, by)
    for name, value, limit in (("judge", judge, 128), ("base URL", base_url, 512), ("model", model, 256)):
        if not isinstance(value, str) or not value.strip():
            raise ValidationFailed(f"{name}: must not be empty", key="errors.field_empty", params={"field": name})
        if len(value) > limit:
            raise ValidationFailed(
                f"{name}: at most {limit} characters",
                key="errors.field_too_long",
                params={"field": name, "limit": limit},
            )
    _refuse_lookalike(session, judge.strip(), kind)
    run = JudgeRun(
        judge=judge.strip(),
        base_url=base_url.strip(),
        model=model.strip(),
        template=template,
        template_sha256=template_sha256,
        params=params,
        created_by=actor,
        kind=kind,
    )
    session.add(run)
    session.flush()
    AuditWriter(session, actor).record(
        action="create",
        entity="judge_run",
        entity_key=str(run.id),
        after={
            "kind": kind,
            "judge": run.judge,
            "base_url": run.base_url,
            "model": run.model,
            "template": template,
            "template_sha256": template_sha256,
            "params": params,
        },
    )
    return run


def list_runs(session: Session, by: User | str, limit: int = 200) -> list[JudgeRun]:
    _actor(session, by)
    return list(session.scalars(select(JudgeRun).order_by(_RUN.c.id.desc()).limit(limit)))


def get_run(session: Session, by: User | str, run_id: int) -> JudgeRun:
    _actor(session, by)
    run = session.get(JudgeRun, run_id)
    if run is None:
        raise NotFound(f"judge run {run_id}: no such run", key="errors.judge_run_unknown", params={"run": run_id})
    return run


def request_cancel(session: Session, by: User | str, run_id: int) -> JudgeRun:
    """Ask a run to stop; its process stops sending and records what it has (within about a second)."""
    actor = _actor(session, by)
    run = get_run(session, by, run_id)
    if run.status in (JudgeRunStatus.pending, JudgeRunStatus.running) and not run.cancel_requested:
        run.cancel_requested = True
        if run.status == JudgeRunStatus.pending or shown_status(run) == INTERRUPTED:
            run.status = JudgeRunStatus.cancelled
            run.finished_at = utcnow()
        session.add(run)
        AuditWriter(session, actor).record(action="cancel", entity="judge_run", entity_key=str(run.id))
    return run


# Used by the runner process ---------------------------------------------------------------------


def begin_run(session: Session, run_id: int, *, items: int, pid: int, base_urls: list[str] | None = None) -> JudgeRun:
    """Mark a run as running (again): counts of this pass start from zero, spent resources accumulate.

    Each endpoint's share accumulates over the passes (items it answered are cached for the next);
    an endpoint left out in an earlier pass is tried again."""
    run = session.get(JudgeRun, run_id)
    if run is None:
        raise NotFound(f"judge run {run_id}: no such run", key="errors.judge_run_unknown", params={"run": run_id})
    now = utcnow()
    run.status = JudgeRunStatus.running
    run.cancel_requested = False
    run.started_at = run.started_at or now
    run.heartbeat_at = now
    run.finished_at = None
    run.items, run.done, run.cached, run.parse_failures, run.errors = items, 0, 0, 0, 0
    run.truncated, run.empty = 0, 0
    shares = {share["base_url"]: dict(share) for share in run.endpoints or []}
    run.endpoints = [
        {**_NO_SHARE, **shares.get(url, {}), "base_url": url, "left_out": None, "left_out_said": None}
        for url in base_urls or [run.base_url]
    ]
    run.message = run.message_said = None
    run.params = {**(run.params or {}), "pid": pid}
    session.add(run)
    return run


@dataclass
class RunCounts:
    """What a pass of the runner has done so far (added to the record at each flush)."""

    done: int = 0
    cached: int = 0
    requests: int = 0
    parse_failures: int = 0
    truncated: int = 0
    empty: int = 0
    errors: int = 0
    retries: int = 0
    reasks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def take(self) -> RunCounts:
        """These counts, and zero them (a flush writes each increment once)."""
        taken = RunCounts(**vars(self))
        for name in vars(self):
            setattr(self, name, 0)
        return taken


#: An endpoint's share before it has done anything.
_NO_SHARE = {"done": 0, "requests": 0, "errors": 0}


def record_progress(
    connection: Connection,
    run_id: int,
    counts: RunCounts,
    wall_seconds: float,
    shares: dict[str, dict[str, Any]] | None = None,
) -> bool:
    """Add `counts` (and each endpoint's share: base_url → increments, left_out) to the record, beat the
    heartbeat; returns whether someone asked the run to stop."""
    table = _RUN
    values: dict[str, Any] = {name: getattr(table.c, name) + value for name, value in vars(counts).items() if value}
    if shares:
        # Only the run's own process writes its record: read, add, write back.
        stored = connection.execute(select(table.c.endpoints).where(table.c.id == run_id)).scalar() or []
        merged = {share["base_url"]: dict(share) for share in stored}
        for url, change in shares.items():
            share = merged.setdefault(url, {"base_url": url, **_NO_SHARE, "left_out": None})
            for name in _NO_SHARE:
                share[name] = share.get(name, 0) + change.get(name, 0)
            if change.get("left_out"):
                # English for the command line, the catalog entry for the page (db.rules.errors.said_record).
                share["left_out"] = str(change["left_out"])
                share["left_out_said"] = said_record(change["left_out"])
        values["endpoints"] = list(merged.values())
    connection.execute(
        update(table)
        .where(table.c.id == run_id)
        .values(**values, heartbeat_at=utcnow(), wall_seconds=table.c.wall_seconds + wall_seconds)
    )
    return bool(connection.execute(select(table.c.cancel_requested).where(table.c.id == run_id)).scalar())


def end_run(session: Session, run_id: int, status: str, message: str | None = None) -> None:
    run = session.get(JudgeRun, run_id)
    if run is None:
        raise NotFound(f"judge run {run_id}: no such run", key="errors.judge_run_unknown", params={"run": run_id})
    run.status = status
    run.finished_at = utcnow()
    run.heartbeat_at = run.finished_at
    run.message = None if message is None else str(message)
    record = said_record(message)
    run.message_said = record if isinstance(record, dict) else None  # plain text has no catalog entry
    session.add(run)
    AuditWriter(session, run.created_by).record(
        action=status,
        entity="judge_run",
        entity_key=str(run_id),
        after={
            "items": run.items,
            "done": run.done,
            "cached": run.cached,
            "parse_failures": run.parse_failures,
            "truncated": run.truncated,
            "empty": run.empty,
            "errors": run.errors,
            "endpoints": run.endpoints,
            "message": run.message,
        },
    )


def cached_results(connection: Connection, keys: list[str]) -> dict[str, tuple[int, str, bool, bool | None]]:
    """cache key → (response_id, criterion_id, parse_ok, met) of the keys answered before."""
    found = {}
    for start in range(0, len(keys), LOOKUP_BATCH):
        batch = keys[start : start + LOOKUP_BATCH]
        for row in connection.execute(
            select(
                _RESULT.c.cache_key, _RESULT.c.response_id, _RESULT.c.criterion_id, _RESULT.c.parse_ok, _RESULT.c.met
            ).where(_RESULT.c.cache_key.in_(batch))
        ):
            found[row.cache_key] = (
                row.response_id,
                row.criterion_id,
                bool(row.parse_ok),
                None if row.met is None else bool(row.met),
            )
    return found


@dataclass
class Answer:
    """One item's outcome: a new answer (with raw output) or one read from the cache."""

    cache_key: str
    response_id: int
    criterion_id: str
    parse_ok: bool
    met: bool | None
    raw_output: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    attempts: int = 0
    from_cache: bool = False


def store_answers(session: Session, run_id: int, judge: str, actor: str, answers: list[Answer]) -> dict[str, int]:
    """New answers into the cache; every parsed answer as the judge's decision (replacements audited)."""
    connection = session.connection()
    _cache_answers(connection, run_id, [answer for answer in answers if not answer.from_cache])
    decided = {(a.response_id, a.criterion_id): a.met for a in answers if a.parse_ok and a.met is not None}
    inserted = replaced = 0
    if decided:
        existing = _stored_decisions(connection, judge, sorted({response_id for response_id, _ in decided}))
        new_rows, changes, audit_rows = [], [], []
        changed_keys: list[tuple[int, str]] = []  # (response, criterion) inserted or changed: digests logged
        for (response_id, criterion_id), met in decided.items():
            stored = existing.get((response_id, criterion_id))
            if stored is None:
                changed_keys.append((response_id, criterion_id))
                new_rows.append(
                    {
                        "judge": judge,
                        "response_id": response_id,
                        "criterion_id": criterion_id,
                        "met": met,
                        "extra": {"run": run_id},
                    }
                )
            elif stored[1] != met:
                changed_keys.append((response_id, criterion_id))
                changes.append({"decision_id": stored[0], "met": met, "extra": {"run": run_id}})
                audit_rows.append(
                    {
                        "action": "replace",
                        "entity": "judge_decision",
                        "entity_key": f"{judge}/{response_id}/{criterion_id}",
                        "before": {"met": stored[1]},
                        "after": {"met": met, "run": run_id},
                    }
                )
        if new_rows:
            connection.execute(insert(_DECISION), new_rows)
            counts.add_judge_decisions(connection, {judge: len(new_rows)})
        if changes:
            connection.execute(
                update(_DECISION)
                .where(_DECISION.c.id == bindparam("decision_id"))
                .values(met=bindparam("met"), extra=bindparam("extra")),
                changes,
            )
        touched = {(judge, response_id) for response_id, _criterion in changed_keys}
        digests = judge_digests_entry(connection, f"judge run {run_id}", touched)
        AuditWriter(session, actor).record_many(audit_rows + ([digests] if digests else []))
        inserted, replaced = len(new_rows), len(changes)
    return {"inserted": inserted, "replaced": replaced}


def _cache_answers(connection, run_id: int, new: list[Answer]) -> None:
    """The answers not in the result cache yet, into it (answers read from the cache are there already)."""
    if not new:
        return
    known = set(cached_results(connection, [answer.cache_key for answer in new]))
    rows = [
        {
            "cache_key": a.cache_key,
            "run_id": run_id,
            "response_id": a.response_id,
            "criterion_id": a.criterion_id,
            "raw_output": a.raw_output,
            "parse_ok": a.parse_ok,
            "met": a.met,
            "prompt_tokens": a.prompt_tokens,
            "completion_tokens": a.completion_tokens,
            "latency_ms": a.latency_ms,
            "attempts": a.attempts,
            "created_at": utcnow(),
        }
        for a in new
        if a.cache_key not in known
    ]
    if rows:
        connection.execute(insert(_RESULT), rows)


def _stored_decisions(connection, judge: str, response_ids: list[int]) -> dict[tuple[int, str], tuple[int, bool]]:
    """(response, criterion) → (decision id, met) of `judge`'s stored decisions on `response_ids`."""
    existing: dict[tuple[int, str], tuple[int, bool]] = {}
    for start in range(0, len(response_ids), LOOKUP_BATCH):
        batch = response_ids[start : start + LOOKUP_BATCH]
        for row in connection.execute(
            select(_DECISION.c.id, _DECISION.c.response_id, _DECISION.c.criterion_id, _DECISION.c.met).where(
                and_(_DECISION.c.judge == judge, _DECISION.c.response_id.in_(batch))
            )
        ):
            existing[(row.response_id, row.criterion_id)] = (row.id, bool(row.met))
    return existing
