"""Every benchmark at full scale, on one build of the demo per database: what `make bench` runs.

The demo's full scale (2,500 cases × 30 criteria × 11 models, both groups, checks, adjudications and
judges) is built once on SQLite and once on a throw-away PostgreSQL server; each benchmark that measures
such a database works on a copy of it (benchmarks/suite.py). The others build what they measure
themselves: an empty database to import into (bench_import), cases without labels (bench_judge,
bench_assignments), in-memory frames (bench_report), a fresh clone (bench_cold_start).

The growth benchmark is not in this run: it builds 4× the data on both databases and measures everything
twice, about an hour on two cores by itself. `make bench-growth` runs it.

    .venv/bin/python -m benchmarks.full [--only bench_pages,bench_load] [--no-postgres]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.suite import ON_EACH_DATABASE, benchmark_names, run_suite  # noqa: E402

#: Benchmarks with a make target of their own, and why.
APART = {"bench_growth": "make bench-growth: 1× and 4× on both databases, about an hour by itself"}

#: The arguments of each benchmark's full-scale run (none: its defaults are the full scale).
FULL_ARGUMENTS: dict[str, list[str]] = {
    "bench_batch": ["--database", ON_EACH_DATABASE],
    "bench_assignments": [],
    "bench_audit": ["--database", ON_EACH_DATABASE],
    "bench_cold_start": [],
    "bench_export": ["--database", ON_EACH_DATABASE],
    "bench_import": [],
    "bench_judge": [],
    "bench_labeling": [],
    "bench_load": [],
    "bench_machinery": ["--database", ON_EACH_DATABASE],
    "bench_pages": [],
    "bench_report": [],
    "bench_review": [],
    "bench_sessions": [],
    "bench_validate": ["--cases", "250"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated benchmark names (default: every one but those apart)")
    parser.add_argument("--no-postgres", action="store_true", help="no shared PostgreSQL build")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else [name for name in benchmark_names() if name not in APART]
    missing = [name for name in names if name not in FULL_ARGUMENTS]
    if missing:
        print(f"no full-scale arguments for {', '.join(missing)}: add them to benchmarks/full.py", file=sys.stderr)
        return 1
    for name, why in APART.items():
        print(f"{name} is not in this run ({why})")
    return run_suite(FULL_ARGUMENTS, names, cases=None, postgres=not args.no_postgres)


if __name__ == "__main__":
    raise SystemExit(main())
