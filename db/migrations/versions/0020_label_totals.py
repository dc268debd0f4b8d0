"""label totals: each person's labels per group and stage, kept, apart for those that count on the current rubric

Revision ID: 0020_label_totals
Revises: 0019_adjudication_ready

The checker's annotator list and the admin's totals summed the whole label tally on every visit, which grew
with the data; db/counts now keeps the sums per (group, stage, person, counts on the current rubric) as labels
and current rubrics change, and marks each tally row with whether it counted when it was written, so a refresh
takes away exactly what the row added.
Kept figures are derived from the rows: this revision creates the table empty, and the upgrade
fills every kept figure from the rows once the newest revision is applied (db.migrations.upgrade).
"""

import sqlalchemy as sa
from alembic import op

revision = "0020_label_totals"
down_revision = "0019_adjudication_ready"
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


def downgrade() -> None:
    op.drop_table("label_totals")
    with op.batch_alter_table("label_tally", schema=None) as batch_op:
        batch_op.drop_column("counting")
