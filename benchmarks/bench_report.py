"""Report speed and memory at full scale (2,500 cases × 30 criteria × 11 models × 2 groups = 1.65 M decisions).

Prints, and checks in the same run:
- compute: `build_report` on in-memory frames (everything report.json holds, bootstrap included);
- the straightforward implementation (loops over responses and aligned pairs calling
  `sklearn.metrics.f1_score` per case) on the same frames, its time, the speed-up, and that both give
  the same numbers;
- database load: the frames written to a fresh SQLite file (or `--database URL`, e.g. one filled by
  `clinconsensus demo --scale full`) and read back with `analysis.loader.load_frames`;
- the command as an admin runs it, each in its own process: `clinconsensus report --json` the first time
  after the data changed and again on unchanged data, beside the raw read of the label table in the same
  run (`benchmarks.whole_data`: CPU time, ratio, peak memory), both writing the bytes built here;
- peak memory (resident set) of the process after each stage.

    .venv/bin/python -m benchmarks.bench_report [--cases 2500] [--models 11] [--database URL] [--skip-reference]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score, f1_score

from analysis import provenance, score_section, validity_section
from analysis.grid import DecisionGrid, prepare
from analysis.loader import load_frames
from analysis.report import Report, build_report, json_bytes, report_json
from benchmarks import whole_data
from db.migrations.upgrade import upgrade
from db.rules.gold import (
    PROVISIONAL,  # the synthetic frames carry no check labels; §4 as written
    gold_labels,
    group_final_labels,
)
from db.store.engine import make_engine
from db.store.models import utcnow
from tools import metrics_reference as reference


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(func, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    result = func(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


CHUNK = 100_000
#: The timings frame as `analysis.loader.load_timings` returns it.
TIMING_COLUMNS = {
    "user_id": "int64",
    "response_id": "int64",
    "stage": "object",
    "active_ms": "int64",
    "n_criteria": "int64",
}


def _insert(connection, sql: str, columns: list) -> None:
    """executemany in chunks, so the rows never all exist as Python tuples at once."""
    total = len(columns[0])
    for start in range(0, total, CHUNK):
        connection.exec_driver_sql(sql, list(zip(*(column[start : start + CHUNK] for column in columns))))


def write_frames(engine, frames) -> None:
    """Bulk-write synthetic frames into an empty migrated database (benchmark setup, not the importer)."""
    now = utcnow()
    with engine.begin() as connection:
        _write_users(connection, frames.users, now)
        _write_cases(connection, frames.cases, now)
        _write_criteria(connection, frames.criteria)
        _write_responses(connection, frames.responses, now)
        _write_labels(connection, frames.labels, frames.responses, now)
        _write_judge_decisions(connection, frames.judge)
        _write_calibration(connection, frames.calibration, now)


def _write_users(connection, frame: pd.DataFrame, now) -> None:
    users = [
        (
            int(u.user_id),
            u.username,
            u.username,
            u.role,
            None if u.group_no != u.group_no or u.group_no is None else int(u.group_no),
            True,
            now,
            1,
        )
        for u in frame.itertuples()
    ]
    connection.exec_driver_sql(
        "INSERT INTO user (id, username, display_name, role, group_no, is_active, created_at, "
        "lock_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        users,
    )


def _write_cases(connection, frame: pd.DataFrame, now) -> None:
    """The cases, each with one approved rubric version whose id is the case's key."""
    cases = [
        (
            int(c.case_pk),
            c.case_id,
            c.difficulty,
            c.task,
            json.dumps(c.task_labels, ensure_ascii=False),
            c.subject,
            json.dumps(c.subject_labels, ensure_ascii=False),
            c.user_role,
            "",
            "",
            "{}",
            now,
        )
        for c in frame.itertuples()
    ]
    connection.exec_driver_sql(
        'INSERT INTO "case" (id, case_id, difficulty, task, task_labels, subject, subject_labels, user_role, '
        "clinical_context, user_request, extra, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        cases,
    )
    connection.exec_driver_sql(
        "INSERT INTO rubric_version (id, case_pk, version, status, created_at, lock_version) "
        "VALUES (?, ?, 1, 'approved', ?, 1)",
        [(int(pk), int(pk), now) for pk in frame["case_pk"]],
    )


def _write_criteria(connection, c: pd.DataFrame) -> None:
    connection.exec_driver_sql(
        "INSERT INTO criterion (rubric_version_id, position, criterion_id, text, tags) VALUES (?, ?, ?, '', '[]')",
        list(
            zip(
                c["rubric_version_id"].astype(int).tolist(),
                c["position"].astype(int).tolist(),
                c["criterion_id"].tolist(),
            )
        ),
    )


