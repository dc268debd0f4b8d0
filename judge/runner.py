"""`clinconsensus judge run`: grade responses criterion by criterion through an OpenAI-compatible endpoint.

The official `openai` SDK's async client talks to the endpoint (vLLM, SGLang, Ollama, a hosted API).
At most `concurrency` items are in flight (a semaphore per endpoint); the SDK retries 429 and 5xx
answers (`max_retries`, honouring retry-after); an answer without a readable `criteria_met` is
re-asked at most twice. Requests use temperature 0 and a seed; structured JSON output is asked for
where the server supports it (`--structured auto` drops it after the server's first refusal), and
the official regex reads the answer either way.

Every answer is kept in the result cache under a hash of (model, messages, parameters) before its
decision is written, a few times a second, so a re-run sends nothing already answered and a run
that was killed resumes where it stopped. The API key is read from the environment variable the
run names; only the variable's name is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import openai
from sqlalchemy.engine import Engine

from analysis.prompt import (
    DEFAULT_TEMPLATE_NAME,
    TEMPLATES,
    parse_judge_output,
    read_template,
    template_name,
    template_sha256,
)
from db import judge_runs
from db.engine import session_scope
from db.errors import ClinConsensusError, ValidationFailed
from db.models import JudgeRunStatus, User
from db.progress import Progress, no_progress
from judge.api_keys import api_key
from judge.items import RESPONSE_SCOPES, ItemSource

DEFAULT_SEED = 20260101
MAX_REASKS = 2
FLUSH_SECONDS = 0.5
STRUCTURED_MODES = ("auto", "on", "off")
REASK_TEXT = (
    "Your answer could not be read. Reply again with ONLY the JSON object in a markdown code block: "
    '```json\n{"explanation": "...", "criteria_met": true/false}\n```'
)
JUDGEMENT_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "rubric_judgement",
        "strict": True,
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["explanation", "criteria_met"],
            "properties": {"explanation": {"type": "string"}, "criteria_met": {"type": "boolean"}},
        },
    },
}
PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: Refusals that no retry can mend: the whole run stops with the endpoint's reason.
FATAL_STATUSES = (401, 403, 404)


class RunFailed(ClinConsensusError):
    """The endpoint refused the run as a whole (bad key, unknown model, wrong URL)."""


@dataclass
class RunOptions:
    """What `judge run` asks for; `params()` is what the run record keeps (never the key itself)."""

    base_url: str
    model: str
    judge: str | None = None
    api_key_env: str | None = None
    concurrency: int = 8
    template: str = DEFAULT_TEMPLATE_NAME
    responses: str = "all"
    models: list[str] = field(default_factory=list)
    limit: int | None = None
    temperature: float = 0.0
    seed: int = DEFAULT_SEED
    max_tokens: int = 512
    thinking: bool = True
    structured: str = "auto"
    timeout: float = 120.0
    max_retries: int = 2

    def check(self) -> None:
        parsed = urlparse(self.base_url or "")
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValidationFailed(
                f"--base-url {self.base_url!r}: expected an http(s) URL such as http://localhost:8000/v1"
            )
        if not (self.model or "").strip():
            raise ValidationFailed("--model: give the model name the endpoint serves")
        if not 1 <= int(self.concurrency) <= 512:
            raise ValidationFailed(f"--concurrency {self.concurrency}: expected 1 to 512")
        if self.responses not in RESPONSE_SCOPES:
            raise ValidationFailed(f"--responses {self.responses!r}: expected all or missing")
        if self.structured not in STRUCTURED_MODES:
            raise ValidationFailed(f"--structured {self.structured!r}: expected auto, on or off")
        if self.limit is not None and self.limit < 1:
            raise ValidationFailed(f"--limit {self.limit}: expected a whole number of at least 1")
        if not 0 <= self.max_retries <= 10:
            raise ValidationFailed(f"--max-retries {self.max_retries}: expected 0 to 10")
        if self.timeout <= 0:
            raise ValidationFailed(f"--timeout {self.timeout}: expected a positive number of seconds")
        api_key(self.api_key_env)

    def judge_name(self) -> str:
        return (self.judge or self.model).strip()

    def template_file(self) -> str:
        """The template as the record keeps it: official, zh, or the file's absolute path."""
        return self.template if self.template in TEMPLATES else str(Path(self.template).resolve())

    def params(self) -> dict:
        values = asdict(self)
        for name in ("base_url", "model", "judge"):
            values.pop(name)
        values["template"] = self.template_file()
        return values

    def key_parameters(self) -> dict:
        """The request parameters an answer depends on (part of the cache key)."""
        return {
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "structured": self.structured,
            "temperature": self.temperature,
            "thinking": self.thinking,
        }

    @classmethod
    def from_record(cls, run) -> RunOptions:
        params = {key: value for key, value in (run.params or {}).items() if key in cls.__dataclass_fields__}
        return cls(base_url=run.base_url, model=run.model, judge=run.judge, **params)


