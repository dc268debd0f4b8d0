"""initial schema

Revision ID: 0001_initial_schema
Revises:
Create Date: 2026-12-02 13:48:29.955127
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0001_initial_schema"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("actor", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("action", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("entity", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("entity_key", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("prev_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_log_entity"), ["entity"], unique=False)

    op.create_table(
        "case",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("case_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("difficulty", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("task", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("task_labels", sa.JSON(), nullable=False),
        sa.Column("subject", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("subject_labels", sa.JSON(), nullable=False),
        sa.Column("user_role", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("clinical_context", sa.Text(), nullable=False),
        sa.Column("user_request", sa.Text(), nullable=False),
        sa.Column("register", sa.String(length=16), nullable=True),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("case", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_case_case_id"), ["case_id"], unique=True)

    op.create_table(
        "user",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("display_name", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("group_no", sa.Integer(), nullable=True),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("password_hash", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
        sa.Column("failed_logins", sa.Integer(), nullable=False),
        sa.Column("locked_until", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("lock_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_user_username"), ["username"], unique=True)

    op.create_table(
        "draft",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "key"),
    )
    op.create_table(
        "login_session",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("expires_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("login_session", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_login_session_token_hash"), ["token_hash"], unique=True)
        batch_op.create_index(batch_op.f("ix_login_session_user_id"), ["user_id"], unique=False)

    op.create_table(
        "response",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("case_pk", sa.Integer(), nullable=False),
        sa.Column("model", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.Column("code", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["case_pk"],
            ["case.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("case_pk", "model"),
        sa.UniqueConstraint("code"),
    )
    with op.batch_alter_table("response", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_response_case_pk"), ["case_pk"], unique=False)
        batch_op.create_index(batch_op.f("ix_response_model"), ["model"], unique=False)

    op.create_table(
        "rubric_version",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("case_pk", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("author_id", sa.Integer(), nullable=True),
        sa.Column("reviewer_id", sa.Integer(), nullable=True),
        sa.Column("review_comment", sa.Text(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("submitted_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("reviewed_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("lock_version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["author_id"],
            ["user.id"],
        ),
        sa.ForeignKeyConstraint(
            ["case_pk"],
            ["case.id"],
        ),
        sa.ForeignKeyConstraint(
            ["reviewer_id"],
            ["user.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("case_pk", "version"),
    )
    with op.batch_alter_table("rubric_version", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_rubric_version_case_pk"), ["case_pk"], unique=False)

    op.create_table(
        "assignment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("case_pk", sa.Integer(), nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=True),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("group_no", sa.Integer(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["case_pk"],
            ["case.id"],
        ),
        sa.ForeignKeyConstraint(
            ["created_by"],
            ["user.id"],
        ),
        sa.ForeignKeyConstraint(
            ["response_id"],
            ["response.id"],
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_assignment_case_pk"), ["case_pk"], unique=False)
        batch_op.create_index(batch_op.f("ix_assignment_response_id"), ["response_id"], unique=False)
        batch_op.create_index("ix_assignment_user_kind", ["user_id", "kind"], unique=False)

    op.create_table(
        "criterion",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rubric_version_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("criterion_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("review_comment", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["rubric_version_id"],
            ["rubric_version.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("rubric_version_id", "criterion_id"),
    )
    with op.batch_alter_table("criterion", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_criterion_rubric_version_id"), ["rubric_version_id"], unique=False)

    op.create_table(
        "judge_decision",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("judge", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=False),
        sa.Column("criterion_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("met", sa.Boolean(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["response_id"],
            ["response.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("judge", "response_id", "criterion_id"),
    )
    with op.batch_alter_table("judge_decision", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_judge_decision_response_id"), ["response_id"], unique=False)

    op.create_table(
        "label",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("response_id", sa.Integer(), nullable=False),
        sa.Column("criterion_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("stage", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("group_no", sa.Integer(), nullable=False),
        sa.Column("met", sa.Boolean(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("rubric_version_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("lock_version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["response_id"],
            ["response.id"],
        ),
        sa.ForeignKeyConstraint(
            ["rubric_version_id"],
            ["rubric_version.id"],
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("response_id", "criterion_id", "stage", "group_no"),
    )
    with op.batch_alter_table("label", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_label_user_id"), ["user_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("label", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_label_user_id"))

    op.drop_table("label")
    with op.batch_alter_table("judge_decision", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_judge_decision_response_id"))

    op.drop_table("judge_decision")
    with op.batch_alter_table("criterion", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_criterion_rubric_version_id"))

    op.drop_table("criterion")
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.drop_index("ix_assignment_user_kind")
        batch_op.drop_index(batch_op.f("ix_assignment_response_id"))
        batch_op.drop_index(batch_op.f("ix_assignment_case_pk"))

    op.drop_table("assignment")
    with op.batch_alter_table("rubric_version", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_rubric_version_case_pk"))

    op.drop_table("rubric_version")
    with op.batch_alter_table("response", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_response_model"))
        batch_op.drop_index(batch_op.f("ix_response_case_pk"))

    op.drop_table("response")
    with op.batch_alter_table("login_session", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_login_session_user_id"))
        batch_op.drop_index(batch_op.f("ix_login_session_token_hash"))

    op.drop_table("login_session")
    op.drop_table("draft")
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_user_username"))

    op.drop_table("user")
    with op.batch_alter_table("case", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_case_case_id"))

    op.drop_table("case")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_log_entity"))

    op.drop_table("audit_log")