def _write_responses(connection, r: pd.DataFrame, now) -> None:
    connection.exec_driver_sql(
        "INSERT INTO response (id, case_pk, model, text, length, code, created_at) VALUES (?, ?, ?, '', ?, ?, ?)",
        [
            (int(i), int(pk), m, int(n), f"R{i:07d}", now)
            for i, pk, m, n in zip(r["response_id"], r["case_pk"], r["model"], r["length"])
        ],
    )


def _write_labels(connection, lab: pd.DataFrame, r: pd.DataFrame, now) -> None:
    # Every label is made on its case's one approved rubric version (whose id is the case's key here).
    case_of_response = dict(zip(r["response_id"].astype(int), r["case_pk"].astype(int)))
    _insert(
        connection,
        "INSERT INTO label (response_id, criterion_id, stage, group_no, met, user_id, created_at, updated_at, "
        "lock_version, rubric_version_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?)",
        [
            lab["response_id"].astype(int).tolist(),
            lab["criterion_id"].tolist(),
            [str(stage) for stage in lab["stage"]],
            lab["group_no"].astype(int).tolist(),
            lab["met"].astype(bool).tolist(),
            lab["user_id"].astype(int).tolist(),
            [now] * len(lab),
            [now] * len(lab),
            [case_of_response[int(i)] for i in lab["response_id"]],
        ],
    )


def _write_judge_decisions(connection, j: pd.DataFrame) -> None:
    _insert(
        connection,
        "INSERT INTO judge_decision (judge, response_id, criterion_id, met) VALUES (?, ?, ?, ?)",
        [
            j["judge"].tolist(),
            j["response_id"].astype(int).tolist(),
            j["criterion_id"].tolist(),
            j["met"].astype(bool).tolist(),
        ],
    )


def _write_calibration(connection, samples: pd.DataFrame | None, now) -> None:
    if samples is not None and len(samples):
        connection.exec_driver_sql(
            "INSERT INTO calibration_sample (model, response_id, seed, drawn_at, drawn_by) VALUES (?, ?, 1, ?, ?)",
            [(m, int(i), now, "benchmark") for m, i in zip(samples["model"], samples["response_id"])],
        )


def compare(vectorised: dict, frames, k: int) -> float:
    """Largest difference between the report and the straightforward implementation; raises if any value differs."""
    worst = 0.0

    def check(label, mine, theirs):
        nonlocal worst
        if mine is None or theirs is None:
            if mine is not theirs:
                raise AssertionError(f"{label}: {mine} vs {theirs}")
            return
        difference = abs(float(mine) - float(theirs))
        worst = max(worst, difference)
        if difference > 1e-9:
            raise AssertionError(f"{label}: {mine} vs {theirs}")

    started, started_cpu = time.perf_counter(), time.process_time()
    models = reference.reference_model_scores(frames, k)
    agreement = reference.reference_agreement(frames)
    judges = reference.reference_judge_fidelity(frames)
    length = reference.reference_length(frames, k)
    elapsed, elapsed_cpu = time.perf_counter() - started, time.process_time() - started_cpu
    for model, values in models.items():
        for key, value in values.items():
            check(f"models.{model}.{key}", vectorised["models"][model][key], value)
    for model, values in agreement["models"].items():
        for key, value in values.items():
            check(f"agreement.{model}.{key}", vectorised["agreement"][model][key], value)
    for key, value in agreement["overall"].items():
        check(f"agreement_overall.{key}", vectorised["agreement_overall"][key], value)
    for judge, values in judges.items():
        for key, value in values.items():
            check(f"judges.{judge}.{key}", vectorised["judges"][judge][key], value)
    for key, value in length.items():
        check(f"length.{key}", vectorised["length"][key], value)
    compare.elapsed, compare.elapsed_cpu = elapsed, elapsed_cpu
    return worst


