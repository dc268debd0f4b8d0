"""unresolved and row totals: the open disagreements per shard of responses, and the case and response rows, kept

Revision ID: 0024_unresolved_and_row_totals
Revises: 0023_assignment_totals

Every admin page's sidebar summed the status rows of every response with an unresolved decision (8.5 k at 4× the
paper's scale), and the admins' overview counted every response on each visit. db/counts now keeps the two
unresolved numbers per shard of responses as it rewrites the status rows, and the case and response rows as the
importers insert them. The assignments page listed the
cases' subjects with DISTINCT over every case; an index on the subject lets it hop from one value to the next.
Kept figures are derived from the rows: this revision creates the tables empty, and the upgrade
fills every kept figure from the rows once the newest revision is applied (db.migrations.upgrade).
"""

import sqlalchemy as sa
from alembic import op

revision = "0024_unresolved_and_row_totals"
down_revision = "0023_assignment_totals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "unresolved_totals",
        sa.Column("shard", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("n_decisions", sa.Integer(), nullable=False),
        sa.Column("n_responses", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("shard"),
    )
    op.create_table(
        "row_totals",
        sa.Column("table_name", sa.String(length=32), nullable=False),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("table_name"),
    )

    op.create_index("ix_case_subject", "case", ["subject"])


def downgrade() -> None:
    op.drop_index("ix_case_subject", table_name="case")
    op.drop_table("row_totals")
    op.drop_table("unresolved_totals")
