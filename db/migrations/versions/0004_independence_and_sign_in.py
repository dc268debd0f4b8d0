"""independence and sign-in: adjudication openings, login throttle per username, idle timeout, keyed audit chain

Revision ID: 0004_independence_and_sign_in
Revises: 0003_label_timing

- `adjudication_opening`: which checker has seen both groups' labels of which response.
- `login_throttle`: failed sign-ins per username tried (known or not); replaces the per-account
  counters of `user`, which could not be counted atomically.
- `login_session.last_seen_at`: the idle timeout.
- The audit chain becomes keyed (HMAC-SHA-256): an existing chain is first verified with the old
  unkeyed hash, then every entry is re-linked with the key. Both hashes are frozen here as they were
  at this revision; the key is the one the upgrade is handed (`audit_key` in the migration context's
  attributes, given by db.migrations.upgrade), so the revision imports nothing of the product.
"""

import hashlib
import hmac
import json

import sqlalchemy as sa
import sqlmodel
from alembic import context, op

revision = "0004_independence_and_sign_in"
down_revision = "0003_label_timing"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "adjudication_opening",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=False),
        sa.Column("opened_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["response_id"], ["response.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "response_id"),
    )
    with op.batch_alter_table("adjudication_opening", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_adjudication_opening_response_id"), ["response_id"], unique=False)

    op.create_table(
        "login_throttle",
        sa.Column("username_key", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("locked_until", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("username_key"),
    )
    with op.batch_alter_table("login_session", schema=None) as batch_op:
        batch_op.add_column(sa.Column("last_seen_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
    op.execute("UPDATE login_session SET last_seen_at = created_at")
    with op.batch_alter_table("login_session", schema=None) as batch_op:
        batch_op.alter_column("last_seen_at", existing_type=sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False)
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.drop_column("failed_logins")
        batch_op.drop_column("locked_until")
    _key_the_audit_chain()


def downgrade() -> None:
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.add_column(sa.Column("locked_until", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column("failed_logins", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("login_session", schema=None) as batch_op:
        batch_op.drop_column("last_seen_at")
    op.drop_table("login_throttle")
    with op.batch_alter_table("adjudication_opening", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_adjudication_opening_response_id"))
    op.drop_table("adjudication_opening")


def _unkeyed_hash(prev_hash, at, actor, action, entity, entity_key, before, after) -> str:
    # The hash of revisions 0001-0002, frozen here: only this migration still reads it.
    payload = json.dumps(
        [
            prev_hash,
            at.replace(tzinfo=None).isoformat(timespec="microseconds"),
            actor,
            action,
            entity,
            entity_key,
            before,
            after,
        ],
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


GENESIS_HASH = "0" * 64


def _keyed_hash(prev_hash, at, actor, action, entity, entity_key, before, after, *, key: bytes) -> str:
    # The keyed hash of this revision, frozen here: HMAC-SHA-256 of the same sorted, compact JSON.
    payload = json.dumps(
        [
            prev_hash,
            at.replace(tzinfo=None).isoformat(timespec="microseconds"),
            actor,
            action,
            entity,
            entity_key,
            before,
            after,
        ],
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hmac.new(key, payload.encode("utf-8"), hashlib.sha256).hexdigest()


def _handed_key() -> bytes | None:
    read_key = context.config.attributes.get("audit_key")
    return read_key() if read_key is not None else None


def _key_the_audit_chain() -> None:
    connection = op.get_bind()
    log = sa.table(
        "audit_log",
        sa.column("id", sa.Integer),
        sa.column("at", sqlmodel.sql.sqltypes.UTCDateTime()),
        sa.column("actor"),
        sa.column("action"),
        sa.column("entity"),
        sa.column("entity_key"),
        sa.column("before", sa.JSON),
        sa.column("after", sa.JSON),
        sa.column("prev_hash"),
        sa.column("hash"),
    )
    if connection.execute(sa.select(sa.func.count()).select_from(log)).scalar_one() == 0:
        return
    key = _handed_key()
    if key is None:
        raise RuntimeError("the audit log has entries and no audit key was given: the chain cannot be re-keyed")
    old_prev, new_prev = GENESIS_HASH, GENESIS_HASH
    last_id = 0
    while True:
        rows = connection.execute(sa.select(log).where(log.c.id > last_id).order_by(log.c.id).limit(5000)).all()
        if not rows:
            return
        updates = []
        for row in rows:
            fields = (row.at, row.actor, row.action, row.entity, row.entity_key, row.before, row.after)
            if row.prev_hash != old_prev or _unkeyed_hash(row.prev_hash, *fields) != row.hash:
                raise RuntimeError(f"audit log entry {row.id} does not match its hash; the chain is not re-keyed")
            old_prev = row.hash
            new_hash = _keyed_hash(new_prev, *fields, key=key)
            updates.append({"row_id": row.id, "new_prev": new_prev, "new_hash": new_hash})
            new_prev = new_hash
            last_id = row.id
        connection.execute(
            log.update()
            .where(log.c.id == sa.bindparam("row_id"))
            .values(prev_hash=sa.bindparam("new_prev"), hash=sa.bindparam("new_hash")),
            updates,
        )