def compare_criteria(document: dict, frames, n_cases: int) -> tuple[int, float, float]:
    """Criterion reliability of the first `n_cases` cases recomputed with sklearn, straight from the label rows.

    Returns (criteria checked, largest difference, CPU seconds of the straightforward computation)."""
    started = time.process_time()
    finals = group_final_labels(frames.labels)
    gold = gold_labels(frames.labels).set_index(["response_id", "criterion_id"])["met"]
    wanted = set(frames.cases["case_pk"].head(n_cases))
    responses = frames.responses[frames.responses["case_pk"].isin(wanted)]
    finals = finals[finals["response_id"].isin(responses["response_id"])]
    by_group = {
        g: {key: bool(met) for key, met in zip(zip(part["response_id"], part["criterion_id"]), part["met"])}
        for g, part in finals.groupby("group_no")
    }
    judges = {
        name: {key: bool(met) for key, met in zip(zip(part["response_id"], part["criterion_id"]), part["met"])}
        for name, part in frames.judge[frames.judge["response_id"].isin(responses["response_id"])].groupby("judge")
    }
    criteria_of = frames.criteria.groupby("case_pk")["criterion_id"].apply(list).to_dict()
    case_id_of = dict(zip(frames.cases["case_pk"], frames.cases["case_id"]))
    worst, checked = 0.0, 0
    results = []
    for pk, part in responses.groupby("case_pk"):
        criteria = criteria_of.get(pk, [])
        aligned = [
            r for r in part["response_id"] if all((r, c) in by_group[1] and (r, c) in by_group[2] for c in criteria)
        ]
        for criterion in criteria:
            if not aligned:
                continue
            g1 = [by_group[1][(r, criterion)] for r in aligned]
            g2 = [by_group[2][(r, criterion)] for r in aligned]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                kappa = cohen_kappa_score(g1, g2)
            gold_pairs = [(r, gold[(r, criterion)]) for r in aligned if (r, criterion) in gold.index]
            judge_mf1 = {}
            for name, decided in judges.items():
                pairs = [(bool(g), decided[(r, criterion)]) for r, g in gold_pairs if (r, criterion) in decided]
                judge_mf1[name] = f1_score(*zip(*pairs), average="macro") if pairs else None
            results.append((case_id_of[pk], criterion, len(aligned), kappa, judge_mf1))
    elapsed = time.process_time() - started
    for case_id, criterion, n, kappa, judge_mf1 in results:
        entry = document["criteria"][case_id][criterion]
        if entry["n_aligned"] != n:
            raise AssertionError(f"criteria.{case_id}.{criterion}.n_aligned: {entry['n_aligned']} vs {n}")
        values = [(entry["kappa"], None if kappa != kappa else kappa)]
        values += [(entry["judge_mf1"][name], value) for name, value in judge_mf1.items()]
        for mine, theirs in values:
            if (mine is None) != (theirs is None) or (mine is not None and abs(mine - theirs) > 1e-9):
                raise AssertionError(f"criteria.{case_id}.{criterion}: {mine} vs {theirs}")
            if mine is not None:
                worst = max(worst, abs(mine - theirs))
        checked += 1
    return checked, worst, elapsed


def command_figures(url: str, folder: Path, repeat: int, k: int, expected: bytes, *, own: bool) -> None:
    """`clinconsensus report --json` the first time after the data changed and again on unchanged data, each
    beside the raw read of the label table measured in the same run (least CPU of `repeat` rounds). `own`: the
    benchmark built the database (an audit key of its own; else the environment's)."""
    out, key_file = folder / "command-report.json", (folder / "audit.key" if own else None)
    raws, firsts, agains = [], [], []
    for _ in range(max(1, repeat)):
        raws.append(whole_data.raw_label_read(url))
        whole_data.forget_kept_reports(url, key_file=key_file)
        firsts.append(
            whole_data.clinconsensus(
                url, "report", "--k", str(k), "--gold", "provisional", "--json", str(out), key_file=key_file
            )
        )
        first_bytes = out.read_bytes()
        agains.append(
            whole_data.clinconsensus(
                url, "report", "--k", str(k), "--gold", "provisional", "--json", str(out), key_file=key_file
            )
        )
        if out.read_bytes() != first_bytes:
            raise AssertionError("report --json on unchanged data wrote other bytes than the first run")
    if first_bytes != expected:
        raise AssertionError("the command's report.json differs from the report built from the database here")
    raw, first, again = (min(runs, key=lambda measured: measured.cpu) for runs in (raws, firsts, agains))
    print(whole_data.load_note())
    print(
        f"raw read of the label table (SELECT * FROM label, {int(raw.output):,} rows through the driver, own "
        f"process): {raw.cpu:.2f} s CPU, {raw.wall:.2f} s wall, {raw.peak_mb:,.0f} MB peak"
    )
    print(f"report --json, first time after the data changed: {first.against(raw)}")
    print(f"report --json again on unchanged data (kept per data version on SQLite): {again.against(raw)}")
    print(f"  both the same bytes as the report built from the database in this process ({len(expected):,} bytes)")


