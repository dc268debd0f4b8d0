"""Bring any database up to the current schema with the Alembic revisions shipped in db/migrations."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from db.engine import get_engine, sqlite_foreign_keys_off

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migrations have no head revision")
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine | None = None) -> None:
    """Apply every revision the database lacks; a database already at head is left untouched."""
    engine = engine or get_engine()
    if current_revision(engine) == head_revision():
        return
    config = alembic_config()
    with engine.connect() as connection, sqlite_foreign_keys_off(connection):
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        connection.commit()
