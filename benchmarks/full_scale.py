"""Full-scale databases for the benchmarks that need one: the database given, or both built here.

`make bench` runs every benchmark without arguments. A benchmark that measures a full-scale database
(the labeling page, every page, many labelers) then builds one the way `clinconsensus demo --scale
full` does, on a SQLite file and on a throw-away PostgreSQL server (tools/pg_server.py), and runs
itself on each in a child process with `--database URL`, so the two runs share no engine, cache or
background thread. Both are removed at the end. Without a PostgreSQL server the SQLite run still
happens and the reason PostgreSQL was left out is printed.

Building takes minutes (the PostgreSQL one the longest), so a run of several benchmarks builds once:
`shared_databases` builds both and names them in the environment, and `built_databases` in every child
process then hands out a copy of each (SQLite: a copy of the file; PostgreSQL: a database made from the
built one as a template) instead of building, when the number of cases asked for is the one built. A
copy is the benchmark's own to change and is removed after it. The shared build holds the demo's
judges, which a benchmark that asked for none is given too: no page of labeling or checking reads them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import uuid4

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: The password of every demo account in a built database (the benchmarks sign in through tokens).
PASSWORD = "bench-full-scale-password"

#: The cases of the demo's full scale, which `cases=None` builds.
FULL_CASES = 2500

#: Where `shared_databases` names its builds for the benchmarks it runs (each unset without one).
SHARED_SQLITE = "CLINCONSENSUS_BENCH_SHARED_SQLITE"
SHARED_POSTGRES = "CLINCONSENSUS_BENCH_SHARED_POSTGRES"
SHARED_CASES = "CLINCONSENSUS_BENCH_SHARED_CASES"


def build_full(url: str, *, judges: int | None = 0, cases: int | None = None) -> None:
    """The demo's full scale at `url` (2,500 cases × 11 models, 1.83 M labels); `judges=None`: the demo's judges;
    `cases`: another number of cases at the same density (a quick run, or growth beyond the paper's size)."""
    from db.migrations.upgrade import upgrade
    from db.rules.progress_report import TerminalProgress
    from db.store.engine import make_engine
    from demo.generator import build_demo

    os.environ.setdefault("CLINCONSENSUS_DEMO_PASSWORD", PASSWORD)
    engine = make_engine(url)
    upgrade(engine)
    start = time.perf_counter()
    result = build_demo(engine, scale="full", n_cases=cases, n_judges=judges, progress=TerminalProgress("demo full"))
    engine.dispose()
    counts = result.counts
    print(
        f"built full scale on {engine.dialect.name} in {time.perf_counter() - start:,.0f} s: "
        f"{counts['cases']:,} cases, {counts['responses']:,} responses, "
        f"{counts['labels']['annotation']:,} annotation labels, {counts['label_assignments']:,} label assignments",
        flush=True,
    )


@contextmanager
def built_databases(
    *,
    judges: int | None = 0,
    postgres: bool = True,
    cases: int | None = None,
    sqlite: bool = True,
    audit_key_file: Path | None = None,
) -> Iterator[list[str]]:
    """URLs of full-scale databases for this run: SQLite (unless `sqlite=False`), then PostgreSQL when a
    server can start. Copies of the shared builds when `shared_databases` made them for this many cases
    (`judges` is then what the shared build holds); otherwise built here. `audit_key_file`: the audit key
    of these builds, for a run that holds builds of several sizes at once (one key for all of them)."""
    if _shared_cases() == (cases or FULL_CASES):
        with shared_copies(postgres=postgres, sqlite=sqlite) as urls:
            yield urls
        return
    folder = Path(tempfile.mkdtemp(prefix="cc-bench-full-"))
    # One audit key for the builds here and the runs on them in child processes (which inherit it): the key
    # is otherwise looked for beside the database the settings name, not the one a benchmark was handed.
    os.environ["CLINCONSENSUS_AUDIT_KEY_FILE"] = str(audit_key_file or folder / "audit.key")
    server = None
    try:
        urls = []
        if sqlite:
            sqlite_url = f"sqlite:///{folder / 'full.db'}"
            build_full(sqlite_url, judges=judges, cases=cases)
            urls.append(sqlite_url)
        if postgres:
            server = _started_server()
            if server is not None:
                build_full(_new_database(server, "bench_full"), judges=judges, cases=cases)
                urls.append(server.url("bench_full"))
        yield urls
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def shared_databases(*, cases: int | None = None, postgres: bool = True) -> Iterator[dict[str, str]]:
    """Builds the demo at `cases` (judges included) once on SQLite and, when a server starts, on PostgreSQL,
    and names them in this process's environment for the benchmarks run from it (their `built_databases`
    then copies them). Yields the shared URLs by database name; everything is removed at the end."""
    folder = Path(tempfile.mkdtemp(prefix="cc-bench-shared-"))
    names = (SHARED_SQLITE, SHARED_POSTGRES, SHARED_CASES, "CLINCONSENSUS_AUDIT_KEY_FILE")
    before = {name: os.environ.get(name) for name in names}
    os.environ["CLINCONSENSUS_AUDIT_KEY_FILE"] = str(folder / "audit.key")
    server = None
    try:
        shared = {"SQLite": f"sqlite:///{folder / 'shared.db'}"}
        build_full(shared["SQLite"], judges=None, cases=cases)
        os.environ[SHARED_SQLITE] = shared["SQLite"]
        server = _started_server() if postgres else None
        if server is not None:
            shared["PostgreSQL"] = _new_database(server, "bench_shared")
            build_full(shared["PostgreSQL"], judges=None, cases=cases)
            os.environ[SHARED_POSTGRES] = shared["PostgreSQL"]
        os.environ[SHARED_CASES] = str(cases or FULL_CASES)
        yield shared
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _shared_cases() -> int | None:
    value = os.environ.get(SHARED_CASES)
    return int(value) if value else None


@contextmanager
def shared_copies(*, postgres: bool = True, sqlite: bool = True) -> Iterator[list[str]]:
    """A copy of each shared build asked for (SQLite first), removed at the end; the shared builds stay as
    they were."""
    import sqlalchemy as sa

    folder = Path(tempfile.mkdtemp(prefix="cc-bench-copy-"))
    copies: list[str] = []
    try:
        shared_sqlite = os.environ.get(SHARED_SQLITE)
        if sqlite and shared_sqlite:
            copy = folder / "full.db"
            source = Path(sa.engine.make_url(shared_sqlite).database or "")
            shutil.copyfile(source, copy)
            # A write-ahead log left beside the file holds committed pages too (nothing writes the build now).
            if source.with_name(source.name + "-wal").exists():
                shutil.copyfile(source.with_name(source.name + "-wal"), copy.with_name(copy.name + "-wal"))
            copies.append(f"sqlite:///{copy}")
        shared_postgres = os.environ.get(SHARED_POSTGRES)
        if postgres and shared_postgres:
            copies.append(_postgres_copy(shared_postgres, f"bench_copy_{uuid4().hex[:12]}"))
        elif postgres:
            print("PostgreSQL not measured: the shared builds have none", flush=True)
        yield copies
    finally:
        for url in copies:
            if url.startswith("postgresql"):
                _drop_database(url)
        shutil.rmtree(folder, ignore_errors=True)


def _started_server():  # -> tools.pg_server.PostgresServer | None
    """A throw-away PostgreSQL server, or None (the reason printed) when none can start here."""
    from tools.pg_server import PostgresServer, PostgresUnavailable

    try:
        return PostgresServer().start()
    except PostgresUnavailable as error:
        print(f"PostgreSQL not measured: {error}", flush=True)
        return None


def _new_database(server, name: str) -> str:
    """Creates the database `name` on `server` and returns its URL."""
    import sqlalchemy as sa

    admin = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    return server.url(name)


def _postgres_copy(template_url: str, name: str) -> str:
    """A new database on the template's server made from it (a file copy, no rebuild); its URL."""
    import sqlalchemy as sa

    template = sa.engine.make_url(template_url)
    admin = sa.create_engine(template.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE {name} TEMPLATE "{template.database}"')
    admin.dispose()
    return template.set(database=name).render_as_string(hide_password=False)


def _drop_database(url: str) -> None:
    """Drops the database of `url`, closing whatever connections a benchmark left open to it."""
    import sqlalchemy as sa

    target = sa.engine.make_url(url)
    admin = sa.create_engine(target.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{target.database}" WITH (FORCE)')
    admin.dispose()


def run_on_both(
    module: str, argv: list[str], *, judges: int | None = 0, postgres: bool = True, cases: int | None = None
) -> int:
    """Builds both databases and runs `python -m module --database URL *argv` on each; 1 when any run failed."""
    failed = []
    with built_databases(judges=judges, postgres=postgres, cases=cases) as urls:
        for url in urls:
            name = "PostgreSQL" if url.startswith("postgresql") else "SQLite"
            scale = "full scale" if cases is None else f"{cases:,} cases"
            print(f"\n== {module} on {name} ({scale})", flush=True)
            result = subprocess.run([sys.executable, "-m", module, "--database", url, *argv], cwd=ROOT, check=False)
            if result.returncode != 0:
                failed.append(name)
    if failed:
        print(f"{module} failed on {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
