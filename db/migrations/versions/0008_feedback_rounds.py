"""feedback rounds: which labeling rounds an admin opened for feedback to annotators

Revision ID: 0008_feedback_rounds
Revises: 0007_oidc_identity

A round is the label assignments one assignment run made (they share `assignment.created_at`).
Feedback is off until an admin opens a round; a row here records its current state.
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0008_feedback_rounds"
down_revision = "0007_oidc_identity"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "feedback_round",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("round_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("is_open", sa.Boolean(), nullable=False),
        sa.Column("changed_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("changed_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("feedback_round", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_feedback_round_round_at"), ["round_at"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("feedback_round", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_feedback_round_round_at"))
    op.drop_table("feedback_round")
