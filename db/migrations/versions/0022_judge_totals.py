"""judge totals: how many decisions each judge has, kept

Revision ID: 0024
Revises: 0023

The import page showed the number of judge decisions by counting the whole table on every visit (9.9 M rows at
4× the paper's scale, most of the page's time on PostgreSQL). db/counts now keeps the count per judge as the
judge importer and judge runs insert decisions; it is filled here from the decisions already stored, by
today's db/counts.
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "judge_totals",
        sa.Column("judge", sa.String(length=128), nullable=False),
        sa.Column("n_decisions", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("judge"),
    )

    from db import counts

    counts.rebuild_judge_totals(op.get_bind())


def downgrade() -> None:
    op.drop_table("judge_totals")
