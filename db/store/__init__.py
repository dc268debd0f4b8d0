"""Where rows live: the tables (models), the engine and its transactions, bringing a database to the
newest revision (the revisions are db.migrations'), which rubric version is current, the data version,
the judges that have decisions, the distinct values of an indexed column, and backups.

May import: db.rules.
"""

#: The room's public modules: callers import these, never a private name inside them.
__all__ = ["backup", "current_rubric", "data_version", "distinct", "engine", "judges", "migrate", "models"]
