"""admin page indexes: the audit log's actors, the assignment list's cases and the progress counts, through indexes

Revision ID: 0021_admin_page_indexes
Revises: 0020_label_totals

- The audit log page offers every actor and entity that occurs in the log as filters. Both are read by hopping
  from one value to the next through the column's index (db.store.distinct), where DISTINCT read every entry:
  the entity had an index already, the actor gets one.
- The assignment list shows the first assignments in case order: it finds the first cases with assignments of
  the kind through the case_id index, each asked whether it has one (`ix_assignment_case_kind`).
- The progress page counts assigned and done per person from `ix_assignment_progress` alone.
"""

from alembic import op

revision = "0021_admin_page_indexes"
down_revision = "0020_label_totals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_log_actor"), ["actor"], unique=False)
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.create_index("ix_assignment_case_kind", ["case_pk", "kind"], unique=False)
        batch_op.create_index("ix_assignment_progress", ["kind", "user_id", "group_no", "label_status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.drop_index("ix_assignment_progress")
        batch_op.drop_index("ix_assignment_case_kind")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_log_actor"))
