"""An upgrade as every command and the app start it: the revisions, then what is derived from the rows.

The revisions import nothing of the product, so what they need from it is handed to them: the audit key
(`audit_key`, read when a revision re-keys or seals an existing log; None when it cannot be read). The kept
figures (db/counts) are derived state: a revision creates their tables, and once the newest revision is
applied they are rebuilt from the rows by today's definition, in one transaction. A database already at
the newest revision is left untouched.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from db.access.audit_key import readable_audit_key
from db.counts.rebuild import rebuild_all
from db.store.engine import get_engine
from db.store.migrate import upgrade as apply_revisions


def upgrade(engine: Engine | None = None) -> None:
    """Bring the database to the newest revision; rebuild the kept figures when any revision was applied."""
    engine = engine or get_engine()
    if apply_revisions(engine, attributes={"audit_key": readable_audit_key}):
        with engine.begin() as connection:
            rebuild_all(connection)
