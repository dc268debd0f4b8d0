"""The tables of ClinConsensus Studio, one small class per entity.

The schema itself is created and changed only by the Alembic revisions in `db/migrations`.
Enumerations are stored as short strings so both SQLite and PostgreSQL read them the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, String, Table, Text, UniqueConstraint, inspect
from sqlmodel import Field, SQLModel

# The vocabulary lives in a module without SQL (the pure analysis code reads it): import it from there.
from db.rules.enums import NO_GROUP, JudgeRunStatus, RubricStatus


def utcnow() -> datetime:
    return datetime.now(UTC)


def table_of(model: type[SQLModel]) -> Table:
    """The table of a table model: `model.__table__`, which SQLModel leaves untyped."""
    table = inspect(model).local_table
    assert isinstance(table, Table)
    return table


class User(SQLModel, table=True):
    # A primary key is None only until its row is flushed; every row read from the database has one, so
    # the tables declare `id: int` (the column is the same).
    id: int = Field(default=None, primary_key=True)
    username: str = Field(max_length=64, unique=True, index=True)
    display_name: str = Field(default="", max_length=128)
    role: str = Field(max_length=16)
    group_no: int | None = Field(default=None, description="expert group 1 or 2; none for admins")
    is_active: bool = Field(default=True)
    password_hash: str | None = Field(default=None, max_length=255)
    # The identity-provider account an admin linked to this one ("<issuer> <subject>"), for OpenID sign-in.
    oidc_identity: str | None = Field(default=None, max_length=512, unique=True)
    created_at: datetime = Field(default_factory=utcnow)
    lock_version: int = Field(default=1)
    # When the identity provider issued the sign-in that last opened a session here: each opens one only.
    provider_sign_in_at: datetime | None = Field(default=None)


class Case(SQLModel, table=True):
    # a queue reads each item's case id by key from this index alone (db.store.lookups)
    __table_args__ = (Index("ix_case_id_case_id", "id", "case_id"),)

    id: int = Field(default=None, primary_key=True)
    case_id: str = Field(max_length=64, unique=True, index=True)
    difficulty: str = Field(max_length=16)
    task: str = Field(default="", max_length=128)
    task_labels: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    subject: str = Field(default="", max_length=128, index=True)
    subject_labels: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    user_role: str = Field(default="", max_length=128)
    clinical_context: str = Field(default="", sa_column=Column(Text, nullable=False))
    user_request: str = Field(default="", sa_column=Column(Text, nullable=False))
    # The release's optional `register` key ("lay" | "professional"); None: decided by user_role.
    register_override: str | None = Field(default=None, sa_column=Column("register", String(16)))
    extra: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class RubricVersion(SQLModel, table=True):
    __tablename__ = "rubric_version"
    __table_args__ = (UniqueConstraint("case_pk", "version"),)

    id: int = Field(default=None, primary_key=True)
    case_pk: int = Field(foreign_key="case.id", index=True)
    version: int = Field(default=1)
    status: str = Field(default=RubricStatus.draft, max_length=16)
    author_id: int | None = Field(default=None, foreign_key="user.id")
    reviewer_id: int | None = Field(default=None, foreign_key="user.id")
    review_comment: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)
    submitted_at: datetime | None = None
    reviewed_at: datetime | None = None
    lock_version: int = Field(default=1)
    #: The LLM draft the author's editor started from (docs/REFERENCE.md §4.3); None: written from scratch.
    draft_id: int | None = Field(default=None, foreign_key="rubric_draft.id")


class Criterion(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("rubric_version_id", "criterion_id"),)

    id: int = Field(default=None, primary_key=True)
    rubric_version_id: int = Field(foreign_key="rubric_version.id", index=True)
    position: int
    criterion_id: str = Field(max_length=64)
    text: str = Field(sa_column=Column(Text, nullable=False))
    tags: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    review_comment: str | None = Field(default=None, sa_column=Column(Text))


class Response(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint("case_pk", "model"),
        # a queue reads each item's code by key from this index alone, not from the row with its text
        Index("ix_response_id_code", "id", "code"),
    )

    id: int = Field(default=None, primary_key=True)
    case_pk: int = Field(foreign_key="case.id", index=True)
    model: str = Field(max_length=128, index=True)
    text: str = Field(sa_column=Column(Text, nullable=False))
    length: int = Field(default=0, description="Unicode code points of the response")
    code: str = Field(max_length=32, unique=True, description="stable opaque code shown instead of the model")
    created_at: datetime = Field(default_factory=utcnow)


class Assignment(SQLModel, table=True):
    __table_args__ = (
        Index("ix_assignment_user_kind", "user_id", "kind"),
        # a round's assignments (`created_at` of one run): whether a group has any, an index probe per round
        Index("ix_assignment_round", "created_at", "kind", "group_no"),
        # whether a case has assignments of a kind (the admin's list, a page of cases in case order): one probe
        Index("ix_assignment_case_kind", "case_pk", "kind"),
        # assigned and done per person (the progress page): counted from this index alone, not the table's rows
        Index("ix_assignment_progress", "kind", "user_id", "group_no", "label_status"),
    )

    id: int = Field(default=None, primary_key=True)
    kind: str = Field(max_length=16)
    case_pk: int = Field(foreign_key="case.id", index=True)
    response_id: int | None = Field(default=None, foreign_key="response.id", index=True)
    user_id: int = Field(foreign_key="user.id")
    group_no: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    created_by: int | None = Field(default=None, foreign_key="user.id")
    # Kept figures of a labeling assignment (db/counts), rewritten with its response's labels and its
    # case's current rubric: the state of the group's labels (db.labeling.annotation's todo/partial/done/stale/waiting),
    # labels on the current rubric, and that rubric's size. None on rubric assignments.
    label_status: str | None = Field(default=None, max_length=16)
    labeled: int = Field(default=0)
    rubric_size: int = Field(default=0)


class Label(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint("response_id", "criterion_id", "stage", "group_no"),
        # the annotator's queue: a response's labels of one stage and group, with their rubric version
        Index("ix_label_response_stage_group", "response_id", "stage", "group_no", "rubric_version_id"),
        # the data version's newest label edit (analysis/loader.py), an index lookup instead of a scan
        Index("ix_label_updated_at", "updated_at"),
    )

    id: int = Field(default=None, primary_key=True)
    response_id: int = Field(foreign_key="response.id")
    criterion_id: str = Field(max_length=64)
    stage: str = Field(max_length=16)
    group_no: int = Field(default=NO_GROUP, description="1 or 2; NO_GROUP for adjudication")
    met: bool
    user_id: int = Field(foreign_key="user.id", index=True)
    note: str | None = Field(default=None, sa_column=Column(Text))
    # The rubric version the label was made on (a version of its response's case): a save stamps the version
    # it checked, an import the version current at import, revision 0011 the older labels. The label counts
    # only while this is its case's current version (db.store.current_rubric); None (no approved version to stamp)
    # never counts.
    rubric_version_id: int | None = Field(
        default=None, foreign_key="rubric_version.id", description="rubric version the label was made on"
    )
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    lock_version: int = Field(default=1, description="revision, for optimistic locking")


class JudgeDecision(SQLModel, table=True):
    __tablename__ = "judge_decision"
    __table_args__ = (UniqueConstraint("judge", "response_id", "criterion_id"),)

    id: int = Field(default=None, primary_key=True)
    judge: str = Field(max_length=128)
    response_id: int = Field(foreign_key="response.id", index=True)
    criterion_id: str = Field(max_length=64)
    met: bool
    extra: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))


class Draft(SQLModel, table=True):
    """Unsaved edits of a page, kept per user so a refresh or a closed tab loses nothing."""

    __table_args__ = (UniqueConstraint("user_id", "key"),)

    id: int = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    key: str = Field(max_length=128)
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    updated_at: datetime = Field(default_factory=utcnow)


class LabelTiming(SQLModel, table=True):
    """Active time a person spent on one saved response (idle stretches over a minute not counted)."""

    __tablename__ = "label_timing"
    __table_args__ = (Index("ix_label_timing_user_saved", "user_id", "saved_at"),)

    id: int = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    response_id: int = Field(foreign_key="response.id", index=True)
    stage: str = Field(max_length=16)
    rubric_version_id: int | None = Field(default=None, foreign_key="rubric_version.id")
    active_ms: int = Field(default=0)
    n_criteria: int = Field(default=0)
    saved_at: datetime = Field(default_factory=utcnow)


class AuditLog(SQLModel, table=True):
    """Append-only: each entry carries the hash of the one before it."""

    __tablename__ = "audit_log"

    id: int = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow)
    actor: str = Field(max_length=64, index=True)
    action: str = Field(max_length=32)
    entity: str = Field(max_length=32, index=True)
    entity_key: str = Field(max_length=255)
    before: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    after: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    prev_hash: str = Field(max_length=64)
    hash: str = Field(max_length=64)


class LoginSession(SQLModel, table=True):
    """A signed-in browser; only the token's hash is stored, so a copy of the table signs nobody in."""

    __tablename__ = "login_session"

    id: int = Field(default=None, primary_key=True)
    token_hash: str = Field(max_length=64, unique=True, index=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime
    # The idle timeout counts from here; refreshed at most once a minute while the browser is used.
    last_seen_at: datetime = Field(default_factory=utcnow)


class LoginThrottle(SQLModel, table=True):
    """Failed sign-ins per username tried, whether or not such an account exists.

    Counted with one atomic statement per failure, so parallel attempts cannot lose a count.
    """

    __tablename__ = "login_throttle"

    username_key: str = Field(max_length=64, primary_key=True, description="the name tried, folded to lower case")
    failures: int = Field(default=0)
    locked_until: datetime | None = Field(default=None)
    updated_at: datetime = Field(default_factory=utcnow)


class AdjudicationOpening(SQLModel, table=True):
    """A checker saw both groups' labels of a response: their own group's labels on it are closed to them."""

    __tablename__ = "adjudication_opening"
    __table_args__ = (UniqueConstraint("user_id", "response_id"),)

    id: int = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    response_id: int = Field(foreign_key="response.id", index=True)
    opened_at: datetime = Field(default_factory=utcnow)


class JudgeRun(SQLModel, table=True):
    """One grading run of an LLM judge: what was asked of which endpoint, by whom, and how it went.

    The API key is never stored: only the name of the environment variable it is read from.
    """

    __tablename__ = "judge_run"

    id: int = Field(default=None, primary_key=True)
    judge: str = Field(max_length=128, index=True)
    base_url: str = Field(max_length=512)
    model: str = Field(max_length=256)
    template: str = Field(max_length=256, description="official | zh | the template file's name")
    template_sha256: str = Field(max_length=64)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_by: str = Field(max_length=64)
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    heartbeat_at: datetime | None = None
    status: str = Field(default=JudgeRunStatus.pending, max_length=16)
    cancel_requested: bool = Field(default=False)
    items: int = Field(default=0)
    done: int = Field(default=0)
    cached: int = Field(default=0)
    requests: int = Field(default=0)
    parse_failures: int = Field(default=0)
    errors: int = Field(default=0)
    retries: int = Field(default=0)
    reasks: int = Field(default=0)
    prompt_tokens: int = Field(default=0)
    completion_tokens: int = Field(default=0)
    wall_seconds: float = Field(default=0.0)
    message: str | None = Field(default=None, sa_column=Column(Text))
    #: The same note as a catalog entry with its parameters (db.rules.errors.said_record), for the page's language.
    message_said: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    #: judge (grading) or generate (a candidate model's answers; `judge` then names the model they are stored as).
    kind: str = Field(default="judge", max_length=16, sa_column_kwargs={"server_default": "judge"})
    #: Each endpoint's share: base_url, items done, requests, errors, why it was left out (None: it served to the end).
    endpoints: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    #: Generate runs: answers cut at max_tokens (finish_reason length) and empty answers, never stored as responses.
    truncated: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    empty: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class GenerationResult(SQLModel, table=True):
    """A candidate model's answer to one case, cached by a hash of (model, messages, parameters).

    `status` says what became of it: complete (stored as the response `response_id`), truncated (cut
    at max_tokens), empty, or refused (a text the response rules refuse); only complete answers are
    responses, the others are kept here for inspection and counted in their run.
    """

    __tablename__ = "generation_result"

    id: int = Field(default=None, primary_key=True)
    cache_key: str = Field(max_length=64, unique=True, index=True)
    run_id: int = Field(foreign_key="judge_run.id", index=True)
    case_pk: int = Field(foreign_key="case.id", index=True)
    response_id: int | None = Field(default=None, foreign_key="response.id")
    text: str = Field(default="", sa_column=Column(Text, nullable=False))
    # Characters of the answer as the endpoint sent it; an answer that is not a response keeps only the first
    # KEPT_ANSWER_CHARS of them in `text` (db/work/generation.py).
    text_length: int | None = Field(default=None, description="characters of the answer as sent")
    finish_reason: str | None = Field(default=None, max_length=32)
    status: str = Field(max_length=16)
    prompt_tokens: int = Field(default=0)
    completion_tokens: int = Field(default=0)
    latency_ms: float = Field(default=0.0)
    attempts: int = Field(default=1, description="HTTP requests spent, retries included")
    created_at: datetime = Field(default_factory=utcnow)


class JudgeResult(SQLModel, table=True):
    """The answer of a judge endpoint to one item, cached by a hash of (model, messages, parameters)."""

    __tablename__ = "judge_result"

    id: int = Field(default=None, primary_key=True)
    cache_key: str = Field(max_length=64, unique=True, index=True)
    run_id: int = Field(foreign_key="judge_run.id", index=True)
    response_id: int = Field(foreign_key="response.id", index=True)
    criterion_id: str = Field(max_length=64)
    raw_output: str = Field(default="", sa_column=Column(Text, nullable=False))
    parse_ok: bool = Field(default=False)
    met: bool | None = Field(default=None, description="None when the output did not parse")
    prompt_tokens: int = Field(default=0)
    completion_tokens: int = Field(default=0)
    latency_ms: float = Field(default=0.0)
    attempts: int = Field(default=1, description="HTTP requests spent, retries and re-asks included")
    created_at: datetime = Field(default_factory=utcnow)


#: `label_tally.rubric_version_id` of labels that name no rubric version (a key column cannot be null).
NO_RUBRIC_VERSION = 0


class LabelTally(SQLModel, table=True):
    """Kept figure (db/counts): labels one person made on a response, per group, stage and rubric version."""

    __tablename__ = "label_tally"
    __table_args__ = (
        Index("ix_label_tally_user", "user_id", "stage", "group_no"),
        Index("ix_label_tally_group_stage", "group_no", "stage"),
    )

    response_id: int = Field(foreign_key="response.id", primary_key=True)
    group_no: int = Field(primary_key=True)
    stage: str = Field(max_length=16, primary_key=True)
    user_id: int = Field(foreign_key="user.id", primary_key=True)
    # the rubric version the labels were made against; NO_RUBRIC_VERSION for labels without one (old imports)
    rubric_version_id: int = Field(primary_key=True)
    n: int
    # whether these labels count on the case's current rubric (db.store.current_rubric) as of the last refresh:
    # what `label_totals` added them under, so a refresh after a new rubric takes away what was added
    counting: bool = Field(default=True)
    # of the annotation labels, those their group has no check label for yet (the check is pending)
    n_unchecked: int = Field(default=0)
    # of the annotation labels that count on the case's current rubric, on a final response (docs/REFERENCE.md §4.1)
    # those whose decision's gold (db.rules.gold, from the decision's counting labels) differs from the label, and
    # those on a response that is not final yet (feedback compares with final gold only)
    n_gold_differs: int = Field(default=0)
    n_no_gold: int = Field(default=0)


class LabelTotal(SQLModel, table=True):
    """Kept figure (db/counts): one person's labels of a group and stage, summed over their responses, those that
    count on the current rubric apart from those that do not (the admin's totals, the checker's annotator list)."""

    __tablename__ = "label_totals"

    group_no: int = Field(primary_key=True)
    stage: str = Field(max_length=16, primary_key=True)
    user_id: int = Field(foreign_key="user.id", primary_key=True)
    counting: bool = Field(primary_key=True)
    n_responses: int = Field(description="responses with such labels")
    n_labels: int = Field(description="labels")


class AssignmentTotal(SQLModel, table=True):
    """Kept figure (db/counts): one person's labeling assignments of a group, and how many of them are done (the
    progress page reads a row per person, not every assignment). An assignment counts here once its state is
    kept (`label_status` set by db/counts)."""

    __tablename__ = "assignment_totals"

    user_id: int = Field(foreign_key="user.id", primary_key=True)
    group_no: int = Field(primary_key=True)
    n_assigned: int = Field(description="labeling assignments")
    n_done: int = Field(description="of those, done")


class JudgeTotal(SQLModel, table=True):
    """Kept figure (db/counts): how many decisions each judge has (the import page's count reads a row per judge, not
    millions of decisions)."""

    __tablename__ = "judge_totals"

    judge: str = Field(max_length=128, primary_key=True)
    n_decisions: int = Field(description="decisions of this judge")


#: `unresolved_totals` keeps a row per this many shards of responses (response id modulo it).
UNRESOLVED_SHARDS = 16


class UnresolvedTotal(SQLModel, table=True):
    """Kept figure (db/counts): the decisions nobody adjudicated yet and the responses holding them (the admins'
    sidebar reads a few rows, not every response's status), per shard of responses (response id modulo
    UNRESOLVED_SHARDS): saves on different responses seldom wait for one another's row."""

    __tablename__ = "unresolved_totals"

    shard: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    n_decisions: int = Field(description="unresolved decisions of the shard's responses")
    n_responses: int = Field(description="the shard's responses with an unresolved decision")


class ResponseStatus(SQLModel, table=True):
    """Kept figures (db/counts) of one response: compared, differing, unresolved and gold decisions."""

    __tablename__ = "response_status"

    response_id: int = Field(foreign_key="response.id", primary_key=True)
    n_compared: int = Field(description="decisions both groups have a final label on")
    n_differing: int = Field(description="of those, decisions where the groups' final labels differ")
    n_unresolved: int = Field(index=True, description="of those, decisions nobody adjudicated yet")
    n_gold: int = Field(description="decisions that have gold")


class AdjudicationReady(SQLModel, table=True):
    """Kept figure (db/counts): a response whose group's annotation labels cover its case's current rubric, none
    on an older version, and are all checked; that group's checker may take it into adjudication."""

    __tablename__ = "adjudication_ready"
    __table_args__ = (Index("ix_adjudication_ready_group", "group_no", "response_id"),)

    response_id: int = Field(foreign_key="response.id", primary_key=True)
    group_no: int = Field(primary_key=True)


class FeedbackRound(SQLModel, table=True):
    """A labeling round (the label assignments of one assignment run) whose feedback an admin opened or closed.

    No row: feedback of that round is off, the default. Opening and closing are audit entries too.
    """

    __tablename__ = "feedback_round"

    id: int = Field(default=None, primary_key=True)
    round_at: datetime = Field(unique=True, index=True, description="`assignment.created_at` of the round's run")
    is_open: bool = Field(default=False)
    changed_at: datetime = Field(default_factory=utcnow)
    changed_by: str = Field(max_length=64)


class CalibrationSample(SQLModel, table=True):
    """One response of a model's calibration sample (docs/REFERENCE.md §4, calibrated score): drawn once per model."""

    __tablename__ = "calibration_sample"

    id: int = Field(default=None, primary_key=True)
    model: str = Field(max_length=128, index=True)
    response_id: int = Field(foreign_key="response.id", unique=True)
    seed: int
    drawn_at: datetime = Field(default_factory=utcnow)
    drawn_by: str = Field(max_length=64)


class DisagreementDraw(SQLModel, table=True):
    """One response drawn where two judges disagree (docs/REFERENCE.md §3.7, `assign disagreements`): the judge's
    next training data once physicians have labeled it. Admins only: it names the judges."""

    __tablename__ = "disagreement_draw"

    id: int = Field(default=None, primary_key=True)
    response_id: int = Field(foreign_key="response.id", unique=True)
    judge_a: str = Field(max_length=128)
    judge_b: str = Field(max_length=128)
    n_differing: int = Field(description="criteria on which the two judges' decisions differed when drawn")
    drawn_at: datetime = Field(default_factory=utcnow)
    drawn_by: str = Field(max_length=64)


class LeaderboardSnapshot(SQLModel, table=True):
    """A frozen, dated leaderboard: scores, intervals, tiers, calibrated scores and what they were computed from."""

    __tablename__ = "leaderboard_snapshot"

    id: int = Field(default=None, primary_key=True)
    name: str = Field(max_length=128, unique=True)
    created_at: datetime = Field(default_factory=utcnow)
    created_by: str = Field(max_length=64)
    payload: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))


