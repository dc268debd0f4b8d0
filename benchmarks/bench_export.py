"""Export speed and memory at full scale (2,500 cases × 30 criteria × 11 models × 2 groups = 1.65 M decisions).

The target: `export gold` of every gold label in under 10 s. Printed, not asserted.

Setup (not timed): the demo generator writes the full-scale files (`demo.generator.write_demo_files`) and
the importers load cases, responses and labels into a fresh SQLite file — in a child process, so
the peak memory printed afterwards is the export's own. Or give `--database URL` of a database
that already holds the data (e.g. after `clinconsensus demo --scale full`).

Each export is then run, its output re-read and checked (row count, sha256), and its wall time,
CPU time and the process's peak resident memory are printed. Then the exports that read everything
(`--commands`) run as `clinconsensus export`, each in its own process, beside the raw read of the label
table measured in the same run (`benchmarks.whole_data`: CPU time, ratio, peak memory).

    .venv/bin/python -m benchmarks.bench_export [--cases 2500] [--models 11] [--database URL]
                                                [--also judgements,judge-items,sft] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import whole_data

TARGET_GOLD_SECONDS = 10.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_database(url: str, cases: int, models: int, seed: int) -> None:
    """Write the demo files and import them (runs in its own process; see --build-into)."""
    from db.importers import import_file
    from db.migrations.upgrade import upgrade
    from db.store.engine import make_engine
    from demo.generator import write_demo_files

    engine = make_engine(url)
    upgrade(engine)
    with tempfile.TemporaryDirectory(prefix="bench-export-") as folder:
        started = time.perf_counter()
        paths = write_demo_files(folder, scale="full", seed=seed, n_cases=cases, n_models=models, n_judges=1)
        print(f"setup: demo files written in {time.perf_counter() - started:.1f} s", flush=True)
        for kind in ("cases", "responses", "labels"):
            started = time.perf_counter()
            summary = import_file(engine, kind, paths[kind], actor="benchmark")
            print(f"setup: imported {summary.records:,} {kind} in {time.perf_counter() - started:.1f} s", flush=True)
    engine.dispose()


def count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))


def run(label: str, func, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    result = func(*args, **kwargs)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label:<28} {wall:8.2f} s wall  {cpu:8.2f} s cpu  peak RSS {peak_rss_mb():8.0f} MB", flush=True)
    return result, wall


#: Exports that write one file (`clinconsensus export` takes a folder for the others).
FILE_EXPORTS = ("gold", "judge-items", "healthbench-meta")


def command_figures(url: str, folder: Path, kinds: list[str], repeat: int) -> None:
    """Each `clinconsensus export KIND` as an admin runs it, in its own process, beside the raw read of the
    label table measured in the same run (least CPU of `repeat` runs each). The audit key is the
    environment's (the benchmark sets its own when it builds the database)."""
    raw = min((whole_data.raw_label_read(url) for _ in range(max(1, repeat))), key=lambda measured: measured.cpu)
    print(whole_data.load_note(), flush=True)
    print(
        f"raw read of the label table (SELECT * FROM label, {int(raw.output):,} rows through the driver, own "
        f"process): {raw.cpu:.2f} s CPU, {raw.wall:.2f} s wall, {raw.peak_mb:,.0f} MB peak",
        flush=True,
    )
    for kind in kinds:
        runs = []
        for attempt in range(max(1, repeat)):
            target = folder / f"command-{kind}-{attempt}{'.jsonl' if kind in FILE_EXPORTS else ''}"
            if kind not in FILE_EXPORTS:
                target.mkdir()
            runs.append(whole_data.clinconsensus(url, "export", kind, str(target)))
        best = min(runs, key=lambda measured: measured.cpu)
        print(f"clinconsensus export {kind}: {best.against(raw)}", flush=True)


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2500)
    parser.add_argument("--models", type=int, default=11)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--database", default=None, help="export from this database instead of building one")
    parser.add_argument("--also", default="judgements", help="other exports to time: judgements,judge-items,sft")
    parser.add_argument("--repeat", type=int, default=3, help="gold export runs; the best is reported")
    parser.add_argument(
        "--commands",
        default="gold,judgements,sft,healthbench-meta",
        help="exports run as `clinconsensus export` beside the raw read of the label table ('' for none)",
    )
    parser.add_argument("--build-into", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def build_in_child(folder: Path, args: argparse.Namespace) -> str:
    """A fresh SQLite database of the run's size, built in a child process; its URL."""
    url = f"sqlite:///{folder / 'bench.db'}"
    # The database's audit chain and the exports that extend it (sft) share a key of the run's own.
    os.environ["CLINCONSENSUS_AUDIT_KEY_FILE"] = str(folder / "audit.key")
    print(f"building {args.cases:,} cases × {args.models} models in a child process …", flush=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_export",
            "--build-into",
            url,
            "--cases",
            str(args.cases),
            "--models",
            str(args.models),
            "--seed",
            str(args.seed),
        ],
        check=True,
    )
    return url


