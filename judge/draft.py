"""`clinconsensus draft rubrics`: an LLM drafts N criteria per case, for the case's author to work from.

The prompt is a template file an admin can change (`--template FILE`; default
judge/templates/draft_rubric_zh.txt), a Python `str.format` text with the fields {n},
{clinical_context}, {user_request}, {reference} (the case's reference answer, or empty) and {tags}
(the failure tags an item may carry); literal braces doubled. The answer is read as JSON
`[{"criterion": str, "tags": [str]?}]` (db.rules.drafting.read_draft); an answer holding no JSON list is
re-asked at most twice on the same endpoint; duplicates, items beyond N, invalid items, over-long
texts and control characters are dropped or cleaned and counted; fewer than N are kept as they are.

The run goes through the runner core judge and generate use (judge/core.py): endpoints with their own
concurrency, retries, the cache keyed by a hash of the request (the draft itself is the cached row,
db/work/drafting.py), resume (`judge resume ID`), progress, cancel. A draft is never submitted: it waits
on the authoring page of the case's assigned author (docs/REFERENCE.md §4.3).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from string import Formatter
from typing import Any, ClassVar

from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col, select

from db.rules.config import RUBRIC_SIZE
from db.rules.drafting import read_draft
from db.rules.errors import ValidationFailed
from db.rules.limits import InputRejected
from db.rules.progress_report import Progress, no_progress
from db.rules.records import check_name
from db.rules.taxonomy import get_taxonomy
from db.store.engine import session_scope
from db.store.models import Case, RubricDraft, User
from db.work import drafting, judge_runs
from judge.core import CaseJob, Prepared, execute_prepared, recorded_run
from judge.endpoints import Endpoint, EndpointOptions
from judge.generate import canonical_request, read_case_file

DEFAULT_TEMPLATE = Path(__file__).resolve().parent / "templates" / "draft_rubric_zh.txt"
DEFAULT_TEMPLATE_NAME = "default"
CASE_SCOPES = ("missing", "all")
FIELDS = ("n", "clinical_context", "user_request", "reference", "tags")
REQUIRED_FIELDS = ("clinical_context", "user_request")
MAX_REASKS = 2
REASK_TEXT = (
    '你的回答无法读取。请只输出一个 JSON 数组，不要其他文字：[{{"criterion": "……", "tags": []}}, …]，恰好 {n} 条。'
)


def reference_answer(case: Case) -> str:
    """The case's reference answer where one is kept (docs/REFERENCE.md §3.1), else empty."""
    kept = getattr(case, "reference_answer", None)
    if isinstance(kept, str):
        return kept
    extra = case.extra or {}
    value = extra.get("reference_answer") if isinstance(extra, dict) else None
    return value if isinstance(value, str) else ""


