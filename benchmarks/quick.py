"""Every benchmark once at a small scale: that it completes and that its equality checks hold.

`make bench-quick` (and CI, after the tests) runs this. It asserts nothing about speed — the figures
printed at this scale mean little — only that no benchmark has rotted: each `benchmarks/bench_*.py`
runs to the end with exit status 0, and the checks it makes against the straightforward approach
(same numbers, same report) pass. A benchmark without an entry below is a failure, so a new one
cannot be left out.

    .venv/bin/python -m benchmarks.quick [--only bench_report,bench_export]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Cases of the quick runs: small enough for a couple of minutes in all, large enough for every code path
#: (several models, every stage of labels, judges, disagreements to adjudicate).
QUICK_CASES = "40"

#: The arguments of each benchmark's quick run.
QUICK_ARGUMENTS: dict[str, list[str]] = {
    "bench_assignments": ["--cases", QUICK_CASES, "--models", "3"],
    "bench_audit": ["--cases", QUICK_CASES],
    "bench_cold_start": ["--installers", "uv"],
    "bench_export": ["--cases", QUICK_CASES, "--models", "3", "--repeat", "1", "--also", "judgements,judge-items,sft"],
    "bench_growth": ["--cases", "20", "--factor", "4", "--visits", "1", "--samples", "4"],
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
    "bench_load": ["--cases", QUICK_CASES, "--sessions", "1,2", "--interactions", "2", "--think", "0.05"],
    "bench_pages": ["--cases", QUICK_CASES, "--visits", "1", "--recount-visits", "1"],
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
}


def benchmark_names() -> list[str]:
    return sorted(path.stem for path in (ROOT / "benchmarks").glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated benchmark names (default: every benchmarks/bench_*.py)")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else benchmark_names()
    missing = [name for name in names if name not in QUICK_ARGUMENTS]
    if missing:
        print(f"no quick arguments for {', '.join(missing)}: add them to benchmarks/quick.py", file=sys.stderr)
        return 1
    failed: list[str] = []
    for name in names:
        command = [sys.executable, "-m", f"benchmarks.{name}", *QUICK_ARGUMENTS[name]]
        print(f"== {name} {' '.join(QUICK_ARGUMENTS[name])}", flush=True)
        started = time.perf_counter()
        result = subprocess.run(command, cwd=ROOT, check=False)
        seconds = time.perf_counter() - started
        verdict = "completed" if result.returncode == 0 else f"FAILED (exit status {result.returncode})"
        print(f"== {name}: {verdict} in {seconds:.0f} s", flush=True)
        if result.returncode != 0:
            failed.append(name)
    if failed:
        print(f"benchmarks that failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"all {len(names)} benchmarks completed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
