"""Import at full scale on SQLite and PostgreSQL: seconds, rows per second, peak memory.

Full scale is 2,500 cases × 30 criteria × 11 models × 2 groups = 1.65 M annotation labels
(docs/REFERENCE.md §6). Each import runs in its own process so its peak RSS is the import's own. The
figures are printed beside the targets; nothing is asserted.

    python benchmarks/bench_import.py                  # full scale, SQLite and PostgreSQL
    python benchmarks/bench_import.py --cases 250      # a tenth, for a quick look
    python benchmarks/bench_import.py --skip-postgres
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from demo.generator import write_demo_files  # noqa: E402

FULL_CASES = 2_500
TARGET_CASES_RESPONSES_S = 15.0
TARGET_LABELS_S = 60.0
TARGET_PEAK_MB = 1024.0
#: Labels written one ORM object and one commit at a time, to compare against.
BASELINE_SAMPLE = 2_000


# Data ----------------------------------------------------------------------------------------


def write_files(directory: Path, *, cases: int) -> dict[str, Path]:
    """The demo generator's full-scale files (cases, responses, labels of every stage, one judge)."""
    paths = write_demo_files(directory, scale="full", n_cases=cases, n_judges=1)
    judge_files = [path for key, path in paths.items() if key not in ("cases", "responses", "labels", "plan")]
    return {
        "cases": paths["cases"],
        "responses": paths["responses"],
        "labels": paths["labels"],
        "judge": judge_files[0],
    }


def stage_counts(path: Path) -> dict[str, int]:
    counts = dict.fromkeys(("annotation", "check", "adjudication"), 0)
    with open(path, "rb") as handle:
        for line in handle:
            for stage in counts:
                if b'"stage": "' + stage.encode() + b'"' in line:
                    counts[stage] += 1
                    break
    return counts


# One import, in a child process --------------------------------------------------------------


