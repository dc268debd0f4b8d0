"""unresolved totals: the decisions nobody adjudicated yet and the responses holding them, kept per shard

Revision ID: 0026
Revises: 0025

Every admin page's sidebar summed the status rows of every response with an unresolved decision (8.5 k at 4× the
paper's scale); db/counts now keeps the two numbers per shard of responses as it rewrites the status rows. The
table is added and filled from the status rows by today's db/counts.
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

    from db import counts

    counts.rebuild_unresolved_totals(op.get_bind())


def downgrade() -> None:
    op.drop_table("unresolved_totals")
