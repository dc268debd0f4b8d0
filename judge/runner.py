"""`clinconsensus judge run`: grade responses criterion by criterion through OpenAI-compatible endpoints.

The official `openai` SDK's async client talks to each endpoint (vLLM, SGLang, Ollama, a hosted API);
the run's machinery (endpoints with their own concurrency limits, retries, the cache, resume, the
record, cancel) is the core both kinds of run share (judge/core.py, judge/endpoints.py). An answer
without a readable `criteria_met` is re-asked at most twice, on the same endpoint. Requests use
temperature 0 and a seed. Structured JSON output is not asked for with the official template (the
official judge was trained to answer in a fenced json block) unless `--structured on`; with other
templates it is asked for where the server supports it (`auto` drops it after a server's first
refusal); the official regex reads the answer either way.

Every answer is kept in the result cache under a hash of (model, messages, parameters) before its
decision is written, a few times a second, so a re-run sends nothing already answered and a run
that was killed resumes where it stopped. The API key is read from the environment variable the
run names; only the variable's name is recorded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from analysis.prompt import (
    DEFAULT_TEMPLATE_NAME,
    TEMPLATES,
    parse_judge_output,
    read_template,
    template_name,
    template_sha256,
)
from db.rules.errors import ValidationFailed
from db.rules.progress_report import Progress, no_progress
from db.store.engine import session_scope
from db.store.models import User
from db.work import judge_runs
from db.work.batches import MAX_REASKS
from judge import generate
from judge.core import Prepared, execute_prepared, launch_run, recorded_run
from judge.endpoints import DEFAULT_SEED, Endpoint, EndpointOptions, RunFailed, chat_body, read_completion
from judge.items import RESPONSE_SCOPES, Item, ItemSource

__all__ = ["DEFAULT_SEED", "RunFailed", "RunOptions", "create_run", "execute_run", "launch_run", "run_judge"]

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


@dataclass
class RunOptions(EndpointOptions):
    """What `judge run` asks for; `params()` is what the run record keeps (never the key itself).

    `structured` None means the default: off with the official template, auto with any other."""

    judge: str | None = None
    template: str = DEFAULT_TEMPLATE_NAME
    responses: str = "all"
    models: list[str] = field(default_factory=list)
    limit: int | None = None
    structured: str | None = None

    NAME_FIELD: ClassVar[str] = "judge"

    def __post_init__(self) -> None:
        if self.structured is None:
            self.structured = "off" if (self.template or DEFAULT_TEMPLATE_NAME) == DEFAULT_TEMPLATE_NAME else "auto"

    def check(self) -> None:
        self.check_endpoints()
        self.check_selection()

    def check_selection(self) -> None:
        """The checks of what is graded and how, endpoints aside (a batch export has none)."""
        if self.responses not in RESPONSE_SCOPES:
            raise ValidationFailed(f"--responses {self.responses!r}: expected all or missing")
        if self.structured not in STRUCTURED_MODES:
            raise ValidationFailed(f"--structured {self.structured!r}: expected auto, on or off")
        if self.limit is not None and self.limit < 1:
            raise ValidationFailed(f"--limit {self.limit}: expected a whole number of at least 1")

    def judge_name(self) -> str:
        return (self.judge or self.model).strip()

    def template_file(self) -> str:
        """The template as the record keeps it: official, zh, or the file's absolute path."""
        return self.template if self.template in TEMPLATES else str(Path(self.template).resolve())

    def params(self) -> dict:
        return {**super().params(), "template": self.template_file()}

    def key_parameters(self) -> dict:
        return {**super().key_parameters(), "structured": self.structured}


def create_run(engine: Engine, options: RunOptions, by: User | str = "cli", batch: dict | None = None) -> int:
    """Check the options and record a new run (status pending); returns its id.

    `batch` (what a batch export records of itself) makes the run a batch's: no endpoint, answered by an import."""
    if batch is None:
        options.check()
    else:
        options.check_request()
        options.check_selection()
    template = read_template(options.template)
    params = options.params() if batch is None else {**options.params(), "base_urls": [], "batch": batch}
    with session_scope(engine) as session:
        run = judge_runs.create_run(
            session,
            by,
            judge=options.judge_name(),
            base_url=options.urls()[0] if batch is None else judge_runs.BATCH_BASE_URL,
            model=options.model,
            template=template_name(options.template),
            template_sha256=template_sha256(template),
            params=params,
        )
        assert run.id is not None  # flushed
        return run.id


# The run itself ---------------------------------------------------------------------------------