class AuditSeal(SQLModel, table=True):
    """The audit chain's head as its writers last left it, sealed with the chain's key (one row, id 1).

    Updated in the same transaction as every entry, so entries deleted from the end of the log leave a
    head that names more entries than remain; the seal keeps anyone without the key from lowering it.
    """

    __tablename__ = "audit_seal"

    id: int = Field(default=None, primary_key=True)
    entries: int = Field(default=0, description="entries in the log")
    hash: str = Field(max_length=64, description="hash of the last entry")
    seal: str | None = Field(default=None, max_length=64, description="HMAC of entries and hash; none until sealed")


class ReferenceAnswer(SQLModel, table=True):
    """A case's reference answer (docs/REFERENCE.md §3.1): an expert-reviewed answer to its user message.

    Shown to the case's rubric author, rubric auditors and admins only (db.rubrics.references), never in
    the release; sent to an endpoint only by a rubric validation run (§4.2). A later import or an admin's
    edit replaces it; the audit log keeps the sha256 of the text before and after."""

    __tablename__ = "reference_answer"

    case_pk: int = Field(foreign_key="case.id", primary_key=True, sa_column_kwargs={"autoincrement": False})
    text: str = Field(sa_column=Column(Text, nullable=False))
    sha256: str = Field(max_length=64)
    updated_at: datetime = Field(default_factory=utcnow)
    updated_by: str = Field(max_length=64)


