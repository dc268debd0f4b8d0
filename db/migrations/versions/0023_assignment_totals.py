"""assignment totals: each person's labeling assignments per group and how many are done, kept

Revision ID: 0023_assignment_totals
Revises: 0022_judge_totals

The progress page counted every labeling assignment per person on each visit (220 k at 4× the paper's scale);
db/counts now keeps the counts as it rewrites the assignments' states and as an assignment changes hands.
Kept figures are derived from the rows: this revision creates the table empty, and the upgrade
fills every kept figure from the rows once the newest revision is applied (db.migrations.upgrade).
"""

import sqlalchemy as sa
from alembic import op

revision = "0023_assignment_totals"
down_revision = "0022_judge_totals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "assignment_totals",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("group_no", sa.Integer(), nullable=False),
        sa.Column("n_assigned", sa.Integer(), nullable=False),
        sa.Column("n_done", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("user_id", "group_no"),
    )


def downgrade() -> None:
    op.drop_table("assignment_totals")