def calibration_samples(frames, size: int, seed: int) -> pd.DataFrame:
    """A calibration sample of `size` responses of every model (as `assign calibration` would draw)."""
    rng = np.random.default_rng(seed)
    parts = []
    for model, responses in frames.responses.groupby("model"):
        chosen = rng.choice(responses["response_id"].to_numpy(), size=min(size, len(responses)), replace=False)
        parts.append(pd.DataFrame({"model": model, "response_id": np.sort(chosen)}))
    return pd.concat(parts, ignore_index=True)


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2500)
    parser.add_argument("--models", type=int, default=11)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--repeat", type=int, default=3, help="compute runs; the best is reported")
    parser.add_argument("--database", default=None, help="load from this database instead of writing a SQLite file")
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--skip-database", action="store_true")
    parser.add_argument("--criteria-sample", type=int, default=200, help="cases whose criteria the reference checks")
    return parser.parse_args(argv)


def build_frames(args: argparse.Namespace):
    """The synthetic frames of the run's size, with empty save timings and a calibration sample of each model."""
    frames, wall, _ = timed(
        reference.synthetic_frames,
        args.cases,
        args.models,
        30,
        args.seed,
        judges=("judge-a", "judge-b", "judge-c"),
        adjudication_share=0.97,
    )
    # The synthetic data has no stored save timings; a database without any reads them back as an empty
    # frame, so the in-memory report is built on the same (empty) timings as the one from the database.
    frames.timings = pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in TIMING_COLUMNS.items()})
    print(
        f"synthetic frames: {len(frames.cases):,} cases, {len(frames.responses):,} responses, "
        f"{len(frames.labels):,} labels, {len(frames.judge):,} judge decisions ({wall:.1f} s)"
    )
    print(f"peak RSS after building frames: {peak_rss_mb():,.0f} MB")
    frames.calibration = calibration_samples(frames, size=60, seed=args.seed)
    return frames


@dataclass
class Computed:
    """The report built in memory (the last of the runs), its report.json document, its decision grid, and the
    least times of the runs with and without the analysis depth."""

    report: Report
    document: dict
    grid: DecisionGrid
    best_wall: float
    best_cpu: float
    least_cpu: float
    least_before_cpu: float


def compute_figures(frames, k: int, repeat: int) -> Computed:
    """`build_report` and report.json on the frames, with and without the analysis depth, `repeat` times each."""
    runs = []
    for _ in range(max(1, repeat)):
        (report, document), wall, cpu = timed(
            lambda: (lambda r: (r, report_json(r)))(build_report(frames, k, gold_basis=PROVISIONAL))
        )
        runs.append((wall, cpu))
    best_wall, best_cpu = min(runs)
    grid, prepare_wall, _ = timed(prepare, frames)
    print(
        f"machine load average (1 min) {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores — wall time grows with "
        "other work on the machine; CPU time does not"
    )
    print(
        f"report.json compute: best {best_wall:.2f} s wall, {best_cpu:.2f} s CPU over {len(runs)} runs "
        f"(all: {', '.join(f'{w:.2f}' for w, _ in runs)} s); of which decision grid {prepare_wall:.2f} s"
    )
    print(
        f"  {document['agreement_overall']['n_aligned']:,} aligned pairs, overall pooled MF1 "
        f"{document['agreement_overall']['pooled_mf1']:.4f}; pending {document['pending']}"
    )
    before = []
    for _ in range(max(1, repeat)):
        _, wall, cpu = timed(lambda: report_json(build_report(frames, k, insights=False, gold_basis=PROVISIONAL)))
        before.append((wall, cpu))
    before_wall, before_cpu = min(before)
    # CPU time compares the two builds (wall time follows the machine's other work); least of each set of runs
    least_cpu, least_before_cpu = min(c for _, c in runs), min(c for _, c in before)
    print(
        f"  without the analysis depth (criteria, judges by model and slice, physicians — the report before it): "
        f"best {before_wall:.2f} s wall, {before_cpu:.2f} s CPU; the analysis depth adds "
        f"{least_cpu - least_before_cpu:.2f} s CPU (least CPU {least_cpu:.2f} s against {least_before_cpu:.2f} s; "
        f"{len(document['criteria']):,} cases' criteria, "
        f"{sum(document['criteria_flags']['counts'].values()):,} flagged)"
    )
    return Computed(report, document, grid, best_wall, best_cpu, least_cpu, least_before_cpu)