class JudgeJob:
    """Grading: the items of an ItemSource, each answered with at most MAX_REASKS re-asks."""

    def __init__(self, options: RunOptions, source: ItemSource, run_id: int, actor: str) -> None:
        self.options, self.source, self.run_id, self.actor = options, source, run_id, actor
        self.judge = options.judge_name()
        self.total = source.total
        self.request = options.request()

    def chunks(self):
        return self.source.chunks()

    def lookup(self, connection: Connection, keys: list[str]) -> dict:
        return judge_runs.cached_results(connection, keys)

    def cached(self, item: Item, hit: tuple) -> judge_runs.Answer:
        return judge_runs.Answer(
            item.cache_key, item.response_id, item.criterion_id, parse_ok=hit[2], met=hit[3], from_cache=True
        )

    def tally(self, answer: judge_runs.Answer, counts: judge_runs.RunCounts) -> None:
        if not answer.parse_ok:
            counts.parse_failures += 1

    def store(self, session: Session, answers: list[judge_runs.Answer]) -> None:
        judge_runs.store_answers(session, self.run_id, self.judge, self.actor, answers)

    def messages(self, item: Item, unreadable: str | None = None) -> list[dict[str, Any]]:
        """An item's conversation: its prompt, or (after an unreadable answer) the prompt, that answer, the re-ask."""
        prompt: dict[str, Any] = {"role": "user", "content": self.source.prompt(item)}
        if unreadable is None:
            return [prompt]
        return [prompt, {"role": "assistant", "content": unreadable}, {"role": "user", "content": REASK_TEXT}]

    def batch_body(self, item: Item, unreadable: str | None = None) -> dict[str, Any]:
        """The body an online run sends for this item (structured output asked for unless the run says off)."""
        schema = JUDGEMENT_SCHEMA if self.options.structured in ("auto", "on") else None
        return chat_body(self.request, self.messages(item, unreadable), schema)

    async def answer(self, item: Item, endpoint: Endpoint) -> judge_runs.Answer | None:
        messages = self.messages(item)
        started = time.perf_counter()
        attempts = prompt_tokens = completion_tokens = 0
        output, met = "", None
        for round_no in range(MAX_REASKS + 1):
            completion, spent = await endpoint.complete(self.request, messages, JUDGEMENT_SCHEMA)
            attempts += spent
            if completion is None:
                return None  # not answered: counted as an error, not cached, sent again by the next run
            output, _finish, prompt_spent, completion_spent = read_completion(completion)
            prompt_tokens += prompt_spent
            completion_tokens += completion_spent
            met = parse_judge_output(output)
            if met is not None or round_no == MAX_REASKS:
                break
            endpoint.counts.reasks += 1
            messages = self.messages(item, output)
        endpoint.counts.prompt_tokens += prompt_tokens
        endpoint.counts.completion_tokens += completion_tokens
        return judge_runs.Answer(
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


def execute_run(engine: Engine, run_id: int, progress: Progress = no_progress) -> dict:
    """Run (or resume) the recorded run `run_id`, judge or generate, to its end; returns its summary."""
    run = recorded_run(engine, run_id)
    if run["kind"] == "generate":
        return execute_prepared(engine, run_id, lambda: generate.prepare(engine, run), progress)
    if run["kind"] == "draft":
        from judge import draft

        return execute_prepared(engine, run_id, lambda: draft.prepare(engine, run), progress)
    return execute_prepared(engine, run_id, lambda: _prepare(engine, run), progress)


def _prepare(engine: Engine, run: dict) -> Prepared:
    refuse_batch_resume(run)
    options = RunOptions.from_record(run)
    options.check()
    return Prepared(options, judge_job(engine, run, options), options.structured)


def refuse_batch_resume(run: dict) -> None:
    """A batch's run is answered by importing its results file, never sent online."""
    if (run["params"] or {}).get("batch"):
        raise ValidationFailed(
            f"run {run['id']} is a batch: import its results with `{run['kind']} batch import`",
            key="batch.not_online",
            params={"run": run["id"], "kind": run["kind"]},
        )


def judge_job(engine: Engine, run: dict, options: RunOptions) -> JudgeJob:
    """The job of a recorded judge run (online or batch); its template must not have changed since."""
    template = read_template(options.template)
    if template_sha256(template) != run["template_sha256"]:
        raise ValidationFailed(
            f"judge run {run['id']}: its template file changed since the run was recorded (start a new run)",
            key="judge.message.template_changed",
            params={"run": run["id"]},
        )
    source = ItemSource(
        engine,
        judge=options.judge_name(),
        model=options.model,
        template=template,
        parameters=options.key_parameters(),
        responses=options.responses,
        models=options.models or None,
        limit=options.limit,
    )
    return JudgeJob(options, source, run["id"], run["created_by"])


def run_judge(engine: Engine, options: RunOptions, by: User | str = "cli", progress: Progress = no_progress) -> dict:
    """Record and execute a run in one go (the command line's `judge run`)."""
    return execute_run(engine, create_run(engine, options, by), progress)
