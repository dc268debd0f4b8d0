"""Where rows live: the tables (models), the engine and its transactions, the Alembic revisions and
migration, which rubric version is current, the data version, and backups.

May import: db.rules.
"""
