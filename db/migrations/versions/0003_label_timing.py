"""label timing: active time per saved response, for time-on-task figures

Revision ID: 0003_label_timing
Revises: 0002_label_queue_index

A save of a response's labels records how long its author actively worked on it (idle stretches
over a minute are not counted), so admins can see per-annotator medians and very fast decisions.
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0003_label_timing"
down_revision = "0002_label_queue_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "label_timing",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=False),
        sa.Column("stage", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("rubric_version_id", sa.Integer(), nullable=True),
        sa.Column("active_ms", sa.Integer(), nullable=False),
        sa.Column("n_criteria", sa.Integer(), nullable=False),
        sa.Column("saved_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.ForeignKeyConstraint(["response_id"], ["response.id"]),
        sa.ForeignKeyConstraint(["rubric_version_id"], ["rubric_version.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("label_timing", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_label_timing_response_id"), ["response_id"], unique=False)
        batch_op.create_index("ix_label_timing_user_saved", ["user_id", "saved_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("label_timing", schema=None) as batch_op:
        batch_op.drop_index("ix_label_timing_user_saved")
        batch_op.drop_index(batch_op.f("ix_label_timing_response_id"))
    op.drop_table("label_timing")