def section_figures(computed: Computed, frames, repeat: int) -> None:
    """What the defensible scores (comparisons, tiers, calibrated scores, ranking fidelity) add to the report."""
    report, document, least_cpu = computed.report, computed.document, computed.least_cpu
    section_cpu = min(
        timed(
            score_section.build_section,
            report.grid,
            report.scores,
            report.models,
            report.intervals,
            report.k,
            samples=frames.calibration,
        )[2]
        for _ in range(max(1, repeat))
    )
    pairs = len(document["comparisons"]["cacs_at_k"])
    calibrated = sum(len(models) for models in document["calibrated"].values())
    print(
        f"  of which comparisons ({pairs} pairs × 2 metrics), tiers, calibrated scores ({calibrated} judge × model), "
        f"ranking fidelity: {section_cpu:.2f} s CPU; the report with them against without: "
        f"{least_cpu / max(least_cpu - section_cpu, 1e-9):.2f}×"
    )


def reference_figures(computed: Computed, frames, args: argparse.Namespace) -> None:
    """The straightforward implementations on the same frames: their time, and that they give the same numbers."""
    document = computed.document
    checked, worst, elapsed = compare_criteria(document, frames, args.criteria_sample)
    insights_cpu = computed.least_cpu - computed.least_before_cpu
    per_criterion = elapsed / max(checked, 1)
    total_criteria = sum(len(criteria) for criteria in document["criteria"].values())
    print(
        f"criterion reliability, straightforward (sklearn cohen_kappa_score and f1_score per criterion) on "
        f"{checked:,} criteria: {elapsed:.1f} s CPU, ≈ {per_criterion * total_criteria:.0f} s for all "
        f"{total_criteria:,} (the whole analysis depth here: {insights_cpu:.2f} s CPU); same numbers "
        f"(largest difference {worst:.1e})"
    )
    worst = compare(document, frames, args.k)
    print(
        f"straightforward implementation (loops, sklearn f1_score per case): {compare.elapsed:.1f} s wall, "
        f"{compare.elapsed_cpu:.1f} s CPU; speed-up {compare.elapsed / computed.best_wall:.0f}× wall, "
        f"{compare.elapsed_cpu / computed.best_cpu:.0f}× CPU; same numbers (largest difference {worst:.1e})"
    )
    print(f"peak RSS after reference: {peak_rss_mb():,.0f} MB")


def open_database(url: str | None, folder: Path, frames):
    """The engine of `url`, or of a fresh SQLite file in `folder` with the frames written to it."""
    if url:
        return make_engine(url)
    engine = make_engine(f"sqlite:///{folder / 'bench.db'}")
    upgrade(engine)
    _, wall, _ = timed(write_frames, engine, frames)
    print(f"(setup) wrote the frames to SQLite in {wall:.1f} s")
    return engine


def database_figures(engine, document: dict, args: argparse.Namespace, folder: Path) -> None:
    """The frames read back from the database, the report built from them (the same as in memory), and the
    command as an admin runs it."""
    loaded, wall, cpu = timed(load_frames, engine)
    print(f"database load (load_frames): {wall:.2f} s wall, {cpu:.2f} s CPU — {len(loaded.labels):,} labels")
    built, wall, _ = timed(lambda: build_report(loaded, args.k, gold_basis=PROVISIONAL))
    loaded_document = report_json(built)
    same = json.dumps(loaded_document, sort_keys=True) == json.dumps(document, sort_keys=True)
    if not args.database:
        print(f"report from the database: {wall:.2f} s; identical to the in-memory report: {same}")
        if not same:
            raise AssertionError("the report from the database differs from the in-memory one")
    url = args.database or f"sqlite:///{folder / 'bench.db'}"
    # What the command adds from the database beside the frames (run_report): validation runs, provenance.
    built.rubric_validity = validity_section.load_validity(engine, built.grid, built.k)
    built.rubric_provenance = provenance.section_json(provenance.load_provenance(engine))
    command_figures(url, folder, args.repeat, args.k, json_bytes(report_json(built)), own=not args.database)


def main(argv=None) -> int:
    args = parse_arguments(argv)
    frames = build_frames(args)
    computed = compute_figures(frames, args.k, args.repeat)
    section_figures(computed, frames, args.repeat)
    print(f"peak RSS after compute: {peak_rss_mb():,.0f} MB")
    if not args.skip_reference:
        reference_figures(computed, frames, args)

    if not args.skip_database:
        document = computed.document
        with tempfile.TemporaryDirectory() as folder:
            engine = open_database(args.database, Path(folder), frames)
            del frames, computed  # the database copy replaces them; the in-memory report.json stays for comparison
            gc.collect()
            database_figures(engine, document, args, Path(folder))
            engine.dispose()
        print(f"peak RSS at the end: {peak_rss_mb():,.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
