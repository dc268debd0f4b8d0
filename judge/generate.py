"""`clinconsensus generate`: a candidate model answers the cases' user messages through OpenAI-compatible endpoints.

Each case's user message is built as judges and annotators read it (`analysis.prompt.user_message`),
optionally after a system message (`--system FILE`), and sent through the runner core the judge uses
(judge/core.py): endpoints with their own concurrency limits, retries, the cache keyed by a hash of
the request, resume, the run record with each endpoint's share, cancel.

Complete answers become responses of the model named by `--as` (default: the endpoint's model
name), written as importing them would write them (db/importers/responses.py: a fresh code each,
replacements audited). An answer cut at max_tokens (finish_reason `length`) or an empty one is
not stored as a response at all: a fragment stored beside complete answers would reach physicians'
queues and judge runs as if it were the model's answer, and no flag on a response is read by every
one of them. It is kept with its status in the run's cache (`generation_result`) and counted in the
run (`truncated`, `empty`); an answer the response rules refuse (too long) is counted as a parse
failure the same way. A re-run sends nothing: it asks again only with other parameters (a larger
`--max-tokens`), which make another cache key.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from analysis.prompt import user_message
from db.rules.errors import ValidationFailed
from db.rules.limits import InputRejected
from db.rules.progress_report import Progress, no_progress
from db.rules.records import ResponseRecord, check, check_name
from db.store.current_rubric import current_version_ids
from db.store.engine import session_scope
from db.store.models import Case, User
from db.work import generation, judge_runs
from judge.core import CaseJob, Prepared, execute_prepared, recorded_run
from judge.endpoints import Endpoint, EndpointOptions, chat_body, read_completion

CASE_SCOPES = ("all", "released")
NO_SYSTEM = "none"


@dataclass
class GenerateOptions(EndpointOptions):
    """What `generate` asks for; `params()` is what the run record keeps (never the key itself).

    `cases` is all, released, or a file of case ids (one a line), read once when the run is created:
    its ids are kept in `case_ids`, so a resumed run answers the same cases."""

    stored_as: str | None = None
    cases: str = "all"
    case_ids: list[str] = field(default_factory=list)
    system: str | None = None
    max_tokens: int = 4096

    NAME_FIELD: ClassVar[str] = "stored_as"
    PATH_FIELDS: ClassVar[tuple[str, ...]] = ("system",)

    def model_name(self) -> str:
        return (self.stored_as or self.model).strip()

    def check(self) -> None:
        self.check_endpoints()
        self.check_name()

    def check_name(self) -> None:
        """The name the answers are stored as (`--as`)."""
        try:
            check_name("--as", self.model_name(), "model")
        except InputRejected as error:
            raise ValidationFailed(str(error), key=error.key, params=error.params) from None

    def system_text(self) -> str:
        if not self.system:
            return ""
        try:
            return Path(self.system).read_text(encoding="utf-8").strip()
        except (FileNotFoundError, IsADirectoryError):
            raise ValidationFailed(f"--system {self.system}: no such file") from None
        except UnicodeDecodeError as error:
            raise ValidationFailed(f"--system {self.system}: not UTF-8 text ({error.reason})") from None


def read_case_file(engine: Engine, path: str) -> list[str]:
    """The case ids of a file, one a line (blank lines skipped), each a known case; one-line errors."""
    file = Path(path)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise ValidationFailed(f"--cases {path}: no such file (or all, released)") from None
    except UnicodeDecodeError as error:
        raise ValidationFailed(f"--cases {path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    with session_scope(engine, read_only=True) as session:
        known = set(session.execute(select(col(Case.case_id))).scalars().all())
    ids: list[str] = []
    for number, line in enumerate(lines, start=1):
        case_id = line.strip()
        if not case_id:
            continue
        if case_id not in known:
            raise ValidationFailed(f"{file.name} line {number}: unknown case id {case_id[:80]!r}")
        if case_id not in ids:
            ids.append(case_id)
    if not ids:
        raise ValidationFailed(f"--cases {path}: no case ids in the file")
    return ids


def create_generate_run(
    engine: Engine, options: GenerateOptions, by: User | str = "cli", batch: dict | None = None
) -> int:
    """Check the options and record a new generate run (status pending); returns its id.

    `batch` (what a batch export records of itself) makes the run a batch's: no endpoint, answered by an import."""
    if batch is None:
        options.check()
    else:
        options.check_request()
        options.check_name()
    if options.cases not in CASE_SCOPES:
        options.case_ids = read_case_file(engine, options.cases)
        options.cases = str(Path(options.cases).resolve())
    system = options.system_text()
    params = options.params() if batch is None else {**options.params(), "base_urls": [], "batch": batch}
    with session_scope(engine) as session:
        run = judge_runs.create_run(
            session,
            by,
            judge=options.model_name(),
            base_url=options.urls()[0] if batch is None else judge_runs.BATCH_BASE_URL,
            model=options.model,
            template=Path(options.system).name if options.system else NO_SYSTEM,
            template_sha256=hashlib.sha256(system.encode("utf-8")).hexdigest(),
            params=params,
            kind="generate",
        )
        assert run.id is not None  # flushed
        return run.id


@dataclass
class CaseItem:
    case_pk: int
    case_id: str
    cache_key: str
    messages: list[dict[str, str]]


