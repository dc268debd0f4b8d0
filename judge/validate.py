"""`clinconsensus validate rubrics` (docs/REFERENCE.md §4.2): a judge grades each case's anchor answers on its rubric.

The anchors of a case are its reference answer (when it has one) and two weak answers, the same texts
for every case (`db.rules.anchors`). Each (anchor, criterion) of the chosen rubric version — the case's
current approved version, or with `--rubric submitted` the version waiting for audit — is one item, sent
with the judge run's prompt (the official template by default), parsing, re-asks, cache, resume, several
endpoints and progress: the grading of `judge run` (judge.runner.JudgeJob) through the runner core. What
the judge says lands in `anchor_decision` (db.work.validation), apart from judge decisions: no model's
figure reads it. An answer that does not parse, or an item no endpoint answered, is counted per anchor
and never stored as met or not met.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from analysis.prompt import PromptTemplate, read_template, template_name, template_sha256, user_message
from db.rubrics.references import texts_for_run
from db.rules.anchors import ANCHORS, REFERENCE, WEAK_TEXTS
from db.rules.enums import RubricStatus
from db.rules.errors import ValidationFailed
from db.rules.progress_report import Progress, no_progress
from db.store.current_rubric import current_version_ids
from db.store.engine import session_scope
from db.store.models import Case, Criterion, RubricVersion, User
from db.work import judge_runs, validation
from judge.core import Prepared, execute_prepared, recorded_run
from judge.endpoints import Endpoint
from judge.generate import read_case_file
from judge.items import Item, canonical_request
from judge.runner import JudgeJob, RunOptions

KIND = "validate"
CASE_SCOPES = ("all",)
RUBRIC_CHOICES = ("current", "submitted")
CHUNK = 1000


@dataclass
class ValidateOptions(RunOptions):
    """What `validate rubrics` asks for: the judge run's options, which cases, and which rubric version.

    A file of case ids is read once when the run is created; its ids are kept in `case_ids`."""

    cases: str = "all"
    case_ids: list[str] = field(default_factory=list)
    rubric: str = "current"

    def check(self) -> None:
        super().check()
        if self.rubric not in RUBRIC_CHOICES:
            raise ValidationFailed(f"--rubric {self.rubric!r}: expected current or submitted")


@dataclass
class AnchorItem(Item):
    """One (anchor, criterion) of a case's rubric version; `response_id` is unused (0)."""

    anchor: str = ""
    rubric_version_id: int = 0
    prompt: str = ""


def create_validation_run(engine: Engine, options: ValidateOptions, by: User | str = "cli") -> int:
    """Check the options and record a new validation run (status pending); returns its id."""
    options.check()
    if options.cases not in CASE_SCOPES:
        options.case_ids = read_case_file(engine, options.cases)
        options.cases = str(Path(options.cases).resolve())
    template = read_template(options.template)
    with session_scope(engine) as session:
        run = judge_runs.create_run(
            session,
            by,
            judge=options.judge_name(),
            base_url=options.urls()[0],
            model=options.model,
            template=template_name(options.template),
            template_sha256=template_sha256(template),
            params=options.params(),
            kind=KIND,
        )
        assert run.id is not None  # flushed
        return run.id


def _chosen_versions(session: Session, options: ValidateOptions) -> dict[int, int]:
    """case pk → the rubric version to grade: the current approved one, or the newest submitted one."""
    if options.rubric == "current":
        return current_version_ids(session)
    newest = (
        select(col(RubricVersion.case_pk), func.max(col(RubricVersion.id)))
        .where(col(RubricVersion.status) == RubricStatus.submitted)
        .group_by(col(RubricVersion.case_pk))
    )
    return {int(pk): int(version_id) for pk, version_id in session.execute(newest)}


def anchor_items(engine: Engine, options: ValidateOptions) -> list[AnchorItem]:
    """Every item of the selected cases, in case order, then anchor, then criterion position."""
    template = PromptTemplate(read_template(options.template))
    parameters = options.key_parameters()
    with session_scope(engine, read_only=True) as session:
        versions = _chosen_versions(session, options)
        query = select(col(Case.id), col(Case.case_id), col(Case.clinical_context), col(Case.user_request))
        cases = [tuple(row) for row in session.execute(query.order_by(col(Case.id)))]
        if options.case_ids:
            wanted = set(options.case_ids)
            cases = [row for row in cases if row[1] in wanted]
        cases = [row for row in cases if row[0] in versions]
        chosen = sorted(versions[row[0]] for row in cases)
        criteria: dict[int, list[tuple[str, str, int]]] = {}
        for start in range(0, len(chosen), 500):
            for version_id, criterion_id, text, position in session.execute(
                select(
                    col(Criterion.rubric_version_id),
                    col(Criterion.criterion_id),
                    col(Criterion.text),
                    col(Criterion.position),
                )
                .where(col(Criterion.rubric_version_id).in_(chosen[start : start + 500]))
                .order_by(col(Criterion.rubric_version_id), col(Criterion.position))
            ):
                criteria.setdefault(version_id, []).append((criterion_id, text, position))
        references = texts_for_run(session.connection(), [row[0] for row in cases])
    items: list[AnchorItem] = []
    for case_pk, _case_id, context, request in cases:
        message = user_message(context, request)
        version_id = versions[case_pk]
        answers = {REFERENCE: references.get(case_pk), **WEAK_TEXTS}
        for anchor in ANCHORS:
            answer = answers[anchor]
            if not answer:
                continue
            for criterion_id, text, position in criteria.get(version_id, []):
                prompt = template.fill(user_message=message, response=answer, rubric_item=text)
                key = hashlib.sha256(canonical_request(options.model, prompt, parameters).encode("utf-8")).hexdigest()
                items.append(AnchorItem(0, criterion_id, key, case_pk, position, anchor, version_id, prompt))
    return items


