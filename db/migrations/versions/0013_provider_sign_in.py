"""provider sign-in: when the identity provider issued the sign-in that last opened a session

Each sign-in at the identity provider opens at most one local browser session; once that session
ends (idle, lifetime, sign-out, revocation) the provider's cookie signs nobody in again.

Revision ID: 0013_provider_sign_in
Revises: 0012_scores_you_can_defend
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0013_provider_sign_in"
down_revision = "0012_scores_you_can_defend"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column: a plain ALTER TABLE on both databases (no rebuild of the user table, which other
    # tables reference).
    op.add_column("user", sa.Column("provider_sign_in_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))


def downgrade() -> None:
    # ALTER TABLE … DROP COLUMN (SQLite 3.35 and later, PostgreSQL): no rebuild of the referenced user table.
    op.execute('ALTER TABLE "user" DROP COLUMN provider_sign_in_at')
