"""judge totals: how many decisions each judge has, kept

Revision ID: 0022_judge_totals
Revises: 0021_admin_page_indexes

The import page showed the number of judge decisions by counting the whole table on every visit (9.9 M rows at
4× the paper's scale, most of the page's time on PostgreSQL). db/counts now keeps the count per judge as the
judge importer and judge runs insert decisions.
Kept figures are derived from the rows: this revision creates the table empty, and the upgrade
fills every kept figure from the rows once the newest revision is applied (db.migrations.upgrade).
"""

import sqlalchemy as sa
from alembic import op

revision = "0022_judge_totals"
down_revision = "0021_admin_page_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "judge_totals",
        sa.Column("judge", sa.String(length=128), nullable=False),
        sa.Column("n_decisions", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("judge"),
    )


def downgrade() -> None:
    op.drop_table("judge_totals")