def gold_figures(engine, folder: Path, repeat: int) -> None:
    """`export gold` `repeat` times, its file checked against its summary; the best time against the target."""
    from analysis.exports.file_writers import sha256_file
    from analysis.exports.gold import export_gold

    best = None
    for attempt in range(max(repeat, 1)):
        path = folder / "gold.jsonl"
        summary, seconds = run(f"export gold (run {attempt + 1})", export_gold, engine, path)
        best = seconds if best is None else min(best, seconds)
    rows = count_lines(path)
    assert rows == summary.counts["rows"], "gold export: line count differs from the summary"
    assert sha256_file(path) == summary.files["gold.jsonl"], "gold export: sha256 differs from the summary"
    size_mb = path.stat().st_size / 1e6
    verdict = "meets" if best < TARGET_GOLD_SECONDS else "MISSES"
    print(
        f"gold: {rows:,} rows, {size_mb:.0f} MB; best {best:.2f} s — {verdict} the target of "
        f"< {TARGET_GOLD_SECONDS:.0f} s",
        flush=True,
    )


def other_export_figures(engine, folder: Path, also: str) -> bool:
    """Each export of `also` timed once, its files checked against its manifest; False on an unknown one."""
    from analysis.exports.file_writers import sha256_file
    from analysis.exports.judge_items import export_judge_items
    from analysis.exports.judgements import export_judgements
    from analysis.exports.sft import export_sft

    for what in [w.strip() for w in also.split(",") if w.strip()]:
        if what == "judgements":
            result, _ = run("export judgements (gold)", export_judgements, engine, folder / "judgements")
            manifest = json.loads((folder / "judgements" / "manifest.json").read_text(encoding="utf-8"))
            for name, digest in manifest["sha256"].items():
                assert sha256_file(folder / "judgements" / name) == digest, name
        elif what == "judge-items":
            result, _ = run("export judge-items", export_judge_items, engine, folder / "items.jsonl")
            assert count_lines(folder / "items.jsonl") == result.counts["rows"]
        elif what == "sft":
            result, _ = run("export sft", export_sft, engine, folder / "sft", seed=1, holdout_models=[])
            manifest = json.loads((folder / "sft" / "manifest.json").read_text(encoding="utf-8"))
            for name in ("train.jsonl", "dev.jsonl"):
                assert sha256_file(folder / "sft" / name) == manifest["files"][name]["sha256"], name
        else:
            print(f"unknown export {what!r} (judgements, judge-items, sft)", file=sys.stderr)
            return False
        print("  " + "\n  ".join(line for line in str(result).splitlines()[1:4]), flush=True)
    return True


def main(argv=None) -> int:
    args = parse_arguments(argv)
    if args.build_into:
        build_database(args.build_into, args.cases, args.models, args.seed)
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-export-") as folder:
        folder = Path(folder)
        url = args.database if args.database is not None else build_in_child(folder, args)

        from db.migrations.upgrade import upgrade
        from db.store.engine import make_engine, session_scope
        from db.work.status import counts

        engine = make_engine(url)
        upgrade(engine)
        with session_scope(engine, read_only=True) as session:
            stored = counts(session)
        print(
            f"database: {stored['cases']:,} cases, {stored['responses']:,} responses, "
            f"{stored['labels']['total']:,} labels ({stored['labels']})",
            flush=True,
        )
        print(f"baseline peak RSS {peak_rss_mb():.0f} MB", flush=True)
        gold_figures(engine, folder, args.repeat)
        if not other_export_figures(engine, folder, args.also):
            return 2
        engine.dispose()
        command_figures(url, folder, [kind.strip() for kind in args.commands.split(",") if kind.strip()], args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