def canonical_request(model: str, messages: list[dict[str, str]], parameters: dict) -> str:
    """The text whose sha256 is a case's cache key (sorted keys, no spaces, UTF-8 as is)."""
    return json.dumps(
        {"messages": messages, "model": model, "parameters": parameters},
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )


class GenerateJob(CaseJob):
    """Answering: one item per selected case, one request each."""

    def __init__(self, engine: Engine, options: GenerateOptions, run_id: int, actor: str, system: str) -> None:
        self.options, self.run_id, self.actor = options, run_id, actor
        self.stored_as = options.model_name()
        self.request = options.request()
        parameters = options.key_parameters()
        items = []
        for case_pk, case_id, context, request in _selected_cases(engine, options):
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": user_message(context, request)})
            key = hashlib.sha256(canonical_request(options.model, messages, parameters).encode("utf-8")).hexdigest()
            items.append(CaseItem(case_pk, case_id, key, messages))
        super().__init__(items)

    def lookup(self, connection: Connection, keys: list[str]) -> dict:
        return generation.cached_answers(connection, keys)

    def cached(self, item: CaseItem, hit: tuple) -> generation.Generated:
        status, text, finish_reason = hit
        return generation.Generated(
            item.cache_key, item.case_pk, item.case_id, status, text, finish_reason, from_cache=True
        )

    def tally(self, answer: generation.Generated, counts: judge_runs.RunCounts) -> None:
        if answer.status == generation.TRUNCATED:
            counts.truncated += 1
        elif answer.status == generation.EMPTY:
            counts.empty += 1
        elif answer.status == generation.REFUSED:
            counts.parse_failures += 1

    def store(self, session: Session, answers: list[generation.Generated]) -> None:
        generation.store_generated(session, self.run_id, self.stored_as, self.actor, answers)

    def batch_body(self, item: CaseItem) -> dict[str, Any]:
        """The body an online run sends for this case."""
        return chat_body(self.request, item.messages)

    def read(self, item: CaseItem, completion: Any, attempts: int, latency_ms: float = 0.0) -> generation.Generated:
        """A case's answer out of a chat completion, online or from a batch's results."""
        text, finish_reason, prompt_tokens, completion_tokens = read_completion(completion)
        return generation.Generated(
            cache_key=item.cache_key,
            case_pk=item.case_pk,
            case_id=item.case_id,
            status=self._status(item, text, finish_reason),
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=latency_ms,
            attempts=attempts,
        )

    async def answer(self, item: CaseItem, endpoint: Endpoint) -> generation.Generated | None:
        started = time.perf_counter()
        completion, spent = await endpoint.complete(self.request, item.messages)
        if completion is None:
            return None
        answer = self.read(item, completion, spent, (time.perf_counter() - started) * 1000)
        endpoint.counts.prompt_tokens += answer.prompt_tokens
        endpoint.counts.completion_tokens += answer.completion_tokens
        return answer

    def _status(self, item: CaseItem, text: str, finish_reason: str | None) -> str:
        if finish_reason == "length":
            return generation.TRUNCATED
        if not text.strip():
            return generation.EMPTY
        _record, errors = check(ResponseRecord, {"case_id": item.case_id, "model": self.stored_as, "response": text})
        return generation.REFUSED if errors else generation.COMPLETE


def _selected_cases(engine: Engine, options: GenerateOptions) -> list[tuple[Any, ...]]:
    """(case_pk, case_id, clinical_context, user_request) of the selected cases, in case order."""
    query = select(col(Case.id), col(Case.case_id), col(Case.clinical_context), col(Case.user_request)).order_by(
        col(Case.id)
    )
    with session_scope(engine, read_only=True) as session:
        rows = [tuple(row) for row in session.execute(query)]
        released = set(current_version_ids(session)) if options.cases == "released" else None
    if released is not None:
        return [row for row in rows if row[0] in released]
    if options.case_ids:
        wanted = set(options.case_ids)
        return [row for row in rows if row[1] in wanted]
    return rows


def prepare(engine: Engine, run: dict) -> Prepared:
    """A recorded generate run made ready (its system file must not have changed since)."""
    if (run["params"] or {}).get("batch"):
        raise ValidationFailed(
            f"run {run['id']} is a batch: import its results with `generate batch import`",
            key="batch.not_online",
            params={"run": run["id"], "kind": run["kind"]},
        )
    options = GenerateOptions.from_record(run)
    options.check()
    return Prepared(options, generate_job(engine, run, options))


def generate_job(engine: Engine, run: dict, options: GenerateOptions) -> GenerateJob:
    """The job of a recorded generate run (online or batch); its system file must not have changed since."""
    system = options.system_text()
    if hashlib.sha256(system.encode("utf-8")).hexdigest() != run["template_sha256"]:
        raise ValidationFailed(
            f"generate run {run['id']}: its system file changed since the run was recorded (start a new run)",
            key="judge.message.system_changed",
            params={"run": run["id"]},
        )
    return GenerateJob(engine, options, run["id"], run["created_by"], system)


def run_generate(
    engine: Engine, options: GenerateOptions, by: User | str = "cli", progress: Progress = no_progress
) -> dict:
    """Record and execute a generate run in one go (the command line's `generate`)."""
    run = recorded_run(engine, create_generate_run(engine, options, by))
    return execute_prepared(engine, run["id"], lambda: prepare(engine, run), progress)