class ValidateJob(JudgeJob):
    """Grading anchor answers: the judge's grading of one item, stored as anchor decisions."""

    def __init__(self, options: ValidateOptions, items: list[AnchorItem], run_id: int) -> None:
        self.options, self.run_id = options, run_id
        self.judge = options.judge_name()
        self.items = items
        self.total = len(items)
        self.request = options.request()
        self.source = self  # type: ignore[assignment]  # JudgeJob.answer asks its source only for `prompt`

    def prompt(self, item: AnchorItem) -> str:
        return item.prompt

    def chunks(self):
        for start in range(0, len(self.items), CHUNK):
            yield self.items[start : start + CHUNK]

    def lookup(self, connection: Connection, keys: list[str]) -> dict:
        return validation.cached_anchor_results(connection, keys)

    def cached(self, item: AnchorItem, hit: tuple) -> validation.AnchorAnswer:  # type: ignore[override]
        parse_ok, met = hit
        return self._placed(item, parse_ok, met, from_cache=True)

    def tally(self, answer, counts: judge_runs.RunCounts) -> None:
        if not answer.parse_ok:
            counts.parse_failures += 1

    def store(self, session: Session, answers) -> None:
        validation.store_anchor_answers(session, self.run_id, answers)

    async def answer(self, item: AnchorItem, endpoint: Endpoint) -> validation.AnchorAnswer | None:  # type: ignore[override]
        graded = await super().answer(item, endpoint)
        if graded is None:
            return None
        placed = self._placed(item, graded.parse_ok, graded.met)
        placed.raw_output, placed.attempts, placed.latency_ms = graded.raw_output, graded.attempts, graded.latency_ms
        placed.prompt_tokens, placed.completion_tokens = graded.prompt_tokens, graded.completion_tokens
        return placed

    @staticmethod
    def _placed(
        item: AnchorItem, parse_ok: bool, met: bool | None, from_cache: bool = False
    ) -> validation.AnchorAnswer:
        return validation.AnchorAnswer(
            item.cache_key,
            item.case_pk,
            item.rubric_version_id,
            item.anchor,
            item.criterion_id,
            parse_ok,
            met if parse_ok else None,
            from_cache=from_cache,
        )


def prepare(engine: Engine, run: dict) -> Prepared:
    """A recorded validation run made ready (its template must not have changed since); its items per anchor
    are kept in the record, so what was not answered is counted per anchor."""
    options = ValidateOptions.from_record(run)
    assert isinstance(options, ValidateOptions)  # from_record builds the class it is called on
    options.check()
    if template_sha256(read_template(options.template)) != run["template_sha256"]:
        raise ValidationFailed(
            f"validation run {run['id']}: its template file changed since the run was recorded (start a new run)",
            key="judge.message.template_changed",
            params={"run": run["id"]},
        )
    items = anchor_items(engine, options)
    per_anchor = {anchor: sum(item.anchor == anchor for item in items) for anchor in ANCHORS}
    with session_scope(engine) as session:
        validation.note_anchor_items(session, run["id"], per_anchor)
    return Prepared(options, ValidateJob(options, items, run["id"]), options.structured)


def execute_validation(engine: Engine, run_id: int, progress: Progress = no_progress) -> dict:
    """Run (or resume) the recorded validation run `run_id`; its summary with the counts per anchor."""
    run = recorded_run(engine, run_id)
    summary = execute_prepared(engine, run_id, lambda: prepare(engine, run), progress)
    return with_anchor_counts(engine, summary)


def with_anchor_counts(engine: Engine, summary: dict) -> dict:
    with engine.connect() as connection:
        return {**summary, "anchors": validation.anchor_counts(connection, summary["id"])}


def run_validation(
    engine: Engine, options: ValidateOptions, by: User | str = "cli", progress: Progress = no_progress
) -> dict:
    """Record and execute a validation run in one go (the command line's `validate rubrics`)."""
    return execute_validation(engine, create_validation_run(engine, options, by), progress)
