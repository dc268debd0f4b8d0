"""The Alembic revisions, from the first schema on, and their environment (run by db.store.migrate).

A revision may call any room's rebuild of the state it introduces, as it stood when written, so the
migrations stand above every other room.

May import: every db room.
"""
