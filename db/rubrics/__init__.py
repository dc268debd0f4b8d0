"""The rubric of a case: authoring, drafts and submission of criteria versions, and what an author got back.

May import: db.access, db.counts, db.store, db.rules.
"""

from db.rubrics.authoring import (
    MAX_CRITERION_CHARS,
    AuthoringView,
    CaseView,
    CriterionInput,
    CriterionView,
    ReturnedWork,
    VersionView,
    authoring_view,
    case_view,
    criteria_of,
    default_criterion_ids,
    latest_version,
    offered_draft,
    read_version,
    require_rubric_assignment,
    returned_to_author,
    save_rubric_draft,
    submit_rubric,
    unchanged_commented,
    validate_inputs,
)

__all__ = [
    "MAX_CRITERION_CHARS",
    "CaseView",
    "CriterionView",
    "VersionView",
    "AuthoringView",
    "CriterionInput",
    "default_criterion_ids",
    "case_view",
    "criteria_of",
    "latest_version",
    "offered_draft",
    "require_rubric_assignment",
    "authoring_view",
    "read_version",
    "validate_inputs",
    "save_rubric_draft",
    "submit_rubric",
    "ReturnedWork",
    "returned_to_author",
    "unchanged_commented",
]
