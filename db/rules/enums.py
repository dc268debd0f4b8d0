"""The words of the data model: roles, rubric states, label stages, assignment kinds.

Stored as short strings, so SQLite and PostgreSQL read them the same way. No SQL here: the pure
analysis code and the gold rule use them too.
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    admin = "admin"
    annotator = "annotator"
    checker = "checker"


class RubricStatus(StrEnum):
    draft = "draft"
    submitted = "submitted"
    approved = "approved"
    returned = "returned"


class Stage(StrEnum):
    annotation = "annotation"
    check = "check"
    adjudication = "adjudication"


class AssignmentKind(StrEnum):
    rubric = "rubric"
    label = "label"


#: `label.group_no` of an adjudication, which belongs to no group (docs/REFERENCE.md §3.3 writes null).
NO_GROUP = 0


class JudgeRunStatus(StrEnum):
    pending = "pending"
    running = "running"
    finished = "finished"
    cancelled = "cancelled"
    failed = "failed"