def create_run(engine: Engine, options: RunOptions, by: User | str = "cli") -> int:
    """Check the options and record a new run (status pending); returns its id."""
    options.check()
    template = read_template(options.template)
    with session_scope(engine) as session:
        run = judge_runs.create_run(
            session,
            by,
            judge=options.judge_name(),
            base_url=options.base_url,
            model=options.model,
            template=template_name(options.template),
            template_sha256=template_sha256(template),
            params=options.params(),
        )
        assert run.id is not None  # flushed
        return run.id


# The run itself ---------------------------------------------------------------------------------


@dataclass
class _Outcome:
    status: str = JudgeRunStatus.finished
    message: str | None = None


class _Pass:
    """One execution of a run: the client, the counters, the answers waiting to be written."""

    def __init__(
        self, engine: Engine, run_id: int, options: RunOptions, source: ItemSource, actor: str, progress: Progress
    ) -> None:
        self.engine = engine
        self.run_id = run_id
        self.options = options
        self.source = source
        self.actor = actor
        self.progress = progress
        self.judge = options.judge_name()
        self.counts = judge_runs.RunCounts()
        self.pending: list[judge_runs.Answer] = []
        self.done_total = 0
        self.stop = asyncio.Event()
        self.outcome = _Outcome()
        self.structured = options.structured != "off"
        self.last_flush = time.monotonic()
        self.flush_lock = asyncio.Lock()
        extra = {} if options.thinking else {"chat_template_kwargs": {"enable_thinking": False}}
        self.request: dict[str, Any] = {
            "model": options.model,
            "temperature": options.temperature,
            "seed": options.seed,
            "max_tokens": options.max_tokens,
        }
        if extra:
            self.request["extra_body"] = extra
        self.client = openai.AsyncOpenAI(
            base_url=options.base_url,
            api_key=api_key(options.api_key_env) or "none",
            max_retries=options.max_retries,
            timeout=options.timeout,
        )
        # Items in flight (each holds its slot through its re-asks) and requests in flight to this endpoint.
        self.slots = asyncio.Semaphore(options.concurrency)
        self.endpoint = asyncio.Semaphore(options.concurrency)
        self.reached = False  # some request was answered
        self.unreachable = 0  # requests that found no server

    # talking to the endpoint ------------------------------------------------------------------

    async def _complete(self, messages: list[dict]) -> tuple[Any, int]:
        """(chat completion, HTTP requests spent) — SDK retries included; None when the endpoint failed."""
        spent = 0
        while True:
            kwargs: dict[str, Any] = dict(self.request, messages=messages)
            if self.structured:
                kwargs["response_format"] = JUDGEMENT_SCHEMA
            try:
                async with self.endpoint:
                    raw = await self.client.chat.completions.with_raw_response.create(**kwargs)
            except openai.BadRequestError as error:
                spent += 1
                self.counts.requests += 1
                if self.structured and self.options.structured == "auto":
                    self.structured = False  # the server does not take response_format: ask plainly from now on
                    continue
                raise RunFailed(f"the endpoint refused the request: {_reason(error)}") from None
            except openai.APIStatusError as error:
                if error.status_code in FATAL_STATUSES:
                    self.counts.requests += 1
                    raise RunFailed(
                        f"the endpoint refused the request ({error.status_code}): {_reason(error)}"
                    ) from None
                return None, spent + self._failed_request(error)
            except (openai.APIConnectionError, openai.APITimeoutError) as error:
                return None, spent + self._failed_request(error)
            self.counts.requests += 1 + raw.retries_taken
            self.counts.retries += raw.retries_taken
            self.reached = True
            return raw.parse(), spent + 1 + raw.retries_taken

    def _failed_request(self, error: Exception) -> int:
        retries = self.options.max_retries
        self.counts.requests += 1 + retries
        self.counts.retries += retries
        self.counts.errors += 1
        if isinstance(error, openai.APIConnectionError) and not isinstance(error, openai.APITimeoutError):
            self.unreachable += 1
            # Nothing ever answered and every slot failed to connect: a wrong URL or a server that is down.
            if not self.reached and self.unreachable >= min(self.options.concurrency, 3):
                raise RunFailed(f"cannot reach the endpoint {self.options.base_url}: {_reason(error)}")
        if self.outcome.message is None:
            self.outcome.message = f"some items failed after {retries} retries: {_reason(error)}"
        return 1 + retries

    async def _grade(self, item) -> None:
        prompt = self.source.prompt(item)
        messages = [{"role": "user", "content": prompt}]
        started = time.perf_counter()
        attempts = prompt_tokens = completion_tokens = 0
        output, met = "", None
        for round_no in range(MAX_REASKS + 1):
            completion, spent = await self._complete(messages)
            attempts += spent
            if completion is None:
                return  # not answered: counted as an error, not cached, sent again by the next run
            usage = completion.usage
            if usage is not None:
                prompt_tokens += usage.prompt_tokens or 0
                completion_tokens += usage.completion_tokens or 0
            output = (completion.choices[0].message.content or "") if completion.choices else ""
            met = parse_judge_output(output)
            if met is not None or round_no == MAX_REASKS or self.stop.is_set():
                break
            self.counts.reasks += 1
            messages = [messages[0], {"role": "assistant", "content": output}, {"role": "user", "content": REASK_TEXT}]
        self.counts.prompt_tokens += prompt_tokens
        self.counts.completion_tokens += completion_tokens
        self._record(
            judge_runs.Answer(
                cache_key=item.cache_key,
                response_id=item.response_id,
                criterion_id=item.criterion_id,
                parse_ok=met is not None,
                met=met,
                raw_output=output,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_ms=(time.perf_counter() - started) * 1000,
                attempts=attempts,
            )
        )

    def _record(self, answer: judge_runs.Answer) -> None:
        self.pending.append(answer)
        self.counts.done += 1
        self.done_total += 1
        if answer.from_cache:
            self.counts.cached += 1
        if not answer.parse_ok:
            self.counts.parse_failures += 1

    # writing ----------------------------------------------------------------------------------

    def _store(self, answers: list[judge_runs.Answer], counts: judge_runs.RunCounts, seconds: float) -> bool:
        with session_scope(self.engine) as session:
            if answers:
                judge_runs.store_answers(session, self.run_id, self.judge, self.actor, answers)
            return judge_runs.record_progress(session.connection(), self.run_id, counts, seconds)

    async def flush(self) -> None:
        async with self.flush_lock:
            answers, self.pending = self.pending, []
            counts = self.counts.take()
            now = time.monotonic()
            seconds, self.last_flush = now - self.last_flush, now
            cancel = await asyncio.to_thread(self._store, answers, counts, seconds)
            self.progress(self.done_total, self.source.total, "items")
            if cancel and not self.stop.is_set():
                self.outcome = _Outcome(JudgeRunStatus.cancelled, "cancelled on request")
                self.stop.set()

    async def _flusher(self) -> None:
        while not self.stop.is_set():
            try:
                await asyncio.wait_for(self.stop.wait(), FLUSH_SECONDS)
            except TimeoutError:
                await self.flush()

    # the pass ---------------------------------------------------------------------------------

    async def execute(self) -> _Outcome:
        flusher = asyncio.create_task(self._flusher())
        tasks: set[asyncio.Task] = set()
        failure: list[BaseException] = []

        def finished(task: asyncio.Task) -> None:
            tasks.discard(task)
            self.slots.release()
            error = None if task.cancelled() else task.exception()
            if error is not None:
                failure.append(error)
                self.stop.set()

        try:
            for chunk in self.source.chunks():
                if self.stop.is_set():
                    break
                hits = await asyncio.to_thread(self._lookup, [item.cache_key for item in chunk])
                for item in chunk:
                    hit = hits.get(item.cache_key)
                    if hit is not None:
                        self._record(
                            judge_runs.Answer(
                                item.cache_key,
                                item.response_id,
                                item.criterion_id,
                                parse_ok=hit[2],
                                met=hit[3],
                                from_cache=True,
                            )
                        )
                        continue
                    await self.slots.acquire()
                    if self.stop.is_set():
                        self.slots.release()
                        break
                    task = asyncio.create_task(self._grade(item))
                    tasks.add(task)
                    task.add_done_callback(finished)
                await asyncio.sleep(0)
            if tasks:
                await asyncio.wait(set(tasks))
        except asyncio.CancelledError:
            self.outcome = _Outcome(JudgeRunStatus.cancelled, "interrupted")
        finally:
            for task in list(tasks):
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            self.stop.set()
            await flusher
            await self.flush()
            await self.client.close()
        if failure:
            error = failure[0]
            reason = str(error) if isinstance(error, ClinConsensusError) else f"{type(error).__name__}: {error}"
            self.outcome = _Outcome(JudgeRunStatus.failed, reason)
        return self.outcome

    def _lookup(self, keys: list[str]) -> dict:
        with self.engine.connect() as connection:
            return judge_runs.cached_results(connection, keys)


