"""Each piece of speed machinery with and without it, in one run: what docs/performance.md's tables quote.

Kept tables (db/counts): the reader a page calls for a figure (server time of the call) against the same
figure counted straight from the label, judge_decision and assignment rows by a plain SQL aggregate written
here. Both must give the same figure (a mismatch is printed loudly and fails the run); each is then timed
`--repeat` times, alternately, and the p50s and their ratio are printed.

Caches, workers and tweaks, each with and without it by its own switch, alternately in the same run:

- the decision grid built in a worker process (`analysis.grid_worker.grid_of(in_worker=)`) against a thread of
  this process: how long page readers run meanwhile wait (p50, p95, max) and the build's wall time;
- the finished report kept per data version (`analysis/report_cache.py`): `report --json` again on unchanged
  data against the first run (kept reports removed before it);
- large exports written through every 64 MB (`analysis.exports.paths.STREAM_SYNC_BYTES`): `export
  healthbench-meta` as is against that threshold set beyond the file's size (plain buffered writes);
- `gc.freeze()` after the server's imports (`ui/process.py`): a full collection after the app's imports,
  frozen or not, in a fresh interpreter each;
- the collector paused during imports (`db.store.collector.collector_paused`): a demo label file imported
  into a fresh SQLite database, with `gc.disable` left working or made a no-op (so the pause pauses nothing).

Commands and imports run as their own processes; their CPU time (user + system) is compared, since the wall
time follows the machine's other work.

    .venv/bin/python -m benchmarks.bench_machinery --database URL [--key-file FILE] [--repeat 5] [--rounds 2]
        [--only kept,grid,report,exports,freeze,imports] [--import-cases 150]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import select, text  # noqa: E402
from sqlalchemy.engine import Connection, Engine  # noqa: E402
from sqlmodel import Session  # noqa: E402

from benchmarks import whole_data  # noqa: E402
from db import counts  # noqa: E402
from db.migrations.upgrade import upgrade  # noqa: E402
from db.rules.enums import Stage  # noqa: E402
from db.store.engine import make_engine, session_scope  # noqa: E402
from db.work.status import case_and_response_rows  # noqa: E402

PIECES = ("kept", "grid", "report", "exports", "freeze", "imports")

# Kept tables ---------------------------------------------------------------------------------

#: Each case's current rubric version (its newest approved one), as db.store.current_rubric defines it.
CURRENT = """cur AS (
  SELECT v.case_pk, v.id AS version_id FROM rubric_version v
  JOIN (SELECT case_pk, MAX(version) AS version FROM rubric_version WHERE status = 'approved' GROUP BY case_pk) m
    ON m.case_pk = v.case_pk AND m.version = v.version)"""

#: Per (response, group): annotation labels that count, those that do not, and those that count with no check
#: label of the group on the same criterion and rubric version; with the case's current rubric and its size.
PAIRS = f"""WITH {CURRENT},
size AS (SELECT cur.case_pk, cur.version_id, COUNT(k.rubric_version_id) AS n
         FROM cur LEFT JOIN criterion k ON k.rubric_version_id = cur.version_id GROUP BY cur.case_pk, cur.version_id),
pair AS (
  SELECT l.response_id, l.group_no, MAX(s.n) AS size, MAX(s.version_id) AS version_id,
    SUM(CASE WHEN l.rubric_version_id = s.version_id THEN 1 ELSE 0 END) AS fresh,
    SUM(CASE WHEN l.rubric_version_id = s.version_id THEN 0 ELSE 1 END) AS stale,
    SUM(CASE WHEN l.rubric_version_id = s.version_id AND c.id IS NULL THEN 1 ELSE 0 END) AS unchecked
  FROM label l JOIN response r ON r.id = l.response_id LEFT JOIN size s ON s.case_pk = r.case_pk
  LEFT JOIN label c ON c.response_id = l.response_id AND c.criterion_id = l.criterion_id
    AND c.group_no = l.group_no AND c.stage = 'check' AND c.rubric_version_id = l.rubric_version_id
  WHERE l.stage = 'annotation' GROUP BY l.response_id, l.group_no),
done AS (SELECT response_id, group_no, unchecked FROM pair
         WHERE version_id IS NOT NULL AND stale = 0 AND fresh >= size)"""

PLAIN_SQL = {
    "person_totals": f"""WITH {CURRENT}
