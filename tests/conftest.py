"""The test session owns its databases: a migrated SQLite file and a real PostgreSQL server.

`engine` runs a test on both; `sqlite_engine` on SQLite only. Each test gets a fresh database
copied from a template that was migrated once. Set CLINCONSENSUS_REQUIRE_POSTGRES=1 (CI does)
to make a PostgreSQL server that cannot start a failure instead of a skip.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import Session

from db.migrations.upgrade import upgrade
from db.rules.config import get_settings
from db.store.engine import make_engine
from tests.support.apptest_helpers import app_database  # noqa: F401  (a fixture the page tests share)

# Which suites ran and which were skipped, and why, said before and after every run (tests/support/suites.py).
from tests.support.suites import (  # noqa: F401  (pytest finds hooks by name in this module)
    pytest_report_header,
    pytest_runtest_logreport,
    pytest_terminal_summary,
)
from tools.pg_server import PostgresServer, PostgresUnavailable

_counter = itertools.count()
# The audit chain's key (db.access.audit): fixed for the test session and the commands and servers it starts.
os.environ.setdefault("CLINCONSENSUS_AUDIT_KEY", "test-audit-key-not-secret")
# Reports of PostgreSQL databases kept per data version (analysis.report_cache): in a folder of the session's own,
# removed when the session ends.
if "CLINCONSENSUS_CACHE_DIR" not in os.environ:
    os.environ["CLINCONSENSUS_CACHE_DIR"] = tempfile.mkdtemp(prefix="cc-test-kept-")
    atexit.register(shutil.rmtree, os.environ["CLINCONSENSUS_CACHE_DIR"], ignore_errors=True)
TEMPLATE_DB = "cc_template"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()  # the last connection to close checkpoints the WAL into the file we copy
    return path


@pytest.fixture(scope="session")
def pg_server():
    try:
        server = PostgresServer().start()
    except PostgresUnavailable as error:
        if get_settings().require_postgres:
            pytest.fail(f"PostgreSQL is required here: {error}")
        pytest.skip(f"PostgreSQL not available: {error}")
    admin = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {TEMPLATE_DB}")
    template = make_engine(server.url(TEMPLATE_DB))
    upgrade(template)
    template.dispose()
    server.admin_engine = admin
    yield server
    admin.dispose()
    server.stop()


def new_sqlite_url(sqlite_template, tmp_path) -> str:
    path = tmp_path / f"test-{next(_counter)}.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


def new_postgres_url(pg_server) -> str:
    name = f"cc_test_{os.getpid()}_{next(_counter)}"
    with pg_server.admin_engine.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}")
    return pg_server.url(name)


@pytest.fixture
def sqlite_url(sqlite_template, tmp_path) -> str:
    return new_sqlite_url(sqlite_template, tmp_path)


@pytest.fixture
def postgres_url(pg_server) -> str:
    return new_postgres_url(pg_server)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request) -> str:
    """A fresh, migrated database of each kind."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def engine(database_url):
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def sqlite_engine(sqlite_url):
    engine = make_engine(sqlite_url)
    yield engine
    engine.dispose()


@pytest.fixture
def session(engine):
    with Session(engine, expire_on_commit=False) as session:
        yield session


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    # The Playwright tests (tests/e2e/) run last: Playwright's sync API keeps an event loop running in
    # the main thread for the rest of the session, and code under test that starts its own loop (the
    # judge runner, the figure export) must not run beside it.
    playwright_tests = Path(__file__).parent / "e2e"
    items.sort(key=lambda item: playwright_tests in Path(str(item.path)).parents)
