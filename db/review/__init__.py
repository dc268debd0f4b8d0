"""The checker's work: rubric audit, label check within a group, cross-group adjudication.

Every rule of the checker's side lives here, so a page (or a crafted request) cannot skip one:
- role: only active checkers act; a checker of group g sees and checks group g's labels only;
- blinding: nothing here hands a checker a model name (responses travel by their opaque code),
  and adjudication shows the two groups' labels as A and B in a per-cell, per-checker random order;
- separation of duties: no checking one's own labels, no adjudicating a response one labeled,
  no approving a rubric one wrote;
- independence: disagreement figures reach a checker only on responses closed to them (taken into
  adjudication, db.access.independence); admins see every response's;
- concurrency: every save names the revision it started from (`seen_lock_version`, None for a
  new row); a save that lost a race raises StaleEdit carrying the newer value;
- every change is written to the audit log in the same transaction.

May import: db.labeling, db.label_rows (every label row is written there), db.rubrics,
db.access, db.counts, db.store, db.rules.
"""

from db.access.independence import count_ready_for_adjudication, ready_for_adjudication, take_into_adjudication
from db.review.adjudication import (
    AdjudicationCell,
    AdjudicationInput,
    AdjudicationQueueItem,
    AdjudicationView,
    OpenDisagreements,
    Side,
    a_is_group1,
    adjudicate,
    adjudicate_many,
    adjudication_queue,
    adjudication_view,
    all_open_disagreements,
    my_open_disagreements,
    my_unresolved_count,
    unresolved_count,
)
from db.review.label_check import (
    CHECK_ALL,
    CHECK_JUDGE,
    CHECK_SAMPLE,
    AnnotatorSummary,
    CheckInput,
    CheckQueueItem,
    CheckQueueWindow,
    CheckRow,
    CheckView,
    check_annotators,
    check_queue,
    check_queue_counts,
    check_queue_page,
    check_queue_window,
    check_view,
    sample_responses,
    save_check,
    save_checks,
)
from db.review.rubric_audit import (
    CriterionView,
    RelabelItem,
    RubricQueueItem,
    RubricView,
    approve_rubric,
    labels_needing_relabel,
    return_rubric,
    rubric_for_review,
    rubric_queue,
)
from db.review.shared import (
    AB_ORDER_SALT,
    CaseText,
    current_rubric_version_id,
)
from db.store.judges import judge_names

__all__ = [
    "CHECK_ALL",
    "CHECK_JUDGE",
    "CHECK_SAMPLE",
    "AB_ORDER_SALT",
    "AdjudicationCell",
    "AdjudicationInput",
    "AdjudicationQueueItem",
    "AdjudicationView",
    "AnnotatorSummary",
    "CaseText",
    "CheckInput",
    "CheckQueueItem",
    "CheckQueueWindow",
    "CheckRow",
    "CheckView",
    "CriterionView",
    "RelabelItem",
    "RubricQueueItem",
    "RubricView",
    "Side",
    "a_is_group1",
    "adjudicate",
    "adjudicate_many",
    "adjudication_queue",
    "adjudication_view",
    "approve_rubric",
    "check_annotators",
    "count_ready_for_adjudication",
    "check_queue",
    "check_queue_counts",
    "check_queue_page",
    "check_queue_window",
    "check_view",
    "current_rubric_version_id",
    "judge_names",
    "my_unresolved_count",
    "my_open_disagreements",
    "all_open_disagreements",
    "OpenDisagreements",
    "labels_needing_relabel",
    "return_rubric",
    "rubric_for_review",
    "ready_for_adjudication",
    "rubric_queue",
    "sample_responses",
    "save_check",
    "save_checks",
    "take_into_adjudication",
    "unresolved_count",
]
