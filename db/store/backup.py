"""A consistent copy of the database while the app is in use (`clinconsensus backup FILE`).

SQLite: the online backup API copies a consistent snapshot page by page while readers and
writers carry on; the copy is a database file that opens as is. PostgreSQL: `pg_dump -Fc`, a
single-transaction snapshot restored with `pg_restore`. Restore steps are in the README.
"""

from __future__ import annotations

import glob
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from sqlalchemy.engine import Engine

from db.rules.errors import ClinConsensusError
from db.rules.security import make_private


class BackupFailed(ClinConsensusError):
    pass


def backup(engine: Engine, target: Path) -> str:
    """Writes the copy to `target` (not overwriting an existing file); returns a one-line summary."""
    target = Path(target)
    if target.exists():
        raise BackupFailed(f"{target}: exists already; choose a new file name")
    if not target.parent.is_dir():
        raise BackupFailed(f"{target.parent}: no such folder")
    partial = target.with_name(target.name + ".partial")
    try:
        make_private(partial)  # the copy holds password hashes and every label: 0600 before a byte is written
        if engine.dialect.name == "sqlite":
            _sqlite_backup(engine, partial)
        elif engine.dialect.name == "postgresql":
            _postgres_backup(engine, partial)
        else:
            raise BackupFailed(f"backups of {engine.dialect.name} databases are not supported")
        partial.rename(target)
    finally:
        partial.unlink(missing_ok=True)
    return f"backup written: {target} ({target.stat().st_size:,} bytes)"


def _sqlite_backup(engine: Engine, partial: Path) -> None:
    source_path = engine.url.database
    if not source_path or source_path == ":memory:":
        raise BackupFailed("an in-memory database cannot be backed up")
    source = sqlite3.connect(source_path, timeout=30)
    copy = sqlite3.connect(partial)
    try:
        source.backup(copy, pages=4096)  # a step at a time: writers are held up only briefly
        copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
        result = copy.execute("PRAGMA integrity_check").fetchone()[0]
        if result != "ok":
            raise BackupFailed(f"the copy failed its integrity check: {result}")
    finally:
        copy.close()
        source.close()


def pg_tool(name: str) -> str:
    """The newest installed PostgreSQL client program `name` (pg_dump, pg_restore)."""
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=_version_key)
    if candidates:
        return candidates[-1]
    found = shutil.which(name)
    if found:
        return found
    raise BackupFailed(f"{name} not found: install the PostgreSQL client programs")


def _version_key(path: str) -> tuple:
    part = Path(path).parent.parent.name
    return tuple(int(x) for x in part.split(".") if x.isdigit())


def libpq_environment(engine: Engine) -> dict[str, str]:
    """Connection settings for the PostgreSQL programs, in their environment (the password stays off argv)."""
    url = engine.url
    env = {**os.environ, "PGDATABASE": url.database or ""}
    for variable, value in (
        ("PGHOST", url.host),
        ("PGPORT", url.port),
        ("PGUSER", url.username),
        ("PGPASSWORD", url.password),
    ):
        if value:
            env[variable] = str(value)
    host = url.query.get("host")
    if host:
        env["PGHOST"] = host if isinstance(host, str) else host[0]
    return env


def _postgres_backup(engine: Engine, partial: Path) -> None:
    result = subprocess.run(
        [pg_tool("pg_dump"), "--format=custom", "--no-owner", "--file", str(partial)],
        env=libpq_environment(engine),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["unknown error"])[-1]
        raise BackupFailed(f"pg_dump failed: {reason}")
