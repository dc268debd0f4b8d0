"""Engines and sessions: SQLite with WAL, foreign keys and a busy timeout; PostgreSQL as given."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, create_engine

from db.rules.config import database_url
from db.rules.errors import DatabaseBusy, DiskFull
from db.rules.security import make_sqlite_files_private

SQLITE_BUSY_TIMEOUT_MS = 30_000


def _configure_sqlite(dbapi_connection, _record) -> None:
    # Python's sqlite3 opens transactions lazily and never for SELECT; let SQLAlchemy
    # issue BEGIN itself so a whole import really is one transaction.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _begin(connection) -> None:
    # Writers take the lock at BEGIN, so two writers queue on the busy timeout instead of
    # one failing with "database is locked" when it upgrades a read lock; readers do not
    # take it, so pages stay readable during a long import.
    if connection.get_execution_options().get("sqlite_read_only"):
        connection.exec_driver_sql("BEGIN")
    else:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


@contextmanager
def sqlite_foreign_keys_off(connection: Connection) -> Iterator[None]:
    """Foreign keys off on `connection` while schema changes rebuild tables (SQLite only; a no-op elsewhere).

    SQLite rebuilds a table to alter it (copy, drop, rename); with foreign keys on, dropping a table
    that other rows point at fails. The pragma only takes effect outside a transaction, so it is set
    on the driver's connection before the first statement, checked with `foreign_key_check` after
    the changes, and switched back on before the connection returns to the pool.
    """
    if connection.dialect.name != "sqlite":
        yield
        return
    driver = connection.connection.driver_connection
    assert driver is not None
    driver.execute("PRAGMA foreign_keys=OFF")
    try:
        yield
        broken = driver.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise RuntimeError(f"schema change left {len(broken)} rows pointing at missing rows: {broken[:5]}")
    finally:
        driver.execute("PRAGMA foreign_keys=ON")


def make_engine(url: str | None = None) -> Engine:
    """A new engine for `url` (default: `DATABASE_URL`)."""
    url = url or database_url()
    if url.startswith("sqlite"):
        _keep_sqlite_file_private(url)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine, "connect", _configure_sqlite)
        event.listen(engine, "begin", _begin)
        return engine
    return create_engine(url, pool_pre_ping=True)


def _keep_sqlite_file_private(url: str) -> None:
    """The database file holds password hashes and every label: created 0600, and an older one made so."""
    path = make_url(url).database
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    try:
        make_sqlite_files_private(path)
    except FileNotFoundError:  # no such folder: SQLite's own error says so on first use
        return


class _SharedEngines:
    """`get_engine(url)`: the shared engine of a URL; `get_engine.cache_clear()` forgets them all."""

    def __call__(self, url: str | None = None) -> Engine:
        """The shared engine of `url` (default: `DATABASE_URL` as it is now), created once per process."""
        return _shared_engine(url or database_url())

    def cache_clear(self) -> None:
        """Tests and tools that switch databases clear the shared engines this way."""
        _shared_engine.cache_clear()


get_engine = _SharedEngines()


@lru_cache(maxsize=8)
def _shared_engine(url: str) -> Engine:
    return make_engine(url)


BUSY_MESSAGE = "the database is busy (a long import may be running); nothing was saved, try again in a moment"


def is_busy(error: OperationalError) -> bool:
    """A wait for another writer ran out: SQLite's busy timeout, PostgreSQL's lock_timeout."""
    if getattr(error.orig, "sqlstate", None) == "55P03":  # lock_not_available
        return True
    text = str(error.orig).lower()
    return "database is locked" in text or "database is busy" in text


DISK_FULL_MESSAGE = "the disk is full; nothing was saved"
_SQLITE_FULL = 13


def is_disk_full(error: BaseException) -> bool:
    """The write ran out of disk: SQLite's SQLITE_FULL (also its `max_page_count`), PostgreSQL's disk_full, ENOSPC."""
    # Walks the chain too: a rollback to a savepoint that the full disk already undid fails on its own.
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        driver_error = getattr(current, "orig", None) or current
        if getattr(driver_error, "sqlstate", None) == "53100":
            return True
        if getattr(driver_error, "sqlite_errorcode", None) == _SQLITE_FULL:
            return True
        text = str(driver_error).lower()
        if "database or disk is full" in text or "no space left on device" in text:
            return True
        current = current.__cause__ or current.__context__
    return False


def disk_full_error() -> DiskFull:
    return DiskFull(DISK_FULL_MESSAGE, key="errors.disk_full")


@contextmanager
def session_scope(
    engine: Engine | None = None, *, read_only: bool = False, lock_wait_ms: int | None = None
) -> Iterator[Session]:
    """A session that commits on success and rolls back on any error.

    `read_only` sessions do not take SQLite's write lock; use them for queries only.
    `lock_wait_ms` bounds how long a PostgreSQL write waits for a lock (SQLite waits its busy
    timeout); a wait that runs out raises DatabaseBusy, never a driver error.
    """
    engine = engine or get_engine()
    session = Session(engine, expire_on_commit=False)
    try:
        if read_only:
            session.connection(execution_options={"sqlite_read_only": True})
        elif lock_wait_ms is not None and engine.dialect.name == "postgresql":
            session.execute(text(f"SET LOCAL lock_timeout = {int(lock_wait_ms)}"))
        yield session
        session.commit()
    except OperationalError as error:
        session.rollback()
        if is_busy(error):
            raise DatabaseBusy(BUSY_MESSAGE, key="security.busy") from error
        if is_disk_full(error):
            raise disk_full_error() from error
        raise
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
