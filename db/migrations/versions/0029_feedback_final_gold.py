"""feedback on final gold: the tally's feedback figures compare an annotator's labels with final gold only

Revision ID: 0029_feedback_final_gold
Revises: 0028_drafted_criteria

`label_tally.n_gold_differs` now counts labels on final responses (docs/REFERENCE.md §4.1) whose gold
differs, and `n_no_gold` every label on a response that is not final yet. No table changes: the kept
figures are derived state, and the upgrade rebuilds every one of them by today's definition once the
newest revision is applied (db.migrations.upgrade), which this revision is there to cause.
"""

revision = "0029_feedback_final_gold"
down_revision = "0028_drafted_criteria"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing to change in the schema; the kept figures are rebuilt after the upgrade."""


def downgrade() -> None:
    """Nothing to change in the schema."""
