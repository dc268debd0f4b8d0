"""reference answers and rubric validation runs: anchor answers graded apart from judge decisions

Revision ID: 0027_rubric_validation
Revises: 0026_generated_answer_length

`reference_answer` keeps each case's reference answer (one row per case, replaced by a later import);
`anchor_result` caches a validation run's answers under a hash of the request, and `anchor_decision`
keeps what each run read of each anchor answer (reference, refusal, generic) on each criterion of the
rubric version it graded, apart from `judge_decision` so no model's figure reads them.
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0027_rubric_validation"
down_revision = "0026_generated_answer_length"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reference_answer",
        sa.Column("case_pk", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("updated_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.ForeignKeyConstraint(["case_pk"], ["case.id"]),
        sa.PrimaryKeyConstraint("case_pk"),
    )
    op.create_table(
        "anchor_result",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cache_key", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("raw_output", sa.Text(), nullable=False),
        sa.Column("parse_ok", sa.Boolean(), nullable=False),
        sa.Column("met", sa.Boolean(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["judge_run.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("anchor_result", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_anchor_result_cache_key"), ["cache_key"], unique=True)
        batch_op.create_index(batch_op.f("ix_anchor_result_run_id"), ["run_id"], unique=False)
    op.create_table(
        "anchor_decision",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("case_pk", sa.Integer(), nullable=False),
        sa.Column("rubric_version_id", sa.Integer(), nullable=False),
        sa.Column("anchor", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("criterion_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("met", sa.Boolean(), nullable=True),
        sa.ForeignKeyConstraint(["case_pk"], ["case.id"]),
        sa.ForeignKeyConstraint(["rubric_version_id"], ["rubric_version.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["judge_run.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "rubric_version_id", "anchor", "criterion_id", name="uq_anchor_decision_item"),
    )
    with op.batch_alter_table("anchor_decision", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_anchor_decision_case_pk"), ["case_pk"], unique=False)
        batch_op.create_index("ix_anchor_decision_version", ["rubric_version_id", "run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("anchor_decision", schema=None) as batch_op:
        batch_op.drop_index("ix_anchor_decision_version")
        batch_op.drop_index(batch_op.f("ix_anchor_decision_case_pk"))
    op.drop_table("anchor_decision")
    with op.batch_alter_table("anchor_result", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_anchor_result_run_id"))
        batch_op.drop_index(batch_op.f("ix_anchor_result_cache_key"))
    op.drop_table("anchor_result")
    op.drop_table("reference_answer")
