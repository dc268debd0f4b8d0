"""label queue index: a response's labels by stage and group, with their rubric version

Revision ID: 0002_label_queue_index
Revises: 0001_initial_schema

The annotator's queue and progress count, per response, the labels of one stage and group and
the rubric version they were made against; this index answers that without reading the table.
"""

from alembic import op

revision = "0002_label_queue_index"
down_revision = "0001_initial_schema"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_label_response_stage_group", "label", ["response_id", "stage", "group_no", "rubric_version_id"])


def downgrade() -> None:
    op.drop_index("ix_label_response_stage_group", table_name="label")