def read_draft_template(choice: str | None) -> str:
    """The text of the template (None or "default": the shipped one), its fields checked; one-line errors."""
    path = DEFAULT_TEMPLATE if choice in (None, "", DEFAULT_TEMPLATE_NAME) else Path(str(choice))
    try:
        template = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise ValidationFailed(f"--template {path}: no such file", key="drafts.template_missing") from None
    except UnicodeDecodeError as error:
        raise ValidationFailed(f"--template {path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    try:
        named = {name for _text, name, _spec, _conv in Formatter().parse(template) if name is not None}
    except ValueError as error:
        raise ValidationFailed(f"--template {path}: {error} (literal braces are doubled: {{{{ }}}})") from None
    unknown = sorted(name for name in named if name not in FIELDS)
    if unknown:
        raise ValidationFailed(
            f"--template {path}: unknown field {{{unknown[0]}}} (fields: {', '.join(FIELDS)})",
            key="drafts.template_field",
            params={"field": unknown[0]},
        )
    missing = [name for name in REQUIRED_FIELDS if name not in named]
    if missing:
        raise ValidationFailed(
            f"--template {path}: the field {{{missing[0]}}} is missing",
            key="drafts.template_field_missing",
            params={"field": missing[0]},
        )
    return template


@dataclass
class DraftOptions(EndpointOptions):
    """What `draft rubrics` asks for; `params()` is what the run record keeps (never the key itself)."""

    generator: str | None = None
    cases: str = "missing"
    case_ids: list[str] = field(default_factory=list)
    template: str | None = None
    n: int = RUBRIC_SIZE
    max_tokens: int = 4096

    NAME_FIELD: ClassVar[str] = "generator"
    PATH_FIELDS: ClassVar[tuple[str, ...]] = ("template",)

    def generator_name(self) -> str:
        return (self.generator or self.model).strip()

    def check(self) -> None:
        self.check_endpoints()
        try:
            check_name("--as", self.generator_name(), "judge")
        except InputRejected as error:
            raise ValidationFailed(str(error), key=error.key, params=error.params) from None
        if not 1 <= self.n <= 200:
            raise ValidationFailed(f"--n {self.n}: expected 1 to 200")

    def key_parameters(self) -> dict:
        return {**super().key_parameters(), "kind": "draft"}


def create_draft_run(engine: Engine, options: DraftOptions, by: User | str = "cli") -> int:
    """Check the options and record a new drafting run (status pending); returns its id."""
    options.check()
    if options.cases not in CASE_SCOPES:
        options.case_ids = read_case_file(engine, options.cases)
        options.cases = str(Path(options.cases).resolve())
    template = read_draft_template(options.template)
    with session_scope(engine) as session:
        run = judge_runs.create_run(
            session,
            by,
            judge=options.generator_name(),
            base_url=options.urls()[0],
            model=options.model,
            template=Path(options.template).name if options.template else DEFAULT_TEMPLATE_NAME,
            template_sha256=hashlib.sha256(template.encode("utf-8")).hexdigest(),
            params=options.params(),
            kind="draft",
        )
        assert run.id is not None  # flushed
        return run.id


@dataclass
class DraftItem:
    case_pk: int
    case_id: str
    cache_key: str
    prompt: str


def fill(template: str, case: Case, n: int, tags: list[str]) -> str:
    return template.format(
        n=n,
        clinical_context=case.clinical_context,
        user_request=case.user_request,
        reference=reference_answer(case),
        tags=", ".join(tags),
    )


class DraftJob(CaseJob):
    """Drafting: one item per selected case, one request each, re-asked at most twice."""

    chunk_size = 200

    def __init__(self, engine: Engine, options: DraftOptions, run_id: int, actor: str, template: str) -> None:
        self.options, self.run_id, self.actor = options, run_id, actor
        self.generator = options.generator_name()
        self.request = options.request()
        self.tags = [tag["id"] for tag in get_taxonomy().failure_tags()]
        parameters = options.key_parameters()
        items: list[DraftItem] = []
        with session_scope(engine, read_only=True) as session:
            cases = drafting.cases_to_draft(session, options.cases, options.case_ids or None)
            for case in cases:
                prompt = fill(template, case, options.n, self.tags)
                messages = [{"role": "user", "content": prompt}]
                # The case is part of the key: a draft belongs to its case, even where two cases read alike.
                keyed = {**parameters, "case_id": case.case_id}
                key = hashlib.sha256(canonical_request(options.model, messages, keyed).encode("utf-8"))
                items.append(DraftItem(case.id, case.case_id, key.hexdigest(), prompt))
        super().__init__(items)

    def lookup(self, connection: Connection, keys: list[str]) -> dict:
        return drafting.cached_drafts(connection, keys)

    def cached(self, item: DraftItem, hit: tuple) -> drafting.Drafted:
        parse_ok, criteria, dropped = hit
        return drafting.Drafted(
            item.cache_key, item.case_pk, item.case_id, parse_ok, criteria, dropped, from_cache=True
        )

    def tally(self, answer: drafting.Drafted, counts: judge_runs.RunCounts) -> None:
        if not answer.parse_ok:
            counts.parse_failures += 1

    def store(self, session: Session, answers: list[drafting.Drafted]) -> None:
        drafting.store_drafts(session, self.run_id, self.generator, self.actor, answers)

    async def answer(self, item: DraftItem, endpoint: Endpoint) -> drafting.Drafted | None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": item.prompt}]
        started = time.perf_counter()
        attempts = prompt_tokens = completion_tokens = 0
        output, reading = "", None
        for round_no in range(MAX_REASKS + 1):
            completion, spent = await endpoint.complete(self.request, messages)
            attempts += spent
            if completion is None:
                return None  # not answered: an error, not cached, sent again by the next run
            usage = completion.usage
            if usage is not None:
                prompt_tokens += usage.prompt_tokens or 0
                completion_tokens += usage.completion_tokens or 0
            output = (completion.choices[0].message.content or "") if completion.choices else ""
            reading = read_draft(output, self.options.n, self.tags)
            if reading is not None or round_no == MAX_REASKS:
                break
            endpoint.counts.reasks += 1
            messages = [
                messages[0],
                {"role": "assistant", "content": output},
                {"role": "user", "content": REASK_TEXT.format(n=self.options.n)},
            ]
        endpoint.counts.prompt_tokens += prompt_tokens
        endpoint.counts.completion_tokens += completion_tokens
        return drafting.Drafted(
            cache_key=item.cache_key,
            case_pk=item.case_pk,
            case_id=item.case_id,
            parse_ok=reading is not None,
            criteria=reading.criteria if reading else [],
            dropped=reading.dropped() if reading else {},
            raw_output=output,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=(time.perf_counter() - started) * 1000,
            attempts=attempts,
        )


def prepare(engine: Engine, run: dict) -> Prepared:
    """A recorded drafting run made ready (its template must not have changed since)."""
    options = DraftOptions.from_record(run)
    options.check()
    template = read_draft_template(options.template)
    if hashlib.sha256(template.encode("utf-8")).hexdigest() != run["template_sha256"]:
        raise ValidationFailed(
            f"drafting run {run['id']}: its template file changed since the run was recorded (start a new run)",
            key="judge.message.template_changed",
            params={"run": run["id"]},
        )
    return Prepared(options, DraftJob(engine, options, run["id"], run["created_by"], template))


def run_draft(engine: Engine, options: DraftOptions, by: User | str = "cli", progress: Progress = no_progress) -> dict:
    """Record and execute a drafting run in one go (the command line's `draft rubrics`)."""
    run = recorded_run(engine, create_draft_run(engine, options, by))
    return execute_prepared(engine, run["id"], lambda: prepare(engine, run), progress)


def dropped_totals(engine: Engine, run_id: int) -> dict[str, int]:
    """What the run's drafts dropped or cleaned, summed by reason, and the drafts holding fewer than N."""
    totals: dict[str, int] = {"drafts": 0, "short": 0}
    with session_scope(engine, read_only=True) as session:
        run = judge_runs.get_run(session, "cli", run_id)
        n = int((run.params or {}).get("n") or RUBRIC_SIZE)
        for draft in session.exec(select(RubricDraft).where(col(RubricDraft.run_id) == run_id)):
            totals["drafts"] += 1
            totals["short"] += int(draft.parse_ok and len(draft.criteria) < n)
            for reason, count in (draft.dropped or {}).items():
                totals[reason] = totals.get(reason, 0) + int(count)
    return totals
