"""generated answer length: a refused or cut answer keeps its first characters and its length

Revision ID: 0026_generated_answer_length
Revises: 0025_queue_lookup_indexes

A generate run keeps every answer it did not turn into a response (truncated, empty, refused) in
`generation_result` for inspection. A refused answer can be any size an endpoint sends (two answers of
10 MB took the database from 2.8 to 66 MB), so such answers now keep their first 4,000 characters and,
in `text_length`, how long they were. Rows written before keep their whole text; their length is
filled in here.
"""

import sqlalchemy as sa
from alembic import op

revision = "0026_generated_answer_length"
down_revision = "0025_queue_lookup_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("generation_result") as batch:
        batch.add_column(sa.Column("text_length", sa.Integer(), nullable=True))
    op.execute("UPDATE generation_result SET text_length = LENGTH(text)")


def downgrade() -> None:
    with op.batch_alter_table("generation_result") as batch:
        batch.drop_column("text_length")
