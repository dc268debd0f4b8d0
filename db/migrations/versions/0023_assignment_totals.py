"""assignment totals: each person's labeling assignments per group and how many are done, kept

Revision ID: 0025
Revises: 0024

The progress page counted every labeling assignment per person on each visit (220 k at 4× the paper's scale);
db/counts now keeps the counts as it rewrites the assignments' states and as an assignment changes hands. The
table is added, then the assignments' states, these totals and the responses ready for adjudication are rebuilt
by today's db/counts (the rebuild of revision 0022 moves to this newest revision that changes what it writes).
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
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

    from db import counts

    counts.rebuild_assignments(op.get_bind())


def downgrade() -> None:
    op.drop_table("assignment_totals")
