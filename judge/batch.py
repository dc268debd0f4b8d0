"""Batch export and import of judge runs and generation (docs/REFERENCE.md §3.8): the same work, offline.

A batch export writes the requests an online run would send — the same bodies (`chat_body`), for the
items the shared answer cache has not answered — and records a run whose answers come back in a
results file. The import reads each answer exactly as the online run reads it (the judge's parser,
generation's statuses), stores it through the same writers (cache first, then decisions or
responses), and counts it in the run: done, parse failures, errors, re-asks, tokens. Lines with an
error or a status other than 200 are counted and left for a later batch; an unreadable judge answer
is a parse failure, re-asked by the next export (at most `MAX_REASKS` times, as online).

The import checks the whole file before it stores anything, then stores in chunks, each with its
answers and the run's counts in one transaction: an import stopped half-way is run again and stores
each answer once (answers already in the cache are skipped), and importing the same file twice
stores nothing ("0 new decisions").
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from analysis.exports.manifest import export_head
from analysis.prompt import parse_judge_output, read_template, template_sha256
from db.access.policies import JudgeRunPolicy, authorize
from db.rules.enums import JudgeRunStatus
from db.rules.errors import NotFound, Said, ValidationFailed
from db.rules.progress_report import Progress, no_progress
from db.store.engine import session_scope
from db.store.models import User
from db.work import batches, generation, judge_runs
from judge import batch_files
from judge.core import recorded_run
from judge.endpoints import read_completion
from judge.generate import (
    CASE_SCOPES,
    GenerateJob,
    GenerateOptions,
    create_generate_run,
    generate_job,
    read_case_file,
)
from judge.runner import JudgeJob, RunOptions, create_run, judge_job

STORE_CHUNK = 2000


class BatchKind(Protocol):
    """What a kind of run (judge, generate) brings to a batch."""

    kind: str

    def chunks(self) -> Iterable[list[Any]]: ...  # items, each with a `cache_key`, in request order

    def states(self, connection: Connection, keys: list[str]) -> dict[str, Any]: ...

    def request(self, item: Any, state: Any) -> tuple[int, dict[str, Any]] | None: ...  # (round, body)

    def read(self, item: Any, round_no: int, completion: Any, state: Any) -> Any | None: ...

    def tally(self, answer: Any, counts: judge_runs.RunCounts) -> None: ...

    def store(self, session: Session, answers: list[Any]) -> None: ...

    def new_decisions(self, answers: list[Any]) -> int: ...

    def from_cache(self, engine: Engine, found: list[tuple[Any, Any]]) -> list[Any]: ...


class JudgeBatch:
    """Grading items: round 0 is the prompt; rounds 1 and 2 re-ask after an unreadable answer."""

    kind = "judge"

    def __init__(self, job: JudgeJob) -> None:
        self.job = job

    def chunks(self) -> Iterable[list[Any]]:
        return self.job.chunks()

    def states(self, connection: Connection, keys: list[str]) -> dict[str, batches.CachedJudgement]:
        return batches.judge_states(connection, keys)

    def request(self, item: Any, state: batches.CachedJudgement | None) -> tuple[int, dict[str, Any]] | None:
        if state is None:
            return 0, self.job.batch_body(item)
        round_no = state.next_round()
        return None if round_no is None else (round_no, self.job.batch_body(item, state.raw_output))

    def read(
        self, item: Any, round_no: int, completion: Any, state: batches.CachedJudgement | None
    ) -> judge_runs.Answer | None:
        expected = 0 if state is None else state.next_round()
        if round_no != expected:
            return None  # answered before (the same results imported again, or a later round already in)
        output, _finish, prompt_tokens, completion_tokens = read_completion(completion)
        met = parse_judge_output(output)
        return judge_runs.Answer(
            cache_key=item.cache_key,
            response_id=item.response_id,
            criterion_id=item.criterion_id,
            parse_ok=met is not None,
            met=met,
            raw_output=output,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            attempts=round_no + 1,
        )

    def tally(self, answer: judge_runs.Answer, counts: judge_runs.RunCounts) -> None:
        self.job.tally(answer, counts)
        counts.requests += 1
        counts.reasks += int(answer.attempts > 1)
        counts.prompt_tokens += answer.prompt_tokens
        counts.completion_tokens += answer.completion_tokens

    def store(self, session: Session, answers: list[judge_runs.Answer]) -> None:
        batches.write_reasked(session, self.job.run_id, [answer for answer in answers if answer.attempts > 1])
        self.job.store(session, answers)

    def new_decisions(self, answers: list[judge_runs.Answer]) -> int:
        return sum(answer.parse_ok for answer in answers)

    def from_cache(self, engine: Engine, found: list[tuple[Any, batches.CachedJudgement]]) -> list[judge_runs.Answer]:
        """Readable answers of the cache that this judge's decisions lack (as an online run writes its cache hits)."""
        answered = [(item, state) for item, state in found if state.parse_ok and state.met is not None]
        if not answered:
            return []
        with engine.connect() as connection:
            have = batches.decided(connection, self.job.judge, [item.response_id for item, _ in answered])
        return [
            judge_runs.Answer(
                item.cache_key, item.response_id, item.criterion_id, parse_ok=True, met=state.met, from_cache=True
            )
            for item, state in answered
            if have.get((item.response_id, item.criterion_id)) != state.met
        ]


