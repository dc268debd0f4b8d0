"""adjudication ready: the responses each group's checker may take into adjudication, kept

Revision ID: 0019_adjudication_ready
Revises: 0018_assignment_round_index

A checker takes into adjudication the responses on which their group's annotation labels cover the case's
current rubric, none on an older version, and are all checked. The list was counted from the whole group's
label tally on every visit of the adjudication page, which grew with the data; db/counts now keeps one row
per ready (response, group) as labels, assignments and current rubrics change.
Kept figures are derived from the rows: this revision creates the table empty, and the upgrade
fills every kept figure from the rows once the newest revision is applied (db.migrations.upgrade).
"""

import sqlalchemy as sa
from alembic import op

revision = "0019_adjudication_ready"
down_revision = "0018_assignment_round_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "adjudication_ready",
        sa.Column("response_id", sa.Integer(), nullable=False),
        sa.Column("group_no", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["response_id"], ["response.id"]),
        sa.PrimaryKeyConstraint("response_id", "group_no"),
    )
    with op.batch_alter_table("adjudication_ready", schema=None) as batch_op:
        batch_op.create_index("ix_adjudication_ready_group", ["group_no", "response_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("adjudication_ready", schema=None) as batch_op:
        batch_op.drop_index("ix_adjudication_ready_group")
    op.drop_table("adjudication_ready")