def peak_rss_mb() -> float:
    """This process's own high-water mark (VmHWM starts afresh at exec, unlike ru_maxrss)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(url: str, kind: str, path: str) -> None:
    from db.importers import import_file
    from db.store.engine import make_engine

    engine = make_engine(url)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    started, cpu_started = time.perf_counter(), time.process_time()
    summary = import_file(engine, kind, Path(path), actor="bench")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    engine.dispose()
    # Being taken off the CPU for other processes, as opposed to waiting for the disk or the server.
    preempted = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw - usage.ru_nivcsw
    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu": cpu,
                "records": summary.records,
                "inserted": summary.inserted,
                "unchanged": summary.unchanged,
                "peak_mb": peak_rss_mb(),
                "preempted": preempted,
            }
        )
    )


def run_child(url: str, kind: str, path: Path) -> dict:
    result = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", url, kind, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if result.returncode != 0:
        raise SystemExit(f"import of {path.name} failed:\n{result.stderr.strip()}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# The straightforward way, for comparison -----------------------------------------------------


def baseline_seconds_per_label(url: str, labels: Path, sample: int) -> float:
    """One ORM object and one commit per label, with the lookups a simple importer makes per row.

    Run on a copy of the database taken after cases and responses, over the first `sample`
    rows of the labels file; the caller extrapolates.
    """
    from sqlmodel import Session, select

    from db import counts
    from db.rules.enums import NO_GROUP, RubricStatus
    from db.store.engine import make_engine
    from db.store.models import Case, Label, Response, RubricVersion, User

    engine = make_engine(url)
    rows = []
    with open(labels, encoding="utf-8") as handle:
        for line in handle:
            rows.append(json.loads(line))
            if len(rows) >= sample:
                break
    started = time.perf_counter()
    with Session(engine) as session:
        for row in rows:
            response = session.exec(
                select(Response)
                .join(Case, Response.case_pk == Case.id)
                .where(Case.case_id == row["case_id"], Response.model == row["model"])
            ).one()
            version = session.exec(
                select(RubricVersion)
                .where(RubricVersion.case_pk == response.case_pk, RubricVersion.status == RubricStatus.approved)
                .order_by(RubricVersion.version.desc())
            ).first()
            user = session.exec(select(User).where(User.username == row["annotator"])).first()
            if user is None:
                user = User(username=row["annotator"], role="annotator", group_no=row["group"], is_active=False)
                session.add(user)
                session.commit()
            session.add(
                Label(
                    response_id=response.id,
                    criterion_id=row["criterion_id"],
                    stage=row["stage"],
                    group_no=row["group"] or NO_GROUP,
                    met=row["met"],
                    user_id=user.id,
                    note=row.get("note"),
                    rubric_version_id=version.id,
                )
            )
            counts.refresh(session, [response.id])  # as every writer of labels does
            session.commit()
    seconds = time.perf_counter() - started
    engine.dispose()
    return seconds / len(rows)


# Report --------------------------------------------------------------------------------------


def measure(backend: str, url: str, paths: dict[str, Path], before_labels=None) -> dict:
    from db.migrations.upgrade import upgrade
    from db.store.engine import make_engine

    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    result = {"backend": backend}
    for kind in ("cases", "responses", "labels", "judge"):
        if kind == "labels" and before_labels is not None:
            before_labels()
        result[kind] = run_child(url, kind, paths[kind])
    result["labels again"] = run_child(url, "labels", paths["labels"])
    return result


def _flag(value: float, target: float) -> str:
    return "within target" if value < target else "OVER TARGET"


def report(result: dict, scale: float, stages: dict[str, int]) -> None:
    cases, responses, labels = result["cases"], result["responses"], result["labels"]
    both = cases["seconds"] + responses["seconds"]
    peak = max(result[kind]["peak_mb"] for kind in ("cases", "responses", "labels", "judge", "labels again"))
    note = "" if scale == 1 else f"  (at {scale:.0%} of full scale)"
    print(
        f"\n{result['backend']}{note}   (wall seconds, the importer's own CPU seconds, peak RSS of the "
        f"importing process)"
    )
    for name in ("cases", "responses", "labels", "judge", "labels again"):
        figures = result[name]
        label = {"judge": "judge rows", "labels again": "labels ×2"}.get(name, name)
        again = (
            f"  ({figures['unchanged']:,} unchanged: the same file imported twice)" if name == "labels again" else ""
        )
        print(
            f"  {label:<10} {figures['records']:>10,} rows  {figures['seconds']:7.2f} s  "
            f"(cpu {figures['cpu']:6.2f} s)  {figures['records'] / figures['seconds']:>10,.0f} rows/s  "
            f"peak {figures['peak_mb']:6.0f} MB{again}"
        )
    print(
        f"  (labels: {stages['annotation']:,} annotation, {stages['check']:,} check, "
        f"{stages['adjudication']:,} adjudication)"
    )
    print(
        f"  cases + responses {both:7.2f} s   target < {TARGET_CASES_RESPONSES_S:.0f} s   "
        f"{_flag(both, TARGET_CASES_RESPONSES_S)}"
    )
    print(
        f"  labels            {labels['seconds']:7.2f} s   target < {TARGET_LABELS_S:.0f} s   "
        f"{_flag(labels['seconds'], TARGET_LABELS_S)}"
    )
    print(f"  peak memory       {peak:7.0f} MB  target < {TARGET_PEAK_MB:.0f} MB  {_flag(peak, TARGET_PEAK_MB)}")
    if labels["seconds"] > 1.5 * labels["cpu"] and labels["preempted"] > 10 * labels["seconds"]:
        load = os.getloadavg()[0]
        print(
            f"  note: the machine is busy (load average {load:.1f} on {os.cpu_count()} CPUs): the labels import was "
            f"taken off the CPU {labels['preempted']:,} times: its wall time includes waiting for a CPU "
            f"(compare the cpu figure)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=FULL_CASES, help="number of cases (full scale: 2,500)")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--baseline-sample", type=int, default=BASELINE_SAMPLE)
    parser.add_argument("--child", nargs=3, metavar=("URL", "KIND", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0

    scale = args.cases / FULL_CASES
    with tempfile.TemporaryDirectory(prefix="cc-bench-import-") as folder:
        directory = Path(folder)
        started = time.perf_counter()
        paths = write_files(directory / "data", cases=args.cases)
        stages = stage_counts(paths["labels"])
        sizes = ", ".join(f"{path.name} {path.stat().st_size / 2**20:,.0f} MB" for path in paths.values())
        print(
            f"generated {args.cases:,} cases with the demo generator (scale full) in "
            f"{time.perf_counter() - started:.1f} s: {sizes}"
        )

        sqlite_file = directory / "bench.db"
        baseline_file = directory / "baseline.db"

        def keep_a_copy_for_the_baseline() -> None:
            source, target = sqlite3.connect(sqlite_file), sqlite3.connect(baseline_file)
            with target:
                source.backup(target)
            source.close()
            target.close()

        sqlite_result = measure("SQLite", f"sqlite:///{sqlite_file}", paths, keep_a_copy_for_the_baseline)
        report(sqlite_result, scale, stages)
        per_label = baseline_seconds_per_label(f"sqlite:///{baseline_file}", paths["labels"], args.baseline_sample)
        total = sqlite_result["labels"]["records"]
        extrapolated = per_label * total
        print(
            f"  straightforward importer (one ORM object + commit per label, per-row lookups): measured on "
            f"{args.baseline_sample:,} rows, EXTRAPOLATED to {total:,}: {extrapolated:,.0f} s, "
            f"{extrapolated / sqlite_result['labels']['seconds']:,.0f}× the streamed import"
        )

        if not args.skip_postgres:
            from tools.pg_server import PostgresServer, PostgresUnavailable

            try:
                server = PostgresServer().start()
            except PostgresUnavailable as error:
                print(f"\nPostgreSQL skipped: {error}")
                return 0
            try:
                import sqlalchemy as sa

                admin = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
                with admin.connect() as connection:
                    connection.exec_driver_sql("CREATE DATABASE bench")
                admin.dispose()
                report(measure("PostgreSQL", server.url("bench"), paths), scale, stages)
            finally:
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
