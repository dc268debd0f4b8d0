"""drop row totals: the case and response rows are counted where they are read

Revision ID: 0030_drop_row_totals
Revises: 0029_feedback_final_gold

`row_totals` kept how many cases and responses there are for the admins' overview and progress pages. Measured
on the full demo, counting the two tables directly costs as much on SQLite and about a millisecond more on
PostgreSQL (docs/performance.md, "Removed, measured"): nothing against the pages' bar, so the table goes and the
readers count. The downgrade recreates the table as revision 0024 made it and fills it with the two counts.
"""

import sqlalchemy as sa
from alembic import op

revision = "0030_drop_row_totals"
down_revision = "0029_feedback_final_gold"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("row_totals")


def downgrade() -> None:
    op.create_table(
        "row_totals",
        sa.Column("table_name", sa.String(length=32), nullable=False),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("table_name"),
    )
    op.execute(
        "INSERT INTO row_totals (table_name, n_rows)"
        " SELECT 'case', COUNT(*) FROM \"case\""
        " UNION ALL SELECT 'response', COUNT(*) FROM response"
    )