SELECT group_no, user_id, COUNT(DISTINCT response_id), COUNT(*) FROM label
WHERE stage = 'annotation' AND group_no IN (1, 2) AND rubric_version_id IN (SELECT version_id FROM cur)
GROUP BY group_no, user_id""",
    "labels_by_stage": f"""WITH {CURRENT}
SELECT stage, CASE WHEN rubric_version_id IN (SELECT version_id FROM cur) THEN 1 ELSE 0 END, COUNT(*)
FROM label GROUP BY 1, 2""",
    "unresolved": f"""WITH {CURRENT},
d AS (SELECT response_id,
  COALESCE(MAX(CASE WHEN stage = 'check' AND group_no = 1 THEN CAST(met AS INTEGER) END),
           MAX(CASE WHEN stage = 'annotation' AND group_no = 1 THEN CAST(met AS INTEGER) END)) AS g1,
  COALESCE(MAX(CASE WHEN stage = 'check' AND group_no = 2 THEN CAST(met AS INTEGER) END),
           MAX(CASE WHEN stage = 'annotation' AND group_no = 2 THEN CAST(met AS INTEGER) END)) AS g2,
  MAX(CASE WHEN stage = 'adjudication' THEN 1 END) AS adj
  FROM label WHERE rubric_version_id IN (SELECT version_id FROM cur) GROUP BY response_id, criterion_id)
SELECT COUNT(*), COUNT(DISTINCT response_id) FROM d
WHERE g1 IS NOT NULL AND g2 IS NOT NULL AND g1 <> g2 AND adj IS NULL""",
    "assignment_totals": f"""{PAIRS}
SELECT a.user_id, a.group_no, COUNT(*), COUNT(d.response_id) FROM assignment a
LEFT JOIN done d ON d.response_id = a.response_id AND d.group_no = a.group_no
WHERE a.kind = 'label' AND a.response_id IS NOT NULL GROUP BY a.user_id, a.group_no""",
    "adjudication_ready": f"""{PAIRS}
SELECT group_no, response_id FROM done WHERE unchecked = 0""",
    "judge_totals": "SELECT COUNT(*) FROM judge_decision",
}


def _kept_person_totals(session: Session) -> object:
    rows = []
    for group in (1, 2):
        totals = counts.person_totals(stage=Stage.annotation.value, group_no=group)
        rows += [(group, int(u), int(r), int(n)) for u, r, n in session.execute(select(totals)).all()]
    return sorted(rows)


def _kept_ready(session: Session) -> object:
    rows = []
    for group in (1, 2):
        ready = counts.ready_for_adjudication(group_no=group)
        rows += [(group, int(r)) for r in session.execute(select(ready.c.response_id)).scalars()]
    return sorted(rows)


def _by_stage(rows: list) -> object:
    by_stage: dict[str, int] = {}
    older = 0
    for stage, counting, n in rows:
        if int(counting):
            by_stage[str(stage)] = by_stage.get(str(stage), 0) + int(n)
        else:
            older += int(n)
    return by_stage, older


#: kept table -> (figure, the page that reads it, the product's reader, the plain SQL's rows as that reader's value).
KEPT: dict[str, tuple[str, str, Callable[[Session], object], str, Callable[[list], object]]] = {
    "label_totals": (
        "annotators' counting labels and responses, per group",
        "label check (annotator list)",
        _kept_person_totals,
        "person_totals",
        lambda rows: sorted(tuple(int(v) for v in row) for row in rows),
    ),
    "label_totals (by stage)": (
        "labels per stage, and on older rubrics",
        "admin home (status)",
        counts.labels_by_stage,
        "labels_by_stage",
        _by_stage,
    ),
    "response_status, unresolved_totals": (
        "open disagreements and their responses",
        "every admin/checker sidebar",
        counts.unresolved_figures,
        "unresolved",
        lambda rows: (int(rows[0][0]), int(rows[0][1])),
    ),
    "assignment.label_status, assignment_totals": (
        "assigned and done per person and group",
        "progress",
        counts.assignment_totals,
        "assignment_totals",
        lambda rows: sorted(tuple(int(v) for v in row) for row in rows if int(row[2])),
    ),
    "adjudication_ready": (
        "responses ready for adjudication, per group",
        "adjudication queue",
        _kept_ready,
        "adjudication_ready",
        lambda rows: sorted((int(g), int(r)) for g, r in rows),
    ),
    "judge_totals": (
        "judge decisions",
        "import",
        counts.judge_decision_total,
        "judge_totals",
        lambda rows: int(rows[0][0]),
    ),
}


def _timed(work: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    value = work()
    return (time.perf_counter() - started) * 1000.0, value


def _plain(connection: Connection, name: str) -> list:
    return [tuple(row) for row in connection.execute(text(PLAIN_SQL[name])).all()]


def bench_kept(engine: Engine, repeat: int) -> list[str]:
    """Each kept table's reader against the plain SQL aggregate; returns the names whose figures differ."""
    print(f"\n== kept tables: product reader against a plain SQL aggregate of the rows (p50 of {repeat}, ms)")
    print(f"{'kept table':<44} {'page':<30} {'with':>9} {'without':>11} {'ratio':>8}")
    mismatched = []
    for name, (figure, page, reader, sql_name, shape) in KEPT.items():
        with_ms, without_ms = [], []
        for round_no in range(repeat):
            with session_scope(engine, read_only=True) as session:
                kept_ms, kept = _timed(lambda: reader(session))  # noqa: B023
            with engine.connect() as connection:
                plain_ms, rows = _timed(lambda: _plain(connection, sql_name))  # noqa: B023
            plain = shape(rows)
            if round_no == 0 and kept != plain:
                mismatched.append(name)
                print(f"!!! MISMATCH {name} ({figure}): kept {_short(kept)} against plain SQL {_short(plain)}")
            with_ms.append(kept_ms)
            without_ms.append(plain_ms)
        with_p50, without_p50 = statistics.median(with_ms), statistics.median(without_ms)
        print(
            f"{name:<44} {page:<30} {with_p50:9.1f} {without_p50:11.1f} {_ratio(without_p50, with_p50):>8}"
            f"   ({figure}: {_short(kept)})"
        )
    return mismatched