class GenerateBatch:
    """Answering cases: one request each, no re-ask (as online)."""

    kind = "generate"

    def __init__(self, job: GenerateJob) -> None:
        self.job = job

    def chunks(self) -> Iterable[list[Any]]:
        return self.job.chunks()

    def states(self, connection: Connection, keys: list[str]) -> dict[str, Any]:
        return generation.cached_answers(connection, keys)

    def request(self, item: Any, state: Any) -> tuple[int, dict[str, Any]] | None:
        return None if state is not None else (0, self.job.batch_body(item))

    def read(self, item: Any, round_no: int, completion: Any, state: Any) -> generation.Generated | None:
        if state is not None or round_no != 0:
            return None
        return self.job.read(item, completion, attempts=1)

    def tally(self, answer: generation.Generated, counts: judge_runs.RunCounts) -> None:
        self.job.tally(answer, counts)
        counts.requests += 1
        counts.prompt_tokens += answer.prompt_tokens
        counts.completion_tokens += answer.completion_tokens

    def store(self, session: Session, answers: list[generation.Generated]) -> None:
        self.job.store(session, answers)

    def new_decisions(self, answers: list[generation.Generated]) -> int:
        return sum(answer.status == generation.COMPLETE for answer in answers)

    def from_cache(self, engine: Engine, found: list[tuple[Any, Any]]) -> list[generation.Generated]:
        return []  # a cached answer becomes a response when a run under that name asks (`generate`)


# Export -----------------------------------------------------------------------------------------


@dataclass
class Exported:
    """What a batch export wrote (run None: every item was answered, nothing written)."""

    directory: Path
    run: int | None
    requests: int = 0
    reasks: int = 0
    bytes: int = 0
    items: int = 0
    from_cache: int = 0  # decisions written from answers already in the cache (as an online run's cache hits)

    def line(self, kind: str) -> str:
        known = f"; {self.from_cache:,} decisions written from answers already cached" if self.from_cache else ""
        if self.requests == 0:
            what = "item" if kind == "judge" else "case"
            run = f" (run {self.run})" if self.run is not None else ""
            return f"nothing to export: every {what} is answered (the cache){known}{run}"
        return (
            f"{kind} batch run {self.run}: {self.requests:,} requests ({self.reasks:,} re-asks) of "
            f"{self.items:,} items in {self.directory / batch_files.REQUESTS_NAME} ({self.bytes / 1e6:.1f} MB)" + known
        )


