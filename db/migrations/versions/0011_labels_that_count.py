"""labels that count: every label names the rubric version it was made on

Revision ID: 0011_labels_that_count
Revises: 0010_feedback_figures

A label counts only when it was made on its case's current rubric (db.store.current_rubric). Labels written
before imports stamped their version have none; each gets the version that was current when it was
written: the newest approved version of its case whose approval (review time, or creation time for a
rubric imported approved) is not after the label's last write (updated_at, else created_at). A label
older than every approved version of its case (its rubric's times were recorded after it, as an import
of cases and labels in one go can do) gets the case's first approved version, the only one it can have
been made on. A case without any approved version leaves its labels without a version: they count
nowhere, like any label on an older version, and stay readable.
Which labels count changes with the stamps; the kept figures that read them are derived and filled by the
upgrade once the newest revision is applied (db.migrations.upgrade).
Downgrading keeps the stamps: the rule of revision 0010_feedback_figures counts a stamped label as it counted
an unstamped one as long as its version is current.
"""

from alembic import op

revision = "0011_labels_that_count"
down_revision = "0010_feedback_figures"
branch_labels = None
depends_on = None

_APPROVED_OF_LABEL = (
    "SELECT rubric_version.id FROM rubric_version JOIN response ON response.case_pk = rubric_version.case_pk "
    "WHERE response.id = label.response_id AND rubric_version.status = 'approved'"
)
_WRITTEN = "COALESCE(label.updated_at, label.created_at)"
_APPROVED_AT = "COALESCE(rubric_version.reviewed_at, rubric_version.created_at)"
STAMP_UNSTAMPED = (
    "UPDATE label SET rubric_version_id = COALESCE("
    f"({_APPROVED_OF_LABEL} AND {_APPROVED_AT} <= {_WRITTEN} ORDER BY rubric_version.version DESC LIMIT 1), "
    f"({_APPROVED_OF_LABEL} ORDER BY rubric_version.version ASC LIMIT 1)"
    ") WHERE rubric_version_id IS NULL"
)


def upgrade() -> None:
    bind = op.get_bind()
    bind.exec_driver_sql(STAMP_UNSTAMPED)


def downgrade() -> None:
    pass
