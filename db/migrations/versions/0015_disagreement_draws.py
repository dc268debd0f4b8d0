"""disagreement draws: the responses drawn where two judges disagree

Revision ID: 0015_disagreement_draws
Revises: 0014_audit_seal

`disagreement_draw`: each response drawn by `assign disagreements` (once), with the two judges and how
many criteria they differed on, so the SFT export can be limited to them.
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0015_disagreement_draws"
down_revision = "0014_audit_seal"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "disagreement_draw",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=False),
        sa.Column("judge_a", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("judge_b", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("n_differing", sa.Integer(), nullable=False),
        sa.Column("drawn_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("drawn_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.ForeignKeyConstraint(["response_id"], ["response.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("response_id"),
    )


def downgrade() -> None:
    op.drop_table("disagreement_draw")
