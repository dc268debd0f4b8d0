"""Full-scale databases for the benchmarks that need one: the database given, or both built here.

`make bench` runs every benchmark without arguments. A benchmark that measures a full-scale database
(the labeling page, every page, many labelers) then builds one the way `clinconsensus demo --scale
full` does, on a SQLite file and on a throw-away PostgreSQL server (tools/pg_server.py), and runs
itself on each in a child process with `--database URL`, so the two runs share no engine, cache or
background thread. Both are removed at the end. Without a PostgreSQL server the SQLite run still
happens and the reason PostgreSQL was left out is printed.
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

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: The password of every demo account in a built database (the benchmarks sign in through tokens).
PASSWORD = "bench-full-scale-password"


def build_full(url: str, *, judges: int | None = 0, cases: int | None = None) -> None:
    """The demo's full scale at `url` (2,500 cases × 11 models, 1.83 M labels); `judges=None`: the demo's judges;
    `cases`: another number of cases at the same density (a quick run, or growth beyond the paper's size)."""
    from db.rules.progress_report import TerminalProgress
    from db.store.engine import make_engine
    from db.store.migrate import upgrade
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
    *, judges: int | None = 0, postgres: bool = True, cases: int | None = None, sqlite: bool = True
) -> Iterator[list[str]]:
    """URLs of full-scale databases built for this run: SQLite (unless `sqlite=False`), then PostgreSQL when a
    server can start."""
    folder = Path(tempfile.mkdtemp(prefix="cc-bench-full-"))
    # One audit key for the builds here and the runs on them in child processes (which inherit it): the key
    # is otherwise looked for beside the database the settings name, not the one a benchmark was handed.
    os.environ["CLINCONSENSUS_AUDIT_KEY_FILE"] = str(folder / "audit.key")
    server = None
    try:
        urls = []
        if sqlite:
            sqlite_url = f"sqlite:///{folder / 'full.db'}"
            build_full(sqlite_url, judges=judges, cases=cases)
            urls.append(sqlite_url)
        if postgres:
            from tools.pg_server import PostgresServer, PostgresUnavailable

            try:
                server = PostgresServer().start()
            except PostgresUnavailable as error:
                print(f"PostgreSQL not measured: {error}", flush=True)
            else:
                import sqlalchemy as sa

                admin = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
                with admin.connect() as connection:
                    connection.exec_driver_sql("CREATE DATABASE bench_full")
                admin.dispose()
                build_full(server.url("bench_full"), judges=judges, cases=cases)
                urls.append(server.url("bench_full"))
        yield urls
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


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
