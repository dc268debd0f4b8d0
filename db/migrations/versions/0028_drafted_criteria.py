"""drafted criteria: LLM drafts of a case's criteria, and the provenance of each submitted criterion

Revision ID: 0028_drafted_criteria
Revises: 0027_rubric_validation

`rubric_draft` keeps each drafting answer (its cache key, the kept criteria, what was dropped);
`rubric_version.draft_id` names the draft an author's version started from; `criterion_provenance`
records, at submission, each criterion's origin (drafted, edited with its edit distance, written) and
the drafted criteria left out (deleted). docs/REFERENCE.md §4.3.
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0028_drafted_criteria"
down_revision = "0027_rubric_validation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rubric_draft",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("cache_key", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("judge_run.id"), nullable=True),
        sa.Column("case_pk", sa.Integer(), sa.ForeignKey("case.id"), nullable=False),
        sa.Column("generator", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("criteria", sa.JSON(), nullable=False),
        sa.Column("dropped", sa.JSON(), nullable=False),
        sa.Column("parse_ok", sa.Boolean(), nullable=False),
        sa.Column("raw_output", sa.Text(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    )
    op.create_index("ix_rubric_draft_cache_key", "rubric_draft", ["cache_key"], unique=True)
    op.create_index("ix_rubric_draft_run_id", "rubric_draft", ["run_id"])
    op.create_index("ix_rubric_draft_case_pk", "rubric_draft", ["case_pk"])
    with op.batch_alter_table("rubric_version") as batch:
        batch.add_column(sa.Column("draft_id", sa.Integer(), nullable=True))
        batch.create_foreign_key("fk_rubric_version_draft_id", "rubric_draft", ["draft_id"], ["id"])
    op.create_table(
        "criterion_provenance",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("rubric_version_id", sa.Integer(), sa.ForeignKey("rubric_version.id"), nullable=False),
        sa.Column("criterion_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("origin", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("draft_id", sa.Integer(), sa.ForeignKey("rubric_draft.id"), nullable=True),
        sa.Column("generator", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
        sa.Column("drafted_text", sa.Text(), nullable=True),
        sa.Column("edit_distance", sa.Integer(), nullable=True),
    )
    op.create_index("ix_criterion_provenance_rubric_version_id", "criterion_provenance", ["rubric_version_id"])


def downgrade() -> None:
    op.drop_index("ix_criterion_provenance_rubric_version_id", table_name="criterion_provenance")
    op.drop_table("criterion_provenance")
    with op.batch_alter_table("rubric_version") as batch:
        batch.drop_constraint("fk_rubric_version_draft_id", type_="foreignkey")
        batch.drop_column("draft_id")
    op.drop_index("ix_rubric_draft_case_pk", table_name="rubric_draft")
    op.drop_index("ix_rubric_draft_run_id", table_name="rubric_draft")
    op.drop_index("ix_rubric_draft_cache_key", table_name="rubric_draft")
    op.drop_table("rubric_draft")
