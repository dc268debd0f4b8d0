"""Growth from 1× to 4× the data: whole-data work grows at most linearly, per-page work not at all.

The demo is built at N cases (default 2,500: 1.65 M annotation labels) and at F × N (default 4×: 10,000
cases, 6.6 M), the way `clinconsensus demo --scale full --cases N` builds it, judges included
(benchmarks/full_scale.py), on a SQLite file and on a throw-away PostgreSQL server (tools/pg_server.py;
when none can start, the reason is printed and SQLite alone is measured). At each size, in this order
(the page runs save labels, so they come last):

- whole-data work, each `clinconsensus …` as an admin runs it, in its own process (benchmarks/whole_data:
  the process's CPU seconds, wall seconds and peak memory):
  - the raw read of the label table (`SELECT * FROM label`, every row through the driver): the yardstick;
  - `report --json` the first time after the data changed (kept reports forgotten first) and again on
    unchanged data, which must write the same bytes;
  - `export gold`, `judgements`, `sft` and `healthbench-meta`;
  - `audit verify`;
  - `import` of the demo's files of that size (cases, responses, labels of every stage, one judge's
    decisions) into an empty database beside the built one; the label table then holds the file's lines;
- per-page work, server milliseconds (median), each benchmark in its own process with `--database URL`:
  - on the labeling workbench (benchmarks/bench_labeling): save-and-next, the page's save-and-next run,
    and a decision kept as a draft;
  - the first visit of every page right after a label changed (benchmarks/bench_pages), and the
    dashboard's background grid rebuild, which reads everything and so counts as whole-data work.

Printed per database: each figure at 1× and F×, its growth and its limit (1.1 · F for whole-data work,
4.4× at 4×: linear with a tenth for noise; 1.3× for per-page work), and `report --json` and `audit verify`
as multiples of the raw read at each size. For commands the growth is of CPU time: wall time follows the
machine's other work. It is printed beside, as on PostgreSQL only wall time holds the server's share.
Nothing about speed is asserted: the exit status is 1 only when a run fails or an equality check fails.

    .venv/bin/python -m benchmarks.bench_growth [--cases 2500] [--factor 4] [--no-postgres | --no-sqlite]
                                                [--visits 5] [--samples 20]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import whole_data  # noqa: E402
from benchmarks.bench_export import FILE_EXPORTS, count_lines  # noqa: E402
from benchmarks.full_scale import built_databases  # noqa: E402

WHOLE_DATA, PER_PAGE = "whole-data", "per-page"
#: Linear growth with a tenth for noise: the limit of whole-data work is this times the factor.
LINEAR_ALLOWANCE = 1.1
#: Per-page work should not grow with the data at all; this much is noise.
PER_PAGE_LIMIT = 1.3

RAW_READ = "raw read of the label table"
REPORT_FIRST = "report --json, first run"
REPORT_AGAIN = "report --json, again on unchanged data"
AUDIT_VERIFY = "audit verify"
#: The exports that read everything (as bench_export and whole_data measure them).
EXPORTS = ("gold", "judgements", "sft", "healthbench-meta")
#: What is imported into the empty database, in the order an admin imports it.
IMPORTS = ("cases", "responses", "labels", "judge")
#: bench_labeling's report lines measured here → the figure's name in the table.
LABELING_FIGURES = {
    "save-and-next (save, next opened)": "save-and-next",
    "labeling page, save-and-next run": "save-and-next, whole labeling page run",
    "decision -> draft saved (keep_draft)": "decision kept as a draft",
}

# bench_pages: `home (annotator)   p50  123.4  p95  150.0   …` (first visits first); the dashboard rebuild line.
PAGE_LINE = re.compile(r"^(?P<page>\S+ \((?:annotator|checker|admin)\))\s+p50\s+(?P<p50>\S+)\s+p95")
REBUILD_LINE = re.compile(r"^dashboard background rebuild after a change\s+(?P<ms>[\d.]+) ms")
# bench_labeling: `save-and-next (save, next opened)   n= 20  p50   41.2 ms  p95 …`.
LABELING_LINE = re.compile(r"^(?P<label>.+?)\s+n=\s*\d+\s+p50\s+(?P<p50>[\d.]+) ms")

T = TypeVar("T")


@dataclass(frozen=True)
class Figure:
    value: float  # CPU seconds of a command, or server milliseconds of a page
    unit: str
    wall: float | None = None
    peak_mb: float | None = None

    @classmethod
    def of_command(cls, measured: whole_data.Measured) -> Figure:
        return cls(measured.cpu, "s CPU", measured.wall, measured.peak_mb)

    def __str__(self) -> str:
        if self.wall is None:
            return f"{self.value:,.1f} {self.unit}"
        return f"{self.value:,.2f} {self.unit}, {self.wall:,.2f} s wall, {self.peak_mb or 0:,.0f} MB peak"


@dataclass
class Growth:
    """One database's figures at each size (in cases), in the order they were first measured."""

    database: str
    figures: dict[str, dict[int, Figure]] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def add(self, name: str, kind: str, cases: int, figure: Figure) -> None:
        self.figures.setdefault(name, {})[cases] = figure
        self.kinds[name] = kind
        print(f"  {name}: {figure}", flush=True)

    def attempt(self, what: str, work: Callable[[], T]) -> T | None:
        """`work()`, or None with the failure kept for the exit status (the other figures still get measured)."""
        try:
            return work()
        except (RuntimeError, AssertionError, OSError) as error:
            self.failures.append(f"{self.database}: {what}: {error}")
            print(f"  {what} FAILED: {error}", flush=True)
            return None

    def fail(self, what: str) -> None:
        self.failures.append(f"{self.database}: {what}")
        print(f"  FAILED: {what}", flush=True)


