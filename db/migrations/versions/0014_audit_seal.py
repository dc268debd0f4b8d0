"""audit seal: the chain's head kept beside the log, so entries deleted from its end are noticed

Revision ID: 0016
Revises: 0015

`audit_seal` holds one row: how many entries the log has and the hash of the last, with an HMAC of
both under the chain's key (db/access/audit.py), rewritten with every entry. An existing log gets its row
here, sealed when the key can be read (CLINCONSENSUS_AUDIT_KEY or an existing key file); otherwise
the next audited change seals it (until then `audit verify` says the head is not sealed).
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_seal",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("seal", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    from db.access.audit_seal import seal_existing_log

    seal_existing_log(op.get_bind())


def downgrade() -> None:
    op.drop_table("audit_seal")
