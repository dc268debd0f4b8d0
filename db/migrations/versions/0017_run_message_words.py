"""a run's note in the reader's language

Revision ID: 0017_run_message_words
Revises: 0016_generate_runs

`judge_run.message` keeps the English note the command line prints; `message_said` keeps the same
note as a catalog entry with its parameters (db.rules.errors.said_record), so the Judge runs page can say
why a run ended in the reader's language. Runs ended before this revision keep their English note.
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_run_message_words"
down_revision = "0016_generate_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("judge_run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("message_said", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("judge_run", schema=None) as batch_op:
        batch_op.drop_column("message_said")
