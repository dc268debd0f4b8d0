"""feedback figures: per annotator and response, the labels where gold differs and those without gold yet

Revision ID: 0010_feedback_figures
Revises: 0009_assignment_state

The annotator's feedback page shows how many of their labels gold confirms and lists the responses where
it differs, a page at a time; the label tally now keeps, of each annotation row's labels that count on
the current rubric, those whose decision's gold differs from the label and those whose decision has no
gold yet (db/counts), so the page reads them instead of comparing every label with gold.
Kept figures are derived from the rows: this revision creates the tables empty, and the upgrade
fills every kept figure from the rows once the newest revision is applied (db.migrations.upgrade).
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_feedback_figures"
down_revision = "0009_assignment_state"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("label_tally", schema=None) as batch_op:
        batch_op.add_column(sa.Column("n_gold_differs", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("n_no_gold", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("label_tally", schema=None) as batch_op:
        batch_op.drop_column("n_no_gold")
        batch_op.drop_column("n_gold_differs")