def _ratio(without: float, with_: float) -> str:
    ratio = without / max(with_, 1e-6)
    return f"{ratio:.1f}×" if ratio < 10 else f"{ratio:.0f}×"


def _short(value: object) -> str:
    if isinstance(value, list):
        return f"{len(value)} rows, first {value[:2]}"
    return repr(value)[:120]


# The grid worker -----------------------------------------------------------------------------


def _probe_readers(engine: Engine) -> Callable[[], None]:
    """A page's worth of readers (sidebar, check list, progress, overview), each in a session of its own."""

    def probe() -> None:
        with session_scope(engine, read_only=True) as session:
            counts.unresolved_figures(session)
            _kept_person_totals(session)
            counts.assignment_totals(session)
            case_and_response_rows(session)

    return probe


def _during_build(engine: Engine, in_worker: bool) -> tuple[float, list[float]]:
    """The grid built (in a worker or a thread of this process) while the probe runs here: build seconds,
    probe milliseconds."""
    from analysis import grid_worker

    probe, waits, done = _probe_readers(engine), [], threading.Event()
    elapsed: list[float] = []

    def build() -> None:
        started = time.perf_counter()
        grid_worker.grid_of(engine, in_worker=in_worker)
        elapsed.append(time.perf_counter() - started)
        done.set()

    builder = threading.Thread(target=build, daemon=True)
    builder.start()
    while not done.is_set():
        waits.append(_timed(probe)[0])
        time.sleep(0.02)
    builder.join()
    return elapsed[0], waits


def bench_grid(engine: Engine, rounds: int) -> None:
    from analysis import grid_worker

    print(f"\n== decision grid: page readers while a grid builds, in a worker against a thread ({rounds} rounds)")
    probe = _probe_readers(engine)
    idle = [_timed(probe)[0] for _ in range(20)]
    print(f"readers with no build: p50 {statistics.median(idle):.1f} ms, max {max(idle):.1f} ms")
    figures: dict[bool, tuple[list[float], list[float]]] = {True: ([], []), False: ([], [])}
    grid_worker._prepare_next_worker()  # as after a build: the next worker's imports are done before it is asked
    time.sleep(8)
    for _ in range(rounds):
        for in_worker in (True, False):
            seconds, waits = _during_build(engine, in_worker)
            figures[in_worker][0].append(seconds)
            figures[in_worker][1].extend(waits)
            time.sleep(8)  # the next worker's imports
    for in_worker, (builds, waits) in figures.items():
        where = "in a worker" if in_worker else "in a thread"
        print(
            f"built {where:<12} build {statistics.median(builds):6.1f} s; readers meanwhile ({len(waits)}): "
            f"p50 {statistics.median(waits):7.1f} ms  p95 {_percentile(waits, 0.95):7.1f}  max {max(waits):7.1f}"
        )
    worker, thread = (statistics.median(figures[flag][1]) for flag in (True, False))
    print(f"readers' p50 in a thread / in a worker: {thread / max(worker, 1e-6):.2f}×")


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


