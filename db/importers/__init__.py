"""Importers for cases, responses, labels and judge decisions (docs/REFERENCE.md §3.1–§3.4).

A file is read as a stream, one line at a time, validated, and written in chunks inside ONE
transaction: a file with any error lands nothing, and every error names the file, the line and
the field (`cases.jsonl line 4: rubrics has 29 criteria, 30 required`). Importing the same file
twice changes nothing; a changed record replaces the stored one and the old value goes to the
audit log.

Bulk rows (labels, judge decisions, criteria) go through the driver directly: executemany on
SQLite, COPY on PostgreSQL, so a 1.65 M-line labels file imports in well under a minute.

May import: db.labeling, db.label_rows (every label row is written there), db.rubrics,
db.access, db.counts, db.store, db.rules.
"""

from db.importers.dispatch import import_file, import_stream
from db.importers.import_summary import JUDGE_FORMATS, KINDS, MAX_ERRORS, ImportFailed, ImportSummary
from db.importers.judge import model_of_judgement_file
from db.importers.writing import new_response_code

__all__ = [
    "JUDGE_FORMATS",
    "KINDS",
    "MAX_ERRORS",
    "ImportFailed",
    "ImportSummary",
    "import_file",
    "import_stream",
    "model_of_judgement_file",
    "new_response_code",
]
