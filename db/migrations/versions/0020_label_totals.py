"""label totals: each person's labels per group and stage, kept, apart for those that count on the current rubric

Revision ID: 0022
Revises: 0021

The checker's annotator list and the admin's totals summed the whole label tally on every visit, which grew
with the data; db/counts now keeps the sums per (group, stage, person, counts on the current rubric) as labels
and current rubrics change, and marks each tally row with whether it counted when it was written, so a refresh
takes away exactly what the row added. The tally with its marks and totals, then the labeling assignments'
states and the responses ready for adjudication read from it, are rebuilt by today's db/counts (the
rebuilds of revisions 0011 and 0021 moved here; the assignments' rebuild moved on to revision 0025).
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("label_tally", schema=None) as batch_op:
        batch_op.add_column(sa.Column("counting", sa.Boolean(), nullable=False, server_default=sa.true()))
    op.create_table(
        "label_totals",
        sa.Column("group_no", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("counting", sa.Boolean(), nullable=False),
        sa.Column("n_responses", sa.Integer(), nullable=False),
        sa.Column("n_labels", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("group_no", "stage", "user_id", "counting"),
    )

    from db import counts

    bind = op.get_bind()
    counts.rebuild_tally(bind)  # with the gold figures, the marks and the totals
    # The assignments' states and the responses ready for adjudication: rebuilt by revision 0025, which adds the
    # per-person assignment totals that rebuild writes too.


def downgrade() -> None:
    op.drop_table("label_totals")
    with op.batch_alter_table("label_tally", schema=None) as batch_op:
        batch_op.drop_column("counting")
