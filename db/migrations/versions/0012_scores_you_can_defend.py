"""calibration samples and leaderboard snapshots

Revision ID: 0012_scores_you_can_defend
Revises: 0011_labels_that_count

`calibration_sample`: the responses of each model drawn (once per model) for physicians to label, the
labeled set of the model's prediction-powered score. `leaderboard_snapshot`: frozen, dated leaderboards
with the data version, audit head and rubric versions they were computed from.
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0012_scores_you_can_defend"
down_revision = "0011_labels_that_count"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "calibration_sample",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("drawn_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("drawn_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.ForeignKeyConstraint(["response_id"], ["response.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("response_id"),
    )
    with op.batch_alter_table("calibration_sample", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_calibration_sample_model"), ["model"], unique=False)
    op.create_table(
        "leaderboard_snapshot",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("created_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("leaderboard_snapshot")
    with op.batch_alter_table("calibration_sample", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_calibration_sample_model"))
    op.drop_table("calibration_sample")
