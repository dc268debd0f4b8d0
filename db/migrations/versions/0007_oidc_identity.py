"""oidc identity: the identity-provider account an admin linked to a local account

Revision ID: 0007_oidc_identity
Revises: 0006_kept_figures
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0007_oidc_identity"
down_revision = "0006_kept_figures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.add_column(sa.Column("oidc_identity", sqlmodel.sql.sqltypes.AutoString(length=512), nullable=True))
        batch_op.create_unique_constraint("uq_user_oidc_identity", ["oidc_identity"])


def downgrade() -> None:
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.drop_constraint("uq_user_oidc_identity", type_="unique")
        batch_op.drop_column("oidc_identity")
