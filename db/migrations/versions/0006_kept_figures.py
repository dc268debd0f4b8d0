"""kept figures: label counts per response, group, stage, person and rubric version; per-response disagreement status

Revision ID: 0006_kept_figures
Revises: 0005_judge_runs

The checker pages, the sidebar and the progress page read these small tables instead of recounting
every label; db/counts rewrites the rows of the responses each save or import touches. An index on
label.updated_at lets the data version read the newest label edit without a scan.
Kept figures are derived from the rows: this revision creates the tables empty, and the upgrade
fills every kept figure from the rows once the newest revision is applied (db.migrations.upgrade).
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_kept_figures"
down_revision = "0005_judge_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "label_tally",
        sa.Column("response_id", sa.Integer(), sa.ForeignKey("response.id"), primary_key=True),
        sa.Column("group_no", sa.Integer(), primary_key=True),
        sa.Column("stage", sa.String(length=16), primary_key=True),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("user.id"), primary_key=True),
        sa.Column("rubric_version_id", sa.Integer(), primary_key=True),
        sa.Column("n", sa.Integer(), nullable=False),
    )
    op.create_index("ix_label_tally_user", "label_tally", ["user_id", "stage", "group_no"])
    op.create_index("ix_label_tally_group_stage", "label_tally", ["group_no", "stage"])
    op.create_table(
        "response_status",
        sa.Column("response_id", sa.Integer(), sa.ForeignKey("response.id"), primary_key=True),
        sa.Column("n_compared", sa.Integer(), nullable=False),
        sa.Column("n_differing", sa.Integer(), nullable=False),
        sa.Column("n_unresolved", sa.Integer(), nullable=False),
        sa.Column("n_gold", sa.Integer(), nullable=False),
    )
    op.create_index("ix_response_status_n_unresolved", "response_status", ["n_unresolved"])

    # The data version (analysis/loader.py) reads the newest label edit through this index.
    op.create_index("ix_label_updated_at", "label", ["updated_at"])


def downgrade() -> None:
    op.drop_index("ix_label_updated_at", table_name="label")
    op.drop_index("ix_response_status_n_unresolved", table_name="response_status")
    op.drop_table("response_status")
    op.drop_index("ix_label_tally_group_stage", table_name="label_tally")
    op.drop_index("ix_label_tally_user", table_name="label_tally")
    op.drop_table("label_tally")