def database_name(url: str) -> str:
    return "PostgreSQL" if make_url(url).get_backend_name() == "postgresql" else "SQLite"


# Whole-data work -----------------------------------------------------------------------------


def measure_commands(url: str, cases: int, folder: Path, growth: Growth) -> None:
    """The raw read, `report --json` twice, the exports and `audit verify`, each in its own process."""
    raw = growth.attempt(RAW_READ, lambda: whole_data.raw_label_read(url))
    if raw is not None:
        growth.add(RAW_READ, WHOLE_DATA, cases, Figure.of_command(raw))

    # The first run after a change computes; kept reports (SQLite) from an earlier run would answer instead.
    whole_data.forget_kept_reports(url)
    report_file = folder / "report.json"
    first = growth.attempt(REPORT_FIRST, lambda: whole_data.clinconsensus(url, "report", "--json", str(report_file)))
    if first is not None:
        growth.add(REPORT_FIRST, WHOLE_DATA, cases, Figure.of_command(first))
        first_bytes = report_file.read_bytes()
        again = growth.attempt(
            REPORT_AGAIN, lambda: whole_data.clinconsensus(url, "report", "--json", str(report_file))
        )
        if again is not None:
            growth.add(REPORT_AGAIN, WHOLE_DATA, cases, Figure.of_command(again))
            if report_file.read_bytes() != first_bytes:
                growth.fail(f"report --json on unchanged data wrote other bytes than the first run ({cases:,} cases)")

    for kind in EXPORTS:
        target = folder / (f"{kind}.jsonl" if kind in FILE_EXPORTS else kind)
        if kind not in FILE_EXPORTS:
            target.mkdir()
        name = f"export {kind}"
        measured = growth.attempt(name, partial(whole_data.clinconsensus, url, "export", kind, str(target)))
        if measured is not None:
            growth.add(name, WHOLE_DATA, cases, Figure.of_command(measured))

    verified = growth.attempt(AUDIT_VERIFY, lambda: whole_data.clinconsensus(url, "audit", "verify"))
    if verified is not None:
        growth.add(AUDIT_VERIFY, WHOLE_DATA, cases, Figure.of_command(verified))