# Whole-data commands -------------------------------------------------------------------------


def _command(url: str, key_file: Path | None, arguments: list[str], extra: dict[str, str] | None = None):
    env = {"DATABASE_URL": url, **({"CLINCONSENSUS_AUDIT_KEY_FILE": str(key_file)} if key_file else {})}
    return whole_data.measure([sys.executable, "-m", "cli.main", *arguments], {**env, **(extra or {})})


def _row(label: str, runs: list, against: list | None = None) -> str:
    cpu = statistics.median(run.cpu for run in runs)
    system = statistics.median(run.system for run in runs)
    wall = statistics.median(run.wall for run in runs)
    peak = statistics.median(run.peak_mb for run in runs)
    line = f"{label:<52} CPU {cpu:6.2f} s (kernel {system:5.2f})  wall {wall:6.2f} s  peak {peak:6.0f} MB"
    if against:
        other = statistics.median(run.cpu for run in against)
        line += f"   without/with {other / max(cpu, 1e-9):.2f}×"
    return line


def bench_report(url: str, key_file: Path | None, rounds: int, folder: Path) -> None:
    print(f"\n== report --json: the kept report on unchanged data against the first run (medians of {rounds})")
    out = folder / "report.json"
    first_runs, kept = [], []
    for _ in range(rounds):
        whole_data.forget_kept_reports(url, key_file=key_file)
        first_runs.append(_command(url, key_file, ["report", "--json", str(out)]))
        first = out.read_bytes()
        kept.append(_command(url, key_file, ["report", "--json", str(out)]))
        if out.read_bytes() != first:
            print("!!! MISMATCH report.json from the kept report differs from the one computed")
    print(_row("kept report (rerun on unchanged data)", kept, first_runs))
    print(_row("no kept report (first run after a change)", first_runs))


_EXPORT_WITH_SYNC = """
import sys
from analysis.exports import paths
paths.STREAM_SYNC_BYTES = int(sys.argv[1])
from cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def bench_exports(url: str, key_file: Path | None, rounds: int, folder: Path) -> None:
    from analysis.exports.paths import STREAM_SYNC_BYTES

    print(f"\n== export healthbench-meta: written through every 64 MB against plain writes (medians of {rounds})")
    env = {"DATABASE_URL": url, **({"CLINCONSENSUS_AUDIT_KEY_FILE": str(key_file)} if key_file else {})}
    runs: dict[int, list] = {STREAM_SYNC_BYTES: [], 1 << 62: []}
    sizes = {}
    for _ in range(rounds):
        for threshold in runs:
            target = folder / f"meta-{threshold}.jsonl"
            command = [sys.executable, "-c", _EXPORT_WITH_SYNC, str(threshold), "export", "healthbench-meta"]
            runs[threshold].append(whole_data.measure([*command, str(target)], env))
            sizes[threshold] = target.stat().st_size
            target.unlink()
    if len(set(sizes.values())) != 1:
        print(f"!!! MISMATCH export sizes differ: {sizes}")
    print(f"file: {sizes[STREAM_SYNC_BYTES] / 2**20:,.0f} MB")
    print(_row("written through every 64 MB (as shipped)", runs[STREAM_SYNC_BYTES], runs[1 << 62]))
    print(_row("plain buffered writes", runs[1 << 62]))


# Collector: the server's freeze, the pause in imports ----------------------------------------

_FREEZE_CHILD = """
import gc, json, statistics, sys, time
import admin, annotate, dashboards, review
from ui import home, process, shell
if sys.argv[1] == "frozen":
    process.freeze_imports_once()
else:
    gc.collect()
times = []
for _ in range(7):
    started = time.process_time()
    gc.collect()
    times.append((time.process_time() - started) * 1000.0)
