"""Growth from 1× to 4× the data: whole-data work grows at most linearly, per-page work not at all.

The demo is built at N cases (default 2,500: 1.65 M annotation labels) and at F × N (default 4×: 10,000
cases, 6.6 M), the way `clinconsensus demo --scale full --cases N` builds it, judges included
(benchmarks/full_scale.py), on a SQLite file and on a throw-away PostgreSQL server of its own
(tools/pg_server.py; when none can start, the reason is printed and SQLite alone is measured). Both sizes are
built before anything is measured (a PostgreSQL database is then vacuumed and analyzed, so no figure holds
autovacuum's pass over the freshly loaded tables), and each figure is taken at 1× and then at F× right after
it: the machine's drift over the hour (other work, a warmer or colder cache) falls on both sizes alike
instead of on one of them. What a command writes is removed once measured, and every measured process
starts after the earlier writes are on disk (benchmarks/whole_data.measure). In this order (the page runs
save labels, so they come last):

- whole-data work, each `clinconsensus …` as an admin runs it, in its own process (benchmarks/whole_data:
  the process's CPU seconds, wall seconds and peak memory):
  - in `--command-rounds` rounds (default 3), the three in turn each round: the raw read of the label table
    (`SELECT * FROM label`, every row through the driver), the yardstick; `report --json` the first time after
    the data changed (kept reports forgotten first) and again on unchanged data, which must write the same
    bytes; `audit verify`;
  - `export gold`, `judgements`, `sft` and `healthbench-meta`;
  - `import` of the demo's files of that size (cases, responses, labels of every stage, one judge's
    decisions) into an empty database beside the built one; the label table then holds the file's lines;
- per-page work, server milliseconds (median), each benchmark in its own process with `--database URL`,
  repeated in `--rounds` rounds (default 3), each round at 1× and then at F× (the workbench's rounds, then
  the pages'):
  - on the labeling workbench (benchmarks/bench_labeling): save-and-next, the page's save-and-next run,
    and a decision kept as a draft;
  - the first visit of every page right after a label changed (benchmarks/bench_pages), and the
    dashboard's background grid rebuild, which reads everything and so counts as whole-data work.

Printed per database: each figure at 1× and F× (the median over the rounds), its growth and its limit
(1.1 · F for whole-data work, 4.4× at 4×: linear with a tenth for noise; 1.3× for per-page work), and
`report --json` and `audit verify` as multiples of the raw read at each size. A repeated figure's growth is
the median of its rounds' growths (each round's F× over the same round's 1×), printed with their range: a
range that spans the limit says the run cannot tell. For commands the growth is of CPU time: wall time
follows the machine's other work. It is printed beside, as on PostgreSQL only wall time holds the server's
share. Nothing about speed is asserted: the exit status is 1 only when a run fails or an equality check
fails.

    .venv/bin/python -m benchmarks.bench_growth [--cases 2500] [--factor 4] [--no-postgres | --no-sqlite]
                                                [--visits 5] [--samples 20] [--rounds 3] [--command-rounds 3]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
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
    system: float | None = None  # of a command's CPU seconds, the kernel's
    memory_events: str = ""  # the kernel's memory management meanwhile (whole_data.memory_events)

    @classmethod
    def of_command(cls, measured: whole_data.Measured) -> Figure:
        return cls(measured.cpu, "s CPU", measured.wall, measured.peak_mb, measured.system, measured.memory_events)

    def __str__(self) -> str:
        if self.wall is None:
            return f"{self.value:,.1f} {self.unit}"
        return (
            f"{self.value:,.2f} {self.unit} ({self.system or 0:,.2f} s of it the kernel's), {self.wall:,.2f} s wall, "
            f"{self.peak_mb or 0:,.0f} MB peak"
            + (f"; machine-wide meanwhile: {self.memory_events}" if self.memory_events else "")
        )


@dataclass
class Growth:
    """One database's figures at each size (in cases), in the order they were first measured; a figure taken
    in several rounds keeps one value per round."""

    database: str
    figures: dict[str, dict[int, list[Figure]]] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def add(self, name: str, kind: str, cases: int, figure: Figure) -> None:
        self.figures.setdefault(name, {}).setdefault(cases, []).append(figure)
        self.kinds[name] = kind
        print(f"  {name} ({cases:,} cases): {figure}", flush=True)

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


@dataclass(frozen=True)
class Sized:
    """One database at one size: where it is and a folder of its own for the files a run writes."""

    cases: int
    url: str
    folder: Path


def database_name(url: str) -> str:
    return "PostgreSQL" if make_url(url).get_backend_name() == "postgresql" else "SQLite"


def settle(url: str) -> None:
    """PostgreSQL: vacuum and analyze the freshly built database, which autovacuum would otherwise do in the
    minutes the first figures are taken. SQLite: read the file once, so the first command measured finds it
    in memory as the later ones do (a 4× file just built: the first raw read of its label table took 16.4 s,
    6.1 s of it the kernel's, and the next one 11.2 s)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = Path(str(parsed.database))
        for path in (database, database.with_name(database.name + "-wal")):
            if not path.is_file():
                continue
            with open(path, "rb") as handle:
                while handle.read(1 << 24):
                    pass
        return
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.exec_driver_sql("VACUUM (ANALYZE)")
        connection.exec_driver_sql("CHECKPOINT")  # the pages vacuum marked, written now rather than measured
    engine.dispose()


# Whole-data work: each figure at every size in turn --------------------------------------------


def measure_raw_read(sized: Sized, growth: Growth) -> None:
    raw = growth.attempt(RAW_READ, lambda: whole_data.raw_label_read(sized.url))
    if raw is not None:
        growth.add(RAW_READ, WHOLE_DATA, sized.cases, Figure.of_command(raw))


def measure_report(sized: Sized, growth: Growth) -> None:
    """`report --json` the first time after a change, then again on unchanged data (the same bytes)."""
    # The first run after a change computes; kept reports (SQLite) from an earlier run would answer instead.
    whole_data.forget_kept_reports(sized.url)
    report_file = sized.folder / "report.json"
    command = partial(whole_data.clinconsensus, sized.url, "report", "--json", str(report_file))
    first = growth.attempt(REPORT_FIRST, command)
    if first is None:
        return
    growth.add(REPORT_FIRST, WHOLE_DATA, sized.cases, Figure.of_command(first))
    first_bytes = report_file.read_bytes()
    again = growth.attempt(REPORT_AGAIN, command)
    if again is None:
        return
    growth.add(REPORT_AGAIN, WHOLE_DATA, sized.cases, Figure.of_command(again))
    if report_file.read_bytes() != first_bytes:
        growth.fail(f"report --json on unchanged data wrote other bytes than the first run ({sized.cases:,} cases)")
    report_file.unlink()


def remove(*paths: Path) -> None:
    """Remove what a measured command wrote (sft writes 13 GB at 4×): left on disk, it filled the page cache
    the next commands allocate from."""
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            for written in path.parent.glob(path.name + "*"):  # with its manifest, or a SQLite file's journals
                written.unlink(missing_ok=True)


def export_measurer(kind: str) -> Callable[[Sized, Growth], None]:
    def measure_export(sized: Sized, growth: Growth) -> None:
        target = sized.folder / (f"{kind}.jsonl" if kind in FILE_EXPORTS else kind)
        if kind not in FILE_EXPORTS:
            target.mkdir(exist_ok=True)
        name = f"export {kind}"
        measured = growth.attempt(name, partial(whole_data.clinconsensus, sized.url, "export", kind, str(target)))
        if measured is not None:
            growth.add(name, WHOLE_DATA, sized.cases, Figure.of_command(measured))
        remove(target)

    return measure_export


def measure_audit(sized: Sized, growth: Growth) -> None:
    verified = growth.attempt(AUDIT_VERIFY, lambda: whole_data.clinconsensus(sized.url, "audit", "verify"))
    if verified is not None:
        growth.add(AUDIT_VERIFY, WHOLE_DATA, sized.cases, Figure.of_command(verified))


#: The figures read against each other (`report --json` and `audit verify` as multiples of the raw read):
#: taken in `--command-rounds` rounds, the three in turn at every size each round, and read as their medians.
#: One run of each varies by a tenth or more: the raw read at 2,500 cases took 2.72 s of CPU in one growth run
#: and 2.95–3.68 s in 23 runs on a later day on the same machine.
COMPARED: tuple[Callable[[Sized, Growth], None], ...] = (measure_raw_read, measure_report, measure_audit)
#: The other whole-data figures, once each, in order; each is taken at every size before the next.
COMMANDS: tuple[Callable[[Sized, Growth], None], ...] = tuple(export_measurer(kind) for kind in EXPORTS)


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


def measure_imports(sizes: list[Sized], growth: Growth) -> None:
    """`clinconsensus import` of the demo's files of each size into an empty database beside the built one,
    file by file: each file at every size before the next."""
    from demo.generator import write_demo_files

    written: dict[int, dict[str, Path]] = {}
    for sized in sizes:
        paths = write_demo_files(sized.folder / "files", scale="full", n_cases=sized.cases, n_judges=1)
        judge_file = next(path for key, path in paths.items() if key not in ("cases", "responses", "labels", "plan"))
        written[sized.cases] = {**paths, "judge": judge_file}
    with ExitStack() as stack:
        targets = {sized.cases: stack.enter_context(empty_database(sized.url, sized.folder)) for sized in sizes}
        importing = list(sizes)
        for kind in IMPORTS:
            for sized in list(importing):
                name = f"import {kind}"
                command = partial(
                    whole_data.clinconsensus, targets[sized.cases], "import", kind, str(written[sized.cases][kind])
                )
                measured = growth.attempt(name, command)
                if measured is None:
                    importing.remove(sized)  # the later files need this one
                    continue
                growth.add(name, WHOLE_DATA, sized.cases, Figure.of_command(measured))
        for sized in importing:
            engine = create_engine(targets[sized.cases])
            with engine.connect() as connection:
                stored = connection.execute(text("SELECT count(*) FROM label")).scalar_one()
            engine.dispose()
            lines = count_lines(written[sized.cases]["labels"])
            if stored != lines:
                growth.fail(f"the import of {lines:,} label lines left {stored:,} labels ({sized.cases:,} cases)")
    for sized in sizes:
        remove(sized.folder / "files", sized.folder / "import.db")


# Per-page work: a round at every size, repeated -------------------------------------------------


def measure_pages(sized: Sized, visits: int, growth: Growth) -> None:
    """Every page's first visit (bench_pages in its own process), and the dashboard's background rebuild."""
    command = [sys.executable, "-m", "benchmarks.bench_pages", "--database", sized.url]
    command += ["--visits", str(visits), "--reader-visits", "0"]
    measured = growth.attempt("page visits (bench_pages)", lambda: whole_data.measure(command))
    if measured is None:
        return
    pages = 0
    for line in measured.output.splitlines():
        if page := PAGE_LINE.match(line):
            growth.add(f"first visit {page['page']}", PER_PAGE, sized.cases, Figure(float(page["p50"]), "ms"))
            pages += 1
        elif rebuild := REBUILD_LINE.match(line):
            figure = Figure(float(rebuild["ms"]), "ms")
            growth.add("dashboard background rebuild", WHOLE_DATA, sized.cases, figure)
    if not pages:
        growth.fail(f"bench_pages printed no page figures ({sized.cases:,} cases)")
    print(f"  (bench_pages ran {measured.wall:,.0f} s)", flush=True)


def measure_labeling(sized: Sized, samples: int, round_no: int, growth: Growth) -> None:
    """The labeling workbench's save-and-next and draft save (bench_labeling in its own process). Each round
    draws its own responses and decisions (its seed): a round drawing the last one's saved the same decisions
    again, which changes nothing and took a quarter of the time (4.6 against 19.3 ms)."""
    command = [sys.executable, "-m", "benchmarks.bench_labeling", "--database", sized.url, "--seed", str(round_no)]
    command += ["--samples", str(samples), "--page-runs", str(max(2, samples // 4))]
    measured = growth.attempt("labeling workbench (bench_labeling)", lambda: whole_data.measure(command))
    if measured is None:
        return
    found = set()
    for line in measured.output.splitlines():
        figure = LABELING_LINE.match(line)
        if figure and figure["label"] in LABELING_FIGURES:
            name = LABELING_FIGURES[figure["label"]]
            growth.add(name, PER_PAGE, sized.cases, Figure(float(figure["p50"]), "ms"))
            found.add(figure["label"])
    if "save-and-next (save, next opened)" not in found:
        growth.fail(f"bench_labeling printed no save-and-next figure ({sized.cases:,} cases)")
    print(f"  (bench_labeling ran {measured.wall:,.0f} s)", flush=True)


# The table -----------------------------------------------------------------------------------


def limit_of(kind: str, factor: float) -> float:
    return LINEAR_ALLOWANCE * factor if kind == WHOLE_DATA else PER_PAGE_LIMIT


def median_of(figures: list[Figure]) -> Figure | None:
    """The round whose value is the median (the lower middle one of an even number)."""
    if not figures:
        return None
    return sorted(figures, key=lambda figure: figure.value)[(len(figures) - 1) // 2]


def growths(before: list[Figure], after: list[Figure]) -> list[float]:
    """Each round's growth: its F× value over the same round's 1× value."""
    return [large.value / small.value for small, large in zip(before, after, strict=False) if small.value > 0]


def user_growth(before: Figure | None, after: Figure | None) -> str:
    """The growth of a command's CPU time outside the kernel. The kernel's part also follows what the machine
    holds at the time: the 4× SQLite raw read of one run spent 9.27 s in the kernel against 0.34 s at 1×, where
    touching as much fresh memory (3.8 GB) costs 1.4 s, at any moment."""
    if before is None or after is None or before.system is None or after.system is None:
        return ""
    user_before, user_after = before.value - before.system, after.value - after.system
    return f"{user_after / user_before:.2f}×" if user_before > 0 else ""


def print_table(growth: Growth, small: int, large: int, factor: float) -> list[str]:
    """The figure → 1× → F× → growth table; returns the figures that grew faster than their limit."""
    print(f"\n{growth.database}: {small:,} → {large:,} cases ({factor:g}×)")
    print(
        f"{'figure':<46} {'unit':<6} {'1×':>10} {f'{factor:g}×':>10} {'growth':>8} {'rounds':>15} {'limit':>7}"
        f"  {'within':<6} {'user growth':>11} {'wall growth':>11}  {'peak MB 1× → ' + f'{factor:g}×':>18}"
    )
    exceeded = []
    for name, by_size in growth.figures.items():
        kind = growth.kinds[name]
        rounds_before, rounds_after = by_size.get(small, []), by_size.get(large, [])
        before, after = median_of(rounds_before), median_of(rounds_after)
        unit = (before or after or Figure(0.0, "")).unit
        cells = [f"{f.value:>10,.2f}" if f else f"{'—':>10}" for f in (before, after)]
        limit = limit_of(kind, factor)
        paired = growths(rounds_before, rounds_after)
        ratio = statistics.median(paired) if paired else None
        spread = f"{len(paired)}: {min(paired):.2f}–{max(paired):.2f}×" if len(paired) > 1 else ""
        within = "—" if ratio is None else ("yes" if ratio <= limit else "NO")
        if ratio is not None and within == "NO":
            exceeded.append(f"{growth.database}: {name} grew {ratio:.2f}× (limit {limit:.2f}×)")
        wall_ratio, peaks = "", ""
        user_ratio = user_growth(before, after)
        if before and after and before.wall and after.wall:
            wall_ratio = f"{after.wall / before.wall:.2f}×"
        if before and after and before.peak_mb and after.peak_mb:
            peaks = f"{before.peak_mb:,.0f} → {after.peak_mb:,.0f}"
        print(
            f"{name:<46} {unit:<6} {cells[0]} {cells[1]} {'—' if ratio is None else f'{ratio:.2f}×':>8} "
            f"{spread:>15} {limit:>6.2f}×  {within:<6} {user_ratio:>11} {wall_ratio:>11}  {peaks:>18}"
        )
    for name in (REPORT_FIRST, REPORT_AGAIN, AUDIT_VERIFY):
        multiples = []
        for cases in (small, large):
            figure = median_of(growth.figures.get(name, {}).get(cases, []))
            raw = median_of(growth.figures.get(RAW_READ, {}).get(cases, []))
            if figure and raw and raw.value > 0:
                multiples.append(f"{figure.value / raw.value:.2f}× at {cases:,} cases")
        if multiples:
            print(f"{name}: CPU time {' and '.join(multiples)}, against the raw read of the label table")
    return exceeded


@contextmanager
def built_sizes(sizes: tuple[int, ...], *, postgres: bool, sqlite: bool) -> Iterator[dict[str, list[Sized]]]:
    """Every size built at once on each database (each size's PostgreSQL on a server of its own), one audit
    key for all; yields each database's builds in the order of `sizes`, settled."""
    by_database: dict[str, list[Sized]] = {}
    with ExitStack() as stack:
        keys = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cc-bench-growth-key-")))
        for cases in sizes:
            urls = stack.enter_context(
                built_databases(
                    judges=None, postgres=postgres, sqlite=sqlite, cases=cases, audit_key_file=keys / "audit.key"
                )
            )
            for url in urls:
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cc-bench-growth-")))
                by_database.setdefault(database_name(url), []).append(Sized(cases, url, folder))
        for builds in by_database.values():
            for sized in builds:
                settle(sized.url)
        yield by_database


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2500, help="cases at 1× (default 2,500)")
    parser.add_argument("--factor", type=float, default=4.0, help="the larger size as a multiple of --cases")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--no-postgres", action="store_true", help="SQLite only")
    only.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--visits", type=int, default=5, help="first visits per page")
    parser.add_argument("--samples", type=int, default=20, help="save-and-next and draft samples on the workbench")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the per-page figures at every size")
    parser.add_argument(
        "--command-rounds",
        type=int,
        default=3,
        help="rounds of the raw read, report --json and audit verify at every size (figures read against each other)",
    )
    args = parser.parse_args(argv)
    small, large = args.cases, round(args.cases * args.factor)
    factor = large / small

    results: dict[str, Growth] = {}
    with built_sizes((small, large), postgres=not args.no_postgres, sqlite=not args.no_sqlite) as by_database:
        for database, sizes in by_database.items():
            growth = results.setdefault(database, Growth(database))
            print(f"\n== {database}: whole-data work, {' and '.join(f'{s.cases:,}' for s in sizes)} cases", flush=True)
            for round_no in range(1, args.command_rounds + 1):
                print(f"  round {round_no} of {args.command_rounds} of the compared figures", flush=True)
                for measure_command in COMPARED:
                    for sized in sizes:
                        measure_command(sized, growth)
            for measure_command in COMMANDS:
                for sized in sizes:
                    measure_command(sized, growth)
            measure_imports(sizes, growth)
            # The workbench's rounds first: the page visits open every finished round's feedback, which makes
            # those rounds' labels final.
            for round_no in range(1, args.rounds + 1):
                print(f"\n== {database}: the labeling workbench, round {round_no} of {args.rounds}", flush=True)
                for sized in sizes:
                    measure_labeling(sized, args.samples, round_no, growth)
            for round_no in range(1, args.rounds + 1):
                print(f"\n== {database}: first visits of the pages, round {round_no} of {args.rounds}", flush=True)
                for sized in sizes:
                    measure_pages(sized, args.visits, growth)

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
