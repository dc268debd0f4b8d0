"""A database made by an older release upgrades in place, with its rows (SQLite rebuilds tables for some revisions)."""

from __future__ import annotations

import os
from itertools import count

import pytest
from alembic import command
from sqlalchemy import text

from db.migrations.upgrade import upgrade
from db.store.engine import make_engine
from db.store.migrate import alembic_config, current_revision, head_revision

_names = count()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_database_url(request, tmp_path) -> str:
    """An empty database of each kind (the shared fixtures hand out migrated ones)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'old.db'}"
    pg_server = request.getfixturevalue("pg_server")
    name = f"cc_upgrade_{os.getpid()}_{next(_names)}"
    with pg_server.admin_engine.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    return pg_server.url(name)


def test_a_database_from_revision_0002_with_rows_upgrades_and_keeps_them(empty_database_url):
    engine = make_engine(empty_database_url)
    try:
        with engine.connect() as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, "0002_label_queue_index")
            connection.commit()
        with engine.begin() as connection:
            connection.execute(
                text(
                    'INSERT INTO "user" (id, username, display_name, role, group_no, is_active, password_hash,'
                    " failed_logins, locked_until, created_at, lock_version)"
                    " VALUES (1, 'alice', 'Alice', 'checker', 1, true, NULL, 0, NULL, CURRENT_TIMESTAMP, 0)"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO login_session (id, token_hash, user_id, created_at, expires_at)"
                    " VALUES (1, :digest, 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                ),
                {"digest": "0" * 64},
            )
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        with engine.connect() as connection:
            assert connection.execute(text('SELECT username FROM "user"')).scalars().all() == ["alice"]
            if engine.dialect.name == "sqlite":
                # The rebuilds ran with foreign keys off; they are back on for the pool afterwards.
                assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
                assert connection.exec_driver_sql("PRAGMA foreign_key_check").all() == []
    finally:
        engine.dispose()
