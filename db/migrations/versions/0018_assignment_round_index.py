"""an index of each round's assignments

Revision ID: 0018_assignment_round_index
Revises: 0017_run_message_words

A round is the label assignments of one run, named by their `created_at`. Whether the annotator's group has
an assignment in an open round (the feedback page asks on every visit) was answered by going through every
label assignment of the group; with `ix_assignment_round` (created_at, kind, group_no) it is one index probe
per round, whatever the size of the data.
"""

from alembic import op

revision = "0018_assignment_round_index"
down_revision = "0017_run_message_words"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.create_index("ix_assignment_round", ["created_at", "kind", "group_no"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.drop_index("ix_assignment_round")