class AnchorResult(SQLModel, table=True):
    """A judge endpoint's answer on one anchor answer (§4.2) and criterion, cached by a hash of the request."""

    __tablename__ = "anchor_result"

    id: int = Field(default=None, primary_key=True)
    cache_key: str = Field(max_length=64, unique=True, index=True)
    run_id: int = Field(foreign_key="judge_run.id", index=True)
    raw_output: str = Field(default="", sa_column=Column(Text, nullable=False))
    parse_ok: bool = Field(default=False)
    met: bool | None = Field(default=None, description="None when the output did not parse")
    prompt_tokens: int = Field(default=0)
    completion_tokens: int = Field(default=0)
    latency_ms: float = Field(default=0.0)
    attempts: int = Field(default=1, description="HTTP requests spent, retries and re-asks included")
    created_at: datetime = Field(default_factory=utcnow)


class AnchorDecision(SQLModel, table=True):
    """What a rubric validation run (§4.2) read of one anchor answer on one criterion of a rubric version.

    Kept apart from judge decisions: no model's figure reads them. `met` is None when the judge's answer
    did not parse (counted, never met or not met); an item the judge never answered has no row."""

    __tablename__ = "anchor_decision"
    __table_args__ = (
        UniqueConstraint("run_id", "rubric_version_id", "anchor", "criterion_id", name="uq_anchor_decision_item"),
        Index("ix_anchor_decision_version", "rubric_version_id", "run_id"),
    )

    id: int = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="judge_run.id")
    case_pk: int = Field(foreign_key="case.id", index=True)
    rubric_version_id: int = Field(foreign_key="rubric_version.id")
    anchor: str = Field(max_length=16, description="reference | refusal | generic")
    criterion_id: str = Field(max_length=64)
    met: bool | None = Field(default=None)


