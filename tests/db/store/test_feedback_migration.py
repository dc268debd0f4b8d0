"""The feedback revision upgrades a database of the revision before it in place (rows kept, feedback off)
and downgrades again, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
from itertools import count

import pytest
from alembic import command
from sqlalchemy import inspect, text

from db.migrations.upgrade import upgrade
from db.store.engine import make_engine
from db.store.migrate import alembic_config, current_revision, head_revision

_names = count()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_database_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'before_feedback.db'}"
    pg_server = request.getfixturevalue("pg_server")
    name = f"cc_feedback_{os.getpid()}_{next(_names)}"
    with pg_server.admin_engine.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    return pg_server.url(name)


def _migrate(engine, revision: str, *, down: bool = False) -> None:
    with engine.connect() as connection:
        config = alembic_config()
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)
        connection.commit()


def test_the_feedback_revision_upgrades_in_place_and_downgrades(empty_database_url):
    engine = make_engine(empty_database_url)
    try:
        _migrate(engine, "0007_oidc_identity")
        assert "feedback_round" not in inspect(engine).get_table_names()
        with engine.begin() as connection:
            connection.execute(
                text(
                    'INSERT INTO "user" (id, username, display_name, role, group_no, is_active,'
                    " created_at, lock_version) VALUES (1, 'boss', 'Boss', 'admin', NULL, true, CURRENT_TIMESTAMP, 1)"
                )
            )
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        assert "feedback_round" in inspect(engine).get_table_names()
        with engine.connect() as connection:
            assert connection.execute(text('SELECT username FROM "user"')).scalars().all() == ["boss"]
            assert connection.execute(text("SELECT count(*) FROM feedback_round")).scalar() == 0  # off by default
        _migrate(engine, "0007_oidc_identity", down=True)
        assert "feedback_round" not in inspect(engine).get_table_names()
        assert current_revision(engine) == "0007_oidc_identity"
    finally:
        engine.dispose()
