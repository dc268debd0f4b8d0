"""assignment state: the kept state of each labeling assignment's labels; unchecked labels in the tally

Revision ID: 0009_assignment_state
Revises: 0008_feedback_rounds

The annotator's queue, the sidebar's progress and the progress page read the state of the group's
labels on each assigned response (todo, partial, done, stale, waiting), the labels that count on the
current rubric and that rubric's size from the assignment row; db/counts rewrites them as labels,
assignments and current rubrics change. The label tally also counts the annotation labels whose group
has no check label for them yet, so "check pending" (db.access.independence) reads the tally, not the labels.
Kept figures are derived from the rows: this revision creates the tables empty, and the upgrade
fills every kept figure from the rows once the newest revision is applied (db.migrations.upgrade).
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0009_assignment_state"
down_revision = "0008_feedback_rounds"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.add_column(sa.Column("label_status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True))
        batch_op.add_column(sa.Column("labeled", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("rubric_size", sa.Integer(), nullable=False, server_default="0"))

    with op.batch_alter_table("label_tally", schema=None) as batch_op:
        batch_op.add_column(sa.Column("n_unchecked", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("label_tally", schema=None) as batch_op:
        batch_op.drop_column("n_unchecked")
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.drop_column("rubric_size")
        batch_op.drop_column("labeled")
        batch_op.drop_column("label_status")
