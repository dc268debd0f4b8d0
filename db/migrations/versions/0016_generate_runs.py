"""generate runs and endpoint shares: a candidate model's answers through the runner the judge uses

Revision ID: 0016_generate_runs
Revises: 0015_disagreement_draws

`judge_run` gains `kind` (judge | generate), `endpoints` (each endpoint's share of a run spread over
several servers) and the counts of truncated and empty answers; `generation_result` caches each
answer of a generate run under a hash of (model, messages, parameters), with what became of it.
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0016_generate_runs"
down_revision = "0015_disagreement_draws"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("judge_run", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False, server_default="judge")
        )
        batch_op.add_column(sa.Column("endpoints", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("truncated", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("empty", sa.Integer(), nullable=False, server_default="0"))

    op.create_table(
        "generation_result",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cache_key", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("case_pk", sa.Integer(), nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("finish_reason", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["case_pk"], ["case.id"]),
        sa.ForeignKeyConstraint(["response_id"], ["response.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["judge_run.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("generation_result", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_generation_result_cache_key"), ["cache_key"], unique=True)
        batch_op.create_index(batch_op.f("ix_generation_result_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_generation_result_case_pk"), ["case_pk"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("generation_result", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_generation_result_case_pk"))
        batch_op.drop_index(batch_op.f("ix_generation_result_run_id"))
        batch_op.drop_index(batch_op.f("ix_generation_result_cache_key"))
    op.drop_table("generation_result")
    with op.batch_alter_table("judge_run", schema=None) as batch_op:
        batch_op.drop_column("empty")
        batch_op.drop_column("truncated")
        batch_op.drop_column("endpoints")
        batch_op.drop_column("kind")
