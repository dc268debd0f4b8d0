"""Several benchmarks in turn on one shared build per database: `make bench` and `make bench-quick`.

Each benchmark runs as its own process (`python -m benchmarks.bench_…`), so its figures and peak memory are
its own. Before the first, the demo is built once on SQLite and on a throw-away PostgreSQL server
(benchmarks/full_scale.shared_databases); a benchmark that wants a full-scale database gets a copy of those
builds instead of building its own. An argument `ON_EACH_DATABASE` runs the benchmark once per shared
database, each time on a fresh copy given in its place.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.full_scale import shared_copies, shared_databases  # noqa: E402

#: In a benchmark's arguments: one run per shared database, this replaced by the URL of a copy of it.
ON_EACH_DATABASE = "{a copy of each shared database}"


def benchmark_names() -> list[str]:
    """Every benchmarks/bench_*.py, by module name."""
    return sorted(path.stem for path in (ROOT / "benchmarks").glob("bench_*.py"))


@dataclass(frozen=True)
class Outcome:
    title: str
    seconds: float
    status: int


def run_suite(
    arguments: Mapping[str, Sequence[str]], names: Sequence[str], *, cases: int | None, postgres: bool = True
) -> int:
    """Builds the shared databases at `cases`, runs each benchmark of `names` with its `arguments` and prints
    what completed; 1 when any run failed."""
    unknown = [name for name in names if name not in arguments]
    if unknown:
        print(f"no arguments for {', '.join(unknown)} in this suite", file=sys.stderr)
        return 1
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    with shared_databases(cases=cases, postgres=postgres) as shared:
        print(f"== shared builds ready in {time.perf_counter() - started:,.0f} s: {', '.join(shared)}", flush=True)
        for name in names:
            if ON_EACH_DATABASE in arguments[name]:
                for database in shared:
                    with shared_copies(sqlite=database == "SQLite", postgres=database == "PostgreSQL") as copies:
                        given = [copies[0] if each == ON_EACH_DATABASE else each for each in arguments[name]]
                        outcomes.append(_run(f"{name} on {database}", name, given))
            else:
                outcomes.append(_run(name, name, list(arguments[name])))
    failed = [outcome.title for outcome in outcomes if outcome.status != 0]
    print("\n== runs")
    for outcome in outcomes:
        verdict = "completed" if outcome.status == 0 else f"FAILED (exit status {outcome.status})"
        print(f"   {outcome.title:<32} {verdict:<26} {outcome.seconds / 60:6.1f} min")
    print(f"   {'all, builds included':<32} {'':<26} {(time.perf_counter() - started) / 60:6.1f} min")
    if failed:
        print(f"benchmarks that failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"all {len(outcomes)} runs of {len(names)} benchmarks completed")
    return 0


def _run(title: str, name: str, arguments: list[str]) -> Outcome:
    print(f"\n== {title} {' '.join(arguments)}".rstrip(), flush=True)
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", *arguments], cwd=ROOT, check=False)
    outcome = Outcome(title, time.perf_counter() - started, result.returncode)
    verdict = "completed" if outcome.status == 0 else f"FAILED (exit status {outcome.status})"
    print(f"== {title}: {verdict} in {outcome.seconds:.0f} s", flush=True)
    return outcome
