"""judge runs: a record per run of an LLM judge and a result cache per item

Revision ID: 0005_judge_runs
Revises: 0004_independence_and_sign_in

`judge_run` records what was asked of which endpoint (never the API key) and how it went;
`judge_result` keeps each answer (raw output, parse outcome, tokens, latency) under a hash of
(model, messages, parameters), so a re-run or a resumed run sends nothing already answered.
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0005_judge_runs"
down_revision = "0004_independence_and_sign_in"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "judge_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("judge", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("base_url", sqlmodel.sql.sqltypes.AutoString(length=512), nullable=False),
        sa.Column("model", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("template", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("template_sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("created_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("started_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("finished_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("heartbeat_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("cached", sa.Integer(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("parse_failures", sa.Integer(), nullable=False),
        sa.Column("errors", sa.Integer(), nullable=False),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("reasks", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("wall_seconds", sa.Float(), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("judge_run", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_judge_run_judge"), ["judge"], unique=False)

    op.create_table(
        "judge_result",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cache_key", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=False),
        sa.Column("criterion_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("raw_output", sa.Text(), nullable=False),
        sa.Column("parse_ok", sa.Boolean(), nullable=False),
        sa.Column("met", sa.Boolean(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["response_id"], ["response.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["judge_run.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("judge_result", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_judge_result_cache_key"), ["cache_key"], unique=True)
        batch_op.create_index(batch_op.f("ix_judge_result_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_judge_result_response_id"), ["response_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("judge_result", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_judge_result_response_id"))
        batch_op.drop_index(batch_op.f("ix_judge_result_run_id"))
        batch_op.drop_index(batch_op.f("ix_judge_result_cache_key"))
    op.drop_table("judge_result")
    with op.batch_alter_table("judge_run", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_judge_run_judge"))
    op.drop_table("judge_run")