class RubricDraft(SQLModel, table=True):
    """An LLM's drafted criteria for a case (docs/REFERENCE.md §4.3), cached by a hash of (model, messages,
    parameters); the newest readable one of a case waits on its author's page. Never a rubric version."""

    __tablename__ = "rubric_draft"

    id: int = Field(default=None, primary_key=True)
    cache_key: str = Field(max_length=64, unique=True, index=True)
    run_id: int | None = Field(default=None, foreign_key="judge_run.id", index=True)
    case_pk: int = Field(foreign_key="case.id", index=True)
    generator: str = Field(max_length=128)
    #: [{"criterion": str, "tags": [str]}], at most N, cleaned (db.rules.drafting.read_draft)
    criteria: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    #: items dropped or changed, by reason: duplicates, beyond_n, invalid, too_long, control
    dropped: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    parse_ok: bool = Field(default=True)
    raw_output: str = Field(default="", sa_column=Column(Text, nullable=False))
    prompt_tokens: int = Field(default=0)
    completion_tokens: int = Field(default=0)
    latency_ms: float = Field(default=0.0)
    attempts: int = Field(default=1, description="HTTP requests spent, retries and re-asks included")
    created_at: datetime = Field(default_factory=utcnow)


class CriterionProvenance(SQLModel, table=True):
    """Where each criterion of a submitted rubric version came from (drafted, edited, written), and the
    drafted criteria the author left out (deleted: no criterion_id). Written at submission."""

    __tablename__ = "criterion_provenance"

    id: int = Field(default=None, primary_key=True)
    rubric_version_id: int = Field(foreign_key="rubric_version.id", index=True)
    criterion_id: str | None = Field(default=None, max_length=64)
    origin: str = Field(max_length=16)
    draft_id: int | None = Field(default=None, foreign_key="rubric_draft.id")
    generator: str | None = Field(default=None, max_length=128)
    drafted_text: str | None = Field(default=None, sa_column=Column(Text))
    edit_distance: int | None = Field(default=None)