@contextmanager
def empty_database(url: str, folder: Path) -> Iterator[str]:
    """A new, empty database beside the one at `url` (a file in `folder`, or a database on the same server)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        yield f"sqlite:///{folder / 'import.db'}"
        return
    name = "growth_import"
    server = create_engine(parsed, isolation_level="AUTOCOMMIT")
    with server.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        yield parsed.set(database=name).render_as_string(hide_password=False)
    finally:
        with server.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE {name}")
        server.dispose()


def measure_import(url: str, cases: int, folder: Path, growth: Growth) -> None:
    """`clinconsensus import` of the demo's files of this size into an empty database, file by file."""
    from demo.generator import write_demo_files

    paths = write_demo_files(folder / "files", scale="full", n_cases=cases, n_judges=1)
    judge_file = next(path for key, path in paths.items() if key not in ("cases", "responses", "labels", "plan"))
    files = {**paths, "judge": judge_file}
    with empty_database(url, folder) as target:
        for kind in IMPORTS:
            name = f"import {kind}"
            measured = growth.attempt(name, partial(whole_data.clinconsensus, target, "import", kind, str(files[kind])))
            if measured is None:
                return
            growth.add(name, WHOLE_DATA, cases, Figure.of_command(measured))
        engine = create_engine(target)
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT count(*) FROM label")).scalar_one()
        engine.dispose()
    written = count_lines(paths["labels"])
    if stored != written:
        growth.fail(f"the import of {written:,} label lines left {stored:,} labels ({cases:,} cases)")
    shutil.rmtree(folder / "files", ignore_errors=True)


# Per-page work -------------------------------------------------------------------------------


def measure_pages(url: str, cases: int, visits: int, growth: Growth) -> None:
    """Every page's first visit (bench_pages in its own process), and the dashboard's background rebuild."""
    command = [sys.executable, "-m", "benchmarks.bench_pages", "--database", url]
    command += ["--visits", str(visits), "--recount-visits", "0"]
    measured = growth.attempt("page visits (bench_pages)", lambda: whole_data.measure(command))
    if measured is None:
        return
    pages = 0
    for line in measured.output.splitlines():
        if page := PAGE_LINE.match(line):
            growth.add(f"first visit {page['page']}", PER_PAGE, cases, Figure(float(page["p50"]), "ms"))
            pages += 1
        elif rebuild := REBUILD_LINE.match(line):
            growth.add("dashboard background rebuild", WHOLE_DATA, cases, Figure(float(rebuild["ms"]), "ms"))
    if not pages:
        growth.fail(f"bench_pages printed no page figures ({cases:,} cases)")
    print(f"  (bench_pages ran {measured.wall:,.0f} s)", flush=True)


