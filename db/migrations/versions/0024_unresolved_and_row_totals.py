"""unresolved and row totals: the open disagreements per shard of responses, and the case and response rows, kept

Revision ID: 0026
Revises: 0025

Every admin page's sidebar summed the status rows of every response with an unresolved decision (8.5 k at 4× the
paper's scale), and the admins' overview counted every response on each visit. db/counts now keeps the two
unresolved numbers per shard of responses as it rewrites the status rows, and the case and response rows as the
importers insert them. The tables are added and filled by today's db/counts. The assignments page listed the
cases' subjects with DISTINCT over every case; an index on the subject lets it hop from one value to the next.
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
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

    from db import counts

    bind = op.get_bind()
    counts.rebuild_unresolved_totals(bind)
    counts.rebuild_row_totals(bind)


def downgrade() -> None:
    op.drop_index("ix_case_subject", table_name="case")
    op.drop_table("row_totals")
    op.drop_table("unresolved_totals")
