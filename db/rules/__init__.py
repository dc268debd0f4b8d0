"""What holds without a database: the words and limits every room shares, the pure rules (gold and the
final label, rubric lint, taxonomy, record shapes), password hashing and private files, and progress reporting.

May import: the standard library and pure third-party packages. No SQL, no other db room.
"""

#: The room's public modules: callers import these, never a private name inside them.
__all__ = [
    "config",
    "contacts",
    "enums",
    "errors",
    "gold",
    "limits",
    "lint",
    "notes",
    "progress_report",
    "records",
    "security",
    "taxonomy",
]
