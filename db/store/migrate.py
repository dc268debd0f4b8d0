"""Bring any database up to the current schema with the Alembic revisions shipped in db/migrations.

A database already at `HEAD_REVISION` is recognised by one query, without loading Alembic and its
revision scripts (a quarter of a second that every command paid before doing anything).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from db.store.engine import get_engine, sqlite_foreign_keys_off

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent.parent / "migrations"
#: The newest revision in db/migrations/versions; tests/db/store/test_foundation_basics.py checks that it is the
#: head Alembic finds, so a new revision cannot be added without it.
HEAD_REVISION = "0031"


def alembic_config(url: str | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migrations have no head revision")
    return head


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def _stored_revision(engine: Engine) -> str | None:
    """The revision recorded in the database by one plain query; None without a (single) record."""
    try:
        with engine.connect() as connection:
            rows = connection.exec_driver_sql("SELECT version_num FROM alembic_version").fetchall()
    except DBAPIError:  # no alembic_version table yet: a new database
        return None
    return str(rows[0][0]) if len(rows) == 1 else None


def upgrade(engine: Engine | None = None) -> None:
    """Apply every revision the database lacks; a database already at head is left untouched."""
    engine = engine or get_engine()
    if _stored_revision(engine) == HEAD_REVISION or current_revision(engine) == head_revision():
        return
    from alembic import command

    config = alembic_config()
    with engine.connect() as connection, sqlite_foreign_keys_off(connection):
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        connection.commit()