def _reason(error: Exception) -> str:
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    return " ".join(str(text).split())[:300]


def execute_run(engine: Engine, run_id: int, progress: Progress = no_progress) -> dict:
    """Run (or resume) the recorded run `run_id` to its end; returns its summary (as `judge runs` shows it)."""
    with session_scope(engine, read_only=True) as session:
        run = judge_runs.get_run(session, "cli", run_id)
        options = RunOptions.from_record(run)
        actor, recorded_sha = run.created_by, run.template_sha256
    try:
        source = _prepare(engine, run_id, options, recorded_sha)
    except ClinConsensusError as error:
        with session_scope(engine) as session:  # the record says why (a page started it in the background)
            judge_runs.end_run(session, run_id, JudgeRunStatus.failed, str(error))
        raise
    with session_scope(engine) as session:
        judge_runs.begin_run(session, run_id, items=source.total, pid=os.getpid())
    outcome = asyncio.run(_main(engine, run_id, options, source, actor, progress))
    with session_scope(engine) as session:
        judge_runs.end_run(session, run_id, outcome.status, outcome.message)
    with session_scope(engine, read_only=True) as session:
        return judge_runs.run_summary(judge_runs.get_run(session, "cli", run_id))


def _prepare(engine: Engine, run_id: int, options: RunOptions, recorded_sha: str) -> ItemSource:
    options.check()
    template = read_template(options.template)
    if template_sha256(template) != recorded_sha:
        raise ValidationFailed(
            f"judge run {run_id}: its template file changed since the run was recorded (start a new run)"
        )
    return ItemSource(
        engine,
        judge=options.judge_name(),
        model=options.model,
        template=template,
        parameters=options.key_parameters(),
        responses=options.responses,
        models=options.models or None,
        limit=options.limit,
    )


async def _main(engine, run_id, options, source, actor, progress) -> _Outcome:
    run = _Pass(engine, run_id, options, source, actor, progress)
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        # Outside the main thread (a page's worker) there are no signal handlers: its cancel flag stops it.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal_number, lambda: _interrupt(run, task))
    return await run.execute()


def _interrupt(run: _Pass, task) -> None:
    run.outcome = _Outcome(JudgeRunStatus.cancelled, "interrupted")
    run.stop.set()


def launch_run(run_id: int, database_url: str) -> int:
    """Execute a recorded run in a process of its own (`clinconsensus judge resume ID`); returns its pid.

    The process outlives the page that started it; the page follows it through the run record and
    stops it through the record's cancel flag. It reads the API key from its own environment.
    """
    command = [sys.executable, "-m", "cli.main", "judge", "resume", str(run_id)]
    process = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DATABASE_URL": database_url},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return process.pid


def run_judge(engine: Engine, options: RunOptions, by: User | str = "cli", progress: Progress = no_progress) -> dict:
    """Record and execute a run in one go (the command line's `judge run`)."""
    return execute_run(engine, create_run(engine, options, by), progress)