def _store_known(engine: Engine, batch: BatchKind, run_id: int, known: list[Any], exported: Exported) -> None:
    """Nothing to send, but cached answers this judge lacks: written as decisions of a run that ends at once."""
    exported.run, exported.from_cache = run_id, len(known)
    with session_scope(engine) as session:
        judge_runs.begin_run(session, run_id, items=len(known), pid=os.getpid(), base_urls=[judge_runs.BATCH_BASE_URL])
    with session_scope(engine) as session:
        batch.store(session, known)
        counts = judge_runs.RunCounts(done=len(known), cached=len(known))
        judge_runs.record_progress(session.connection(), run_id, counts, 0.0)
        said = Said(
            f"{len(known):,} decisions from answers already cached; nothing to export",
            "batch.from_cache",
            n=len(known),
        )
        judge_runs.end_run(session, run_id, JudgeRunStatus.finished, said)


def _pending(
    engine: Engine, batch: BatchKind, cached: list[tuple[Any, Any]]
) -> Iterable[tuple[str, dict[str, Any], int]]:
    """(custom id, body, round) of every item the cache has not answered for good, in item order; the items it
    has answered go to `cached` with what the cache holds."""
    written: set[str] = set()
    for chunk in batch.chunks():
        with engine.connect() as connection:
            states = batch.states(connection, [item.cache_key for item in chunk])
        for item in chunk:
            if item.cache_key in written:
                continue  # two items asking the very same request share one line (and one answer)
            state = states.get(item.cache_key)
            wanted = batch.request(item, state)
            if wanted is None:
                cached.append((item, state))
                continue
            written.add(item.cache_key)
            round_no, body = wanted
            yield batch_files.custom_id(batch.kind, item.cache_key, round_no), body, round_no


def _export(
    engine: Engine,
    directory: Path,
    batch: BatchKind,
    total: int,
    record: Callable[[dict[str, Any]], int],
    manifest: dict[str, Any],
    progress: Progress,
) -> Exported:
    created = not Path(directory).exists()
    directory = batch_files.prepare_directory(directory)
    head = export_head(engine)
    writer = batch_files.RequestsWriter(directory)
    exported = Exported(directory, None, items=total)
    cached: list[tuple[Any, Any]] = []
    try:
        for number, (identifier, body, round_no) in enumerate(_pending(engine, batch, cached), start=1):
            writer.write(identifier, body)
            exported.reasks += int(round_no > 0)
            if number % 5000 == 0:
                progress(number, total, "requests")
    except BaseException:
        writer.discard()
        raise
    known = batch.from_cache(engine, cached)
    if writer.count == 0:
        writer.discard()
        if created:
            directory.rmdir()  # nothing to send: no empty batch folder left behind
        if known:
            _store_known(engine, batch, record({"dir": None, "requests": 0, "reasks": 0}), known, exported)
        return exported
    sha = writer.digest.hexdigest()
    exported.requests, exported.bytes = writer.count, writer.bytes
    described = {"requests": writer.count, "reasks": exported.reasks, "requests_sha256": sha}
    exported.run = record({"dir": str(directory.resolve()), **described})
    if known:
        with session_scope(engine) as session:
            batch.store(session, known)
        exported.from_cache = len(known)
    writer.finish()
    batch_files.write_manifest(
        directory,
        {
            "format": batch_files.FORMAT,
            "kind": batch.kind,
            "run": exported.run,
            **manifest,
            "counts": {
                "requests": writer.count,
                "reasks": exported.reasks,
                "items": total,
                "answered_before": len(cached),
            },
            "sha256": {batch_files.REQUESTS_NAME: sha},
            "url": batch_files.CHAT_URL,
            "audit_head": head,
        },
    )
    progress(writer.count, writer.count, "requests")
    return exported


def _admin_only(engine: Engine, by: User | str) -> None:
    """A person must be an admin (the command line, a plain name, holds the database anyway): asked first,
    before a file is read or written."""
    if isinstance(by, User):
        with session_scope(engine, read_only=True) as session:
            authorize(session, by, JudgeRunPolicy.manage())


