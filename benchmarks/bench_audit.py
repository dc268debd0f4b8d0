"""`audit verify` at scale: time and peak memory beside the raw read of the label table in the same run.

The targets (docs/REFERENCE.md §6): under 15 s and 500 MB at full scale (2,500 cases × 11 models, both
groups, 3 judges: 1.65 M labels, 2.47 M judge decisions), within 2× the raw read of the label table.
Printed, not asserted.

Two readings. Inside a process: the verification alone (imports and start-up not counted), its wall and
CPU time and the process's peak memory. As a command, the bar's own reading (`benchmarks/whole_data`, as
`report` and the exports are read): `clinconsensus audit verify` and the raw read (`SELECT * FROM label`
through the driver), each its own process, their CPU time, in `--rounds` alternate rounds; the ratio is the
median of the rounds' ratios, printed with their range (one run of the raw read varies by a tenth or more).

Setup (not timed): the demo (`demo.generator.build_demo`, through the importers, so the log holds what
they write) into a fresh SQLite file, or `--database URL` of a database that already holds it (e.g.
after `clinconsensus demo --scale full`). Each measurement runs in its own child process, so its peak
resident memory is its own.

    .venv/bin/python -m benchmarks.bench_audit [--cases 2500] [--database URL | --build-into URL]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import whole_data

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS, TARGET_MB, TARGET_RATIO = 15.0, 500.0, 2.0


def build(url: str, cases: int) -> None:
    from db.migrations.upgrade import upgrade
    from db.store.engine import make_engine
    from demo.generator import build_demo

    os.environ.setdefault("CLINCONSENSUS_DEMO_PASSWORD", "bench-audit-password")
    engine = make_engine(url)
    upgrade(engine)
    started = time.perf_counter()
    build_demo(engine, scale="full", n_cases=cases, n_judges=None)
    print(f"setup: demo of {cases:,} cases built in {time.perf_counter() - started:.0f} s", flush=True)
    engine.dispose()


def peak_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss it starts afresh at exec, not at fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(url: str, what: str) -> dict:
    """One measurement in this process: `verify` (audit verify) or `raw` (every label row through the driver)."""
    from db.store.engine import make_engine, session_scope

    engine = make_engine(url)
    started, cpu = time.perf_counter(), time.process_time()
    if what == "verify":
        from db.access.audit_replay import verify_audit

        with session_scope(engine, read_only=True) as session:
            result = verify_audit(session)
        detail = {"ok": result.ok, "entries": result.entries, "labels": result.replay.labels, **result.replay.counts}
    else:
        with engine.connect() as connection:
            cursor = connection.connection.dbapi_connection.cursor()
            cursor.execute("SELECT id, response_id, criterion_id, stage, group_no, met, user_id, note FROM label")
            rows = 0
            while block := cursor.fetchmany(50_000):
                rows += len(block)
            cursor.close()
        detail = {"rows": rows}
    return {
        "seconds": time.perf_counter() - started,
        "cpu": time.process_time() - cpu,
        "peak_mb": peak_mb(),
        **detail,
    }


def child(url: str, what: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_audit", "--database", url, "--measure", what],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(url: str, *, rounds: int = 3) -> None:
    raw = child(url, "raw")
    verified = child(url, "verify")
    print(
        f"inside a process: reading every label row {raw['seconds']:.2f} s ({raw['rows']:,} rows, "
        f"peak {raw['peak_mb']:.0f} MB); the verification {verified['seconds']:.2f} s wall, "
        f"{verified['cpu']:.2f} s CPU, peak {verified['peak_mb']:.0f} MB; ok={verified['ok']}, "
        f"{verified['entries']:,} entries, {verified['labels']:,} labels, "
        f"{verified.get('judge_decisions', 0):,} judge decisions, {verified.get('texts', 0):,} texts "
        f"(targets: under {TARGET_SECONDS:.0f} s and {TARGET_MB:.0f} MB at full scale)"
    )
    ratios, peaks = [], []
    for number in range(1, rounds + 1):
        raw_read = whole_data.raw_label_read(url)
        command = whole_data.clinconsensus(url, "audit", "verify")
        ratios.append(command.cpu / max(raw_read.cpu, 1e-9))
        peaks.append(command.peak_mb)
        print(
            f"round {number}: raw read {raw_read.cpu:.2f} s CPU; clinconsensus audit verify {command.against(raw_read)}"
        )
    taken = f"median of {rounds} rounds, {min(ratios):.2f}–{max(ratios):.2f}×" if rounds > 1 else "1 round"
    print(
        f"clinconsensus audit verify: {statistics.median(ratios):.2f}× the raw read of the label table in CPU time "
        f"({taken}), peak {max(peaks):,.0f} MB "
        f"(the bar at full scale: within {TARGET_RATIO:.0f}× and under {TARGET_MB:.0f} MB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=2500)
    parser.add_argument("--database", help="a database that already holds the demo")
    parser.add_argument("--build-into", help="build the demo at this URL (kept), then measure it")
    parser.add_argument("--rounds", type=int, default=3, help="alternate rounds of the raw read and the command")
    parser.add_argument("--measure", choices=["verify", "raw"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.database, args.measure)))
        return
    if args.build_into:
        build(args.build_into, args.cases)
    if args.database or args.build_into:
        report(args.database or args.build_into, rounds=args.rounds)
        return
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as folder:
        url = f"sqlite:///{Path(folder) / 'audit.db'}"
        os.environ.setdefault("CLINCONSENSUS_AUDIT_KEY_FILE", str(Path(folder) / "audit.key"))
        build(url, args.cases)
        report(url, rounds=args.rounds)


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    main()