print(json.dumps([statistics.median(times), len(gc.get_objects()), gc.get_freeze_count()]))
"""


def bench_freeze(rounds: int) -> None:
    import json

    print(f"\n== server: a full collection after the app's imports, frozen or not (median of 7, {rounds} rounds)")
    found: dict[str, list[float]] = {"frozen": [], "not frozen": []}
    for _ in range(rounds):
        for mode in found:
            out = subprocess.run(
                [sys.executable, "-c", _FREEZE_CHILD, mode], cwd=ROOT, capture_output=True, text=True, check=True
            ).stdout
            ms, tracked, frozen = json.loads(out.strip().splitlines()[-1])
            found[mode].append(ms)
            print(f"  {mode:<11} full collection {ms:7.1f} ms CPU  ({tracked:,} tracked, {frozen:,} frozen)")
    with_, without = (statistics.median(found[mode]) for mode in found)
    ratio = f"{without / with_:.0f}×" if with_ >= 0.1 else "frozen under 0.1 ms"
    print(f"a full collection: frozen {with_:.1f} ms, not frozen {without:.1f} ms of CPU ({ratio})")


_IMPORT_CHILD = """
import gc, sys
if sys.argv[1] == "running":
    gc.disable = lambda: None  # the pause then pauses nothing
from pathlib import Path
from db.importers import import_file
from db.store.engine import make_engine
engine = make_engine(sys.argv[2])
import_file(engine, "labels", Path(sys.argv[3]), actor="bench")
"""

_IMPORT_SETUP = """
import sys
from pathlib import Path
from db.importers import import_file
from db.migrations.upgrade import upgrade
from db.store.engine import make_engine
engine = make_engine(sys.argv[1])
upgrade(engine)
for kind, path in (("cases", sys.argv[2]), ("responses", sys.argv[3])):
    import_file(engine, kind, Path(path), actor="bench")
"""


def bench_imports(cases: int, rounds: int, folder: Path) -> None:
    from demo.generator import write_demo_files

    paths = write_demo_files(folder / "files", scale="full", n_cases=cases, n_judges=1)
    with open(paths["labels"], "rb") as handle:
        labels = sum(1 for _ in handle)
    print(f"\n== label import: {labels:,} labels ({cases} cases) into fresh SQLite, collector paused or running")
    runs: dict[str, list] = {"paused": [], "running": []}
    for round_no in range(rounds):
        for mode in runs:
            url = f"sqlite:///{folder / f'import-{mode}-{round_no}.db'}"
            subprocess.run(
                [sys.executable, "-c", _IMPORT_SETUP, url, str(paths["cases"]), str(paths["responses"])],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            command = [sys.executable, "-c", _IMPORT_CHILD, mode, url, str(paths["labels"])]
            runs[mode].append(whole_data.measure(command))
            Path(url.split("///", 1)[1]).unlink()
    print(_row("collector paused (as shipped)", runs["paused"], runs["running"]))
    print(_row("collector running", runs["running"]))


# Main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, help="URL of a demo database (the full scale, mostly final)")
    parser.add_argument("--key-file", type=Path, default=None, help="its audit key file (else the environment's)")
    parser.add_argument("--repeat", type=int, default=5, help="timings of each kept reader and its plain SQL")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each with/without pair of the others")
    parser.add_argument("--only", default=",".join(PIECES), help=f"comma-separated, of {','.join(PIECES)}")
    parser.add_argument("--import-cases", type=int, default=150, help="cases of the label file bench_imports imports")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    unknown = only - set(PIECES)
    if unknown:
        parser.error(f"unknown pieces: {', '.join(sorted(unknown))}")
    engine = make_engine(args.database)
    upgrade(engine)
    print(whole_data.load_note())
    mismatched: list[str] = []
    if "kept" in only:
        mismatched = bench_kept(engine, args.repeat)
    if "grid" in only:
        bench_grid(engine, args.rounds)
    engine.dispose()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        if "report" in only:
            bench_report(args.database, args.key_file, args.rounds, folder)
        if "exports" in only:
            bench_exports(args.database, args.key_file, args.rounds, folder)
        if "freeze" in only:
            bench_freeze(args.rounds)
        if "imports" in only:
            bench_imports(args.import_cases, args.rounds, folder)
    if mismatched:
        print(f"\n!!! the plain SQL gave other figures than the kept tables for: {', '.join(mismatched)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