def export_judge_batch(
    engine: Engine, directory: Path, options: RunOptions, by: User | str = "cli", progress: Progress = no_progress
) -> Exported:
    """`judge batch export DIR`: the requests of a judge run on `options`, as a file and a recorded run."""
    _admin_only(engine, by)
    options.check_request()
    options.check_selection()
    sha = template_sha256(read_template(options.template))
    actor = by.username if isinstance(by, User) else str(by)
    draft = {"id": 0, "template_sha256": sha, "created_by": actor}
    job = judge_job(engine, draft, options)
    manifest = {"options": _options(options.params()), "template": options.template_file(), "template_sha256": sha}
    return _export(
        engine,
        directory,
        JudgeBatch(job),
        job.total,
        lambda batch: create_run(engine, options, by, batch=batch),
        manifest,
        progress,
    )


def export_generate_batch(
    engine: Engine, directory: Path, options: GenerateOptions, by: User | str = "cli", progress: Progress = no_progress
) -> Exported:
    """`generate batch export DIR`: the requests of a generate run on `options`, as a file and a recorded run."""
    _admin_only(engine, by)
    options.check_request()
    options.check_name()
    if options.cases not in CASE_SCOPES:
        options.case_ids = read_case_file(engine, options.cases)
        options.cases = str(Path(options.cases).resolve())
    sha = hashlib.sha256(options.system_text().encode("utf-8")).hexdigest()
    actor = by.username if isinstance(by, User) else str(by)
    job = generate_job(engine, {"id": 0, "template_sha256": sha, "created_by": actor}, options)
    manifest = {"options": _options(options.params()), "template_sha256": sha}
    return _export(
        engine,
        directory,
        GenerateBatch(job),
        job.total,
        lambda batch: create_generate_run(engine, options, by, batch=batch),
        manifest,
        progress,
    )


def _options(params: dict[str, Any]) -> dict[str, Any]:
    """The options a manifest shows (never a key: only the variable's name is in the options anyway)."""
    return {name: value for name, value in params.items() if name not in ("base_urls", "pid", "case_ids")}


# Import -----------------------------------------------------------------------------------------


@dataclass
class Imported:
    """What an import did: new answers stored, and what it left."""

    run: int
    kind: str
    lines: int = 0
    new: int = 0  # answers stored
    decisions: int = 0  # of them: judge decisions (parsed) or responses (complete)
    parse_failures: int = 0
    errors: int = 0
    already: int = 0  # answered before: nothing to store
    stale: int = 0  # items no longer selected (a rubric or response changed since the export)
    counts: judge_runs.RunCounts = field(default_factory=judge_runs.RunCounts)

    def said(self) -> Said:
        what = "decisions" if self.kind == "judge" else "responses"
        english = (
            f"{self.decisions:,} new {what} from {self.lines:,} lines; {self.parse_failures:,} unreadable, "
            f"{self.errors:,} errors left for a later batch, {self.already:,} answered before, "
            f"{self.stale:,} no longer selected"
        )
        return Said(
            english,
            f"batch.imported.{self.kind}",
            n=self.decisions,
            lines=self.lines,
            unreadable=self.parse_failures,
            errors=self.errors,
            already=self.already,
            stale=self.stale,
        )


def _matched_items(batch: BatchKind, wanted: set[str]) -> dict[str, list[Any]]:
    """Key part of a custom id → the selected items asking that request (usually one)."""
    items: dict[str, list[Any]] = {}
    for chunk in batch.chunks():
        for item in chunk:
            part = item.cache_key[: batch_files.KEY_CHARS]
            if part in wanted:
                items.setdefault(part, []).append(item)
    return items


def _answers(engine: Engine, batch: BatchKind, results: batch_files.Results, imported: Imported) -> list[Any]:
    """The new answers of a checked results file, each item's once; counts what is not new."""
    parts = {batch_files.split_id(identifier)[0] for identifier in results.completions}
    items = _matched_items(batch, parts)
    keys = sorted({item.cache_key for group in items.values() for item in group})
    with engine.connect() as connection:
        states = batch.states(connection, keys)
    imported.errors = len(results.failed)
    answers: list[Any] = []
    for identifier, completion in results.completions.items():
        part, round_no = batch_files.split_id(identifier)
        group = items.get(part)
        if not group:
            imported.stale += 1
            continue
        first = batch.read(group[0], round_no, completion, states.get(group[0].cache_key))
        if first is None:
            imported.already += 1
            continue
        answers.append(first)
        for other in group[1:]:  # items asking the same request take the same answer
            answers.append(_for_item(first, other))
    return answers


