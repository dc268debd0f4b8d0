"""provider sign-in: when the identity provider issued the sign-in that last opened a session

Each sign-in at the identity provider opens at most one local browser session; once that session
ends (idle, lifetime, sign-out, revocation) the provider's cookie signs nobody in again.

Revision ID: 0015
Revises: 0012
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0015"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.add_column(sa.Column("provider_sign_in_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.drop_column("provider_sign_in_at")
