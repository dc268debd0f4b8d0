"""What holds without a database: the words and limits every room shares, the pure rules (gold and the
final label, rubric lint, taxonomy, record shapes), password hashing and private files, and progress reporting.

May import: the standard library and pure third-party packages. No SQL, no other db room.
"""