def measure_labeling(url: str, cases: int, samples: int, growth: Growth) -> None:
    """The labeling workbench's save-and-next and draft save (bench_labeling in its own process)."""
    command = [sys.executable, "-m", "benchmarks.bench_labeling", "--database", url]
    command += ["--samples", str(samples), "--page-runs", str(max(2, samples // 4))]
    measured = growth.attempt("labeling workbench (bench_labeling)", lambda: whole_data.measure(command))
    if measured is None:
        return
    found = set()
    for line in measured.output.splitlines():
        figure = LABELING_LINE.match(line)
        if figure and figure["label"] in LABELING_FIGURES:
            growth.add(LABELING_FIGURES[figure["label"]], PER_PAGE, cases, Figure(float(figure["p50"]), "ms"))
            found.add(figure["label"])
    if "save-and-next (save, next opened)" not in found:
        growth.fail(f"bench_labeling printed no save-and-next figure ({cases:,} cases)")
    print(f"  (bench_labeling ran {measured.wall:,.0f} s)", flush=True)


# The table -----------------------------------------------------------------------------------


def limit_of(kind: str, factor: float) -> float:
    return LINEAR_ALLOWANCE * factor if kind == WHOLE_DATA else PER_PAGE_LIMIT


def print_table(growth: Growth, small: int, large: int, factor: float) -> list[str]:
    """The figure → 1× → F× → growth table; returns the figures that grew faster than their limit."""
    print(f"\n{growth.database}: {small:,} → {large:,} cases ({factor:g}×)")
    print(
        f"{'figure':<46} {'unit':<6} {'1×':>10} {f'{factor:g}×':>10} {'growth':>8} {'limit':>7}  {'within':<6}"
        f" {'wall growth':>11}  {'peak MB 1× → ' + f'{factor:g}×':>18}"
    )
    exceeded = []
    for name, by_size in growth.figures.items():
        kind = growth.kinds[name]
        before, after = by_size.get(small), by_size.get(large)
        unit = (before or after or Figure(0.0, "")).unit
        cells = [f"{f.value:>10,.2f}" if f else f"{'—':>10}" for f in (before, after)]
        limit = limit_of(kind, factor)
        ratio = after.value / before.value if before and after and before.value > 0 else None
        within = "—" if ratio is None else ("yes" if ratio <= limit else "NO")
        if within == "NO":
            exceeded.append(f"{growth.database}: {name} grew {ratio:.2f}× (limit {limit:.2f}×)")
        wall_ratio, peaks = "", ""
        if before and after and before.wall and after.wall:
            wall_ratio = f"{after.wall / before.wall:.2f}×"
        if before and after and before.peak_mb and after.peak_mb:
            peaks = f"{before.peak_mb:,.0f} → {after.peak_mb:,.0f}"
        print(
            f"{name:<46} {unit:<6} {cells[0]} {cells[1]} {'—' if ratio is None else f'{ratio:.2f}×':>8} "
            f"{limit:>6.2f}×  {within:<6} {wall_ratio:>11}  {peaks:>18}"
        )
    for name in (REPORT_FIRST, REPORT_AGAIN, AUDIT_VERIFY):
        multiples = []
        for cases in (small, large):
            figure, raw = growth.figures.get(name, {}).get(cases), growth.figures.get(RAW_READ, {}).get(cases)
            if figure and raw and raw.value > 0:
                multiples.append(f"{figure.value / raw.value:.2f}× at {cases:,} cases")
        if multiples:
            print(f"{name}: CPU time {' and '.join(multiples)}, against the raw read of the label table")
    return exceeded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2500, help="cases at 1× (default 2,500)")
    parser.add_argument("--factor", type=float, default=4.0, help="the larger size as a multiple of --cases")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--no-postgres", action="store_true", help="SQLite only")
    only.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--visits", type=int, default=5, help="first visits per page")
    parser.add_argument("--samples", type=int, default=20, help="save-and-next and draft samples on the workbench")
    args = parser.parse_args(argv)
    small, large = args.cases, round(args.cases * args.factor)
    factor = large / small

    results: dict[str, Growth] = {}
    # One size at a time, both databases: the databases of one size are removed before the next is built.
    for cases in (small, large):
        with built_databases(
            judges=None, postgres=not args.no_postgres, sqlite=not args.no_sqlite, cases=cases
        ) as urls:
            for url in urls:
                growth = results.setdefault(database_name(url), Growth(database_name(url)))
                print(f"\n== {growth.database}, {cases:,} cases", flush=True)
                with tempfile.TemporaryDirectory(prefix="cc-bench-growth-") as folder:
                    measure_commands(url, cases, Path(folder), growth)
                    measure_import(url, cases, Path(folder), growth)
                # The workbench first: the page visits open every finished round's feedback, which makes
                # those rounds' labels final.
                measure_labeling(url, cases, args.samples, growth)
                measure_pages(url, cases, args.visits, growth)

    print(f"\n{whole_data.load_note()}")
    exceeded = []
    for growth in results.values():
        exceeded += print_table(growth, small, large, factor)
    if exceeded:
        print("\ngrew faster than the limit:\n  " + "\n  ".join(exceeded))
    failures = [failure for growth in results.values() for failure in growth.failures]
    if failures:
        print("\nfailed:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
