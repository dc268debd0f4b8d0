"""Every benchmark once at a small scale: that it completes and that its equality checks hold.

`make bench-quick` (and CI, after the tests) runs this. It asserts nothing about speed — the figures
printed at this scale mean little — only that no benchmark has rotted: each `benchmarks/bench_*.py`
runs to the end with exit status 0, and the checks it makes against the straightforward approach
(same numbers, same report) pass. A benchmark without an entry below is a failure, so a new one
cannot be left out. They run the way `make bench` runs them (benchmarks/suite.py): the demo built once
at this scale on SQLite and PostgreSQL, each benchmark that measures such a database on a copy of it.

    .venv/bin/python -m benchmarks.quick [--only bench_report,bench_export] [--no-postgres]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.suite import ON_EACH_DATABASE, benchmark_names, run_suite  # noqa: E402

#: Cases of the quick runs: small enough for a couple of minutes in all, large enough for every code path
#: (several models, every stage of labels, judges, disagreements to adjudicate).
QUICK_CASES = "40"

#: The arguments of each benchmark's quick run.
QUICK_ARGUMENTS: dict[str, list[str]] = {
    "bench_batch": ["--database", ON_EACH_DATABASE],
    "bench_assignments": ["--cases", QUICK_CASES, "--models", "3"],
    "bench_audit": ["--database", ON_EACH_DATABASE, "--rounds", "1"],
    "bench_cold_start": ["--installers", "uv"],
    "bench_export": ["--database", ON_EACH_DATABASE, "--repeat", "1", "--also", "judgements,judge-items,sft"],
    "bench_growth": [
        "--cases",
        "20",
        "--factor",
        "4",
        "--visits",
        "1",
        "--samples",
        "4",
        "--rounds",
        "2",
        "--command-rounds",
        "2",
    ],
    "bench_import": ["--cases", QUICK_CASES, "--baseline-sample", "200"],
    "bench_judge": [
        "--cases",
        QUICK_CASES,
        "--models",
        "3",
        "--items",
        "20,40,80",
        "--latency",
        "0.005",
        "--endpoint-items",
        "40",
        "--endpoint-concurrency",
        "4",
    ],
    "bench_labeling": ["--cases", QUICK_CASES, "--samples", "4", "--page-runs", "2"],
    "bench_machinery": [
        "--database",
        ON_EACH_DATABASE,
        "--repeat",
        "1",
        "--rounds",
        "1",
        "--import-cases",
        "5",
    ],
    "bench_load": ["--cases", QUICK_CASES, "--sessions", "1,2", "--interactions", "2", "--think", "0.05"],
    "bench_pages": ["--cases", QUICK_CASES, "--visits", "1", "--reader-visits", "1"],
    "bench_sessions": [
        "--cases",
        QUICK_CASES,
        "--sessions",
        "2",
        "--replica-sessions",
        "2",
        "--saves",
        "2",
        "--think",
        "0.2",
        "--decision-gap",
        "0.05",
    ],
    "bench_report": ["--cases", QUICK_CASES, "--models", "3", "--repeat", "1", "--criteria-sample", "5"],
    "bench_review": ["--cases", QUICK_CASES, "--repeat", "1"],
    "bench_validate": ["--cases", "4", "--rounds", "1", "--latency", "0.005"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated benchmark names (default: every benchmarks/bench_*.py)")
    parser.add_argument("--no-postgres", action="store_true", help="no shared PostgreSQL build")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else benchmark_names()
    missing = [name for name in names if name not in QUICK_ARGUMENTS]
    if missing:
        print(f"no quick arguments for {', '.join(missing)}: add them to benchmarks/quick.py", file=sys.stderr)
        return 1
    return run_suite(QUICK_ARGUMENTS, names, cases=int(QUICK_CASES), postgres=not args.no_postgres)


if __name__ == "__main__":
    raise SystemExit(main())
