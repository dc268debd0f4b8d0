"""audit seal: the chain's head kept beside the log, so entries deleted from its end are noticed

Revision ID: 0014_audit_seal
Revises: 0013_provider_sign_in

`audit_seal` holds one row: how many entries the log has and the hash of the last, with an HMAC of
both under the chain's key (db/access/audit.py), rewritten with every entry. An existing log gets its row
here, sealed when the upgrade is handed the key (`audit_key` in the migration context's attributes, given
by db.migrations.upgrade); otherwise the next audited change seals it (until then `audit verify` says the
head is not sealed). The seal's formula is frozen here as it was at this revision.
"""

import hashlib
import hmac
import json

import sqlalchemy as sa
import sqlmodel
from alembic import context, op

revision = "0014_audit_seal"
down_revision = "0013_provider_sign_in"
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
    connection = op.get_bind()
    log = sa.table("audit_log", sa.column("id", sa.Integer), sa.column("hash"))
    entries = connection.execute(sa.select(sa.func.count()).select_from(log)).scalar_one()
    last = connection.execute(sa.select(log.c.hash).order_by(log.c.id.desc()).limit(1)).scalar_one_or_none()
    last_hash = last or "0" * 64
    read_key = context.config.attributes.get("audit_key")
    key = read_key() if entries and read_key is not None else None
    seal = None
    if key is not None:
        payload = json.dumps(["audit-head", int(entries), last_hash], separators=(",", ":"))
        seal = hmac.new(key, payload.encode("ascii"), hashlib.sha256).hexdigest()
    seal_table = sa.table("audit_seal", sa.column("id"), sa.column("entries"), sa.column("hash"), sa.column("seal"))
    connection.execute(sa.insert(seal_table).values(id=1, entries=entries, hash=last_hash, seal=seal))


def downgrade() -> None:
    op.drop_table("audit_seal")