def _for_item(answer: Any, item: Any) -> Any:
    if isinstance(answer, judge_runs.Answer):
        return replace(answer, response_id=item.response_id, criterion_id=item.criterion_id)
    return replace(answer, case_pk=item.case_pk, case_id=item.case_id)


def _check_run(run: dict[str, Any], manifest: dict[str, Any], kind: str, directory: Path) -> None:
    batch = (run["params"] or {}).get("batch") or {}
    if (
        run["kind"] != kind
        or batch.get("requests_sha256") != batch_files.requests_sha256(manifest)
        or run["template_sha256"] != manifest.get("template_sha256")
    ):
        raise ValidationFailed(
            f"{directory / batch_files.MANIFEST_NAME}: does not match run {run['id']} of this database",
            key="batch.manifest_mismatch",
            params={"run": run["id"]},
        )


def import_batch(
    engine: Engine,
    kind: str,
    results_path: Path,
    directory: Path,
    progress: Progress = no_progress,
    by: User | str = "cli",
) -> Imported:
    """`judge|generate batch import RESULTS --batch DIR`: checks everything, then stores the new answers."""
    _admin_only(engine, by)
    manifest = batch_files.read_manifest(directory, kind)
    known = batch_files.request_ids(directory, manifest)
    try:
        run = recorded_run(engine, manifest["run"])
    except NotFound as error:
        raise ValidationFailed(
            f"{Path(directory) / batch_files.MANIFEST_NAME}: names run {manifest['run']}, not in this database",
            key="batch.manifest_mismatch",
            params={"run": manifest["run"]},
        ) from error
    _check_run(run, manifest, kind, Path(directory))
    results = batch_files.read_results(Path(results_path), known)
    batch = _batch_of(engine, run)
    imported = Imported(run["id"], kind, lines=results.lines)
    answers = _answers(engine, batch, results, imported)
    imported.new = len(answers)
    imported.decisions = batch.new_decisions(answers)
    for answer in answers:
        batch.tally(answer, imported.counts)
    imported.parse_failures = imported.counts.parse_failures
    if not answers:
        return imported  # nothing new: nothing written, not even the run's record
    _store(engine, batch, run["id"], answers, imported, len(known), progress)
    return imported


def _batch_of(engine: Engine, run: dict[str, Any]) -> BatchKind:
    if run["kind"] == "generate":
        return GenerateBatch(generate_job(engine, run, GenerateOptions.from_record(run)))
    options = RunOptions.from_record(run)
    # Every item of the selected models: a cache key does not depend on --responses or --limit, and the
    # decisions stored since the export (an online run, a first half of this import) must not hide items.
    options.responses, options.limit = "all", None
    return JudgeBatch(judge_job(engine, run, options))


def _store(
    engine: Engine,
    batch: BatchKind,
    run_id: int,
    answers: list[Any],
    imported: Imported,
    requests: int,
    progress: Progress,
) -> None:
    with session_scope(engine) as session:
        judge_runs.begin_run(session, run_id, items=requests, pid=os.getpid(), base_urls=[judge_runs.BATCH_BASE_URL])
    started = time.monotonic()
    for start in range(0, len(answers), STORE_CHUNK):
        chunk = answers[start : start + STORE_CHUNK]
        counts = judge_runs.RunCounts(done=len(chunk))
        for answer in chunk:
            batch.tally(answer, counts)
        now = time.monotonic()
        with session_scope(engine) as session:
            batch.store(session, chunk)
            judge_runs.record_progress(session.connection(), run_id, counts, now - started)
        started = now
        progress(start + len(chunk), len(answers), "answers")
    counts = judge_runs.RunCounts(errors=imported.errors)
    with session_scope(engine) as session:
        judge_runs.record_progress(session.connection(), run_id, counts, 0.0)
        judge_runs.end_run(session, run_id, JudgeRunStatus.finished, imported.said())
