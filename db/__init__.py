"""Persistence, import, accounts and the access rules of ClinConsensus Studio, in rooms that are layers.

Each room imports only the rooms below it (an import-linter layers contract in pyproject.toml), top
first: migrations, work, review | importers, labeling, rubrics, access, counts, store, rules. Each
room's `__init__` says what it decides and what it may import; docs/ARCHITECTURE.md has the table.
db imports no other room of the project.
"""
