"""Batch export and import at the paper's scale: one model's 2,500 cases × 30 criteria = 75,000 requests.

Beside the raw read of the label table measured in the same run (the sqlite3 shell's `SELECT * FROM label`
to /dev/null where the database is a SQLite file, and the driver's read of `benchmarks.whole_data`),
each command runs as an admin types it, in its own process (`benchmarks.whole_data.measure`: CPU time,
wall time, peak memory):

1. `clinconsensus judge batch export DIR --model judge-8b --models M`: every item of model M keyed, the
   shared cache asked, each request's body filled, requests.jsonl and manifest.json written;
2. the results an engine would write (not timed: a stand-in for `vllm run-batch`, one fenced json answer
   per request, met a fixed function of its custom id) — the results file's size is printed;
3. `clinconsensus judge batch import RESULTS --batch DIR`: the file checked, the items rebuilt and matched,
   75,000 answers into the cache and as decisions, the run recorded; checked: that many decisions stored;
4. the same import again: "0 new decisions", nothing written.

Setup (not timed): the demo generator writes the files and the importers load cases, responses and labels
into a fresh SQLite file in a child process; or give `--database URL` (a copy of the suite's build).

    .venv/bin/python -m benchmarks.bench_batch [--cases 2500] [--models 11] [--database URL]

Measured at the paper's scale (SQLite, 1,828,597 label rows, 2 cores under a load average of 21, CPU time):
the sqlite3 shell's raw read 1.52 s (the driver's 3.21 s); export of 75,000 requests 6.39 s, 397 MB peak,
requests.jsonl 289.0 MB, manifest.json 0.9 kB; results.jsonl 42.5 MB; import 11.27 s, 521 MB peak (19.88 s
before the import read answers without the SDK's models); the same import again 9.26 s, "0 new decisions".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import whole_data


def build_database(url: str, cases: int, models: int, seed: int) -> None:
    """The demo's cases, responses and labels at this size (runs in its own process; see --build-into)."""
    from db.importers import import_file
    from db.store.engine import make_engine
    from db.store.migrate import upgrade
    from demo.generator import write_demo_files

    engine = make_engine(url)
    upgrade(engine)
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as folder:
        paths = write_demo_files(folder, scale="full", seed=seed, n_cases=cases, n_models=models, n_judges=1)
        for kind in ("cases", "responses", "labels"):
            started = time.perf_counter()
            summary = import_file(engine, kind, paths[kind], actor="benchmark")
            print(f"setup: imported {summary.records:,} {kind} in {time.perf_counter() - started:.1f} s", flush=True)
    engine.dispose()


def write_results(requests: Path, results: Path) -> int:
    """One answer per request in the batch output format, as an engine writes them; returns the lines."""
    written = 0
    with requests.open("rb") as source, results.open("w", encoding="utf-8") as target:
        for line in source:
            identifier = json.loads(line)["custom_id"]
            met = hashlib.sha256(identifier.encode()).digest()[0] % 2 == 0
            content = "```json\n" + json.dumps({"explanation": "依据评分标准判断。", "criteria_met": met}) + "\n```"
            body = {
                "id": f"chatcmpl-{written}",
                "object": "chat.completion",
                "created": 1767225600,
                "model": "judge-8b",
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                ],
                "usage": {"prompt_tokens": 900, "completion_tokens": 30, "total_tokens": 930},
            }
            output = {
                "id": f"vllm-{written}",
                "custom_id": identifier,
                "response": {"status_code": 200, "request_id": f"vllm-batch-{written}", "body": body},
                "error": None,
            }
            target.write(json.dumps(output, ensure_ascii=False) + "\n")
            written += 1
    return written


def shell_label_read(url: str) -> whole_data.Measured | None:
    """`sqlite3 DB 'SELECT * FROM label' > /dev/null` (SQLite files only, when the shell is installed)."""
    sqlite3 = shutil.which("sqlite3")
    if not url.startswith("sqlite") or sqlite3 is None:
        return None
    database = whole_data.python_url(url).split("///", 1)[1]
    shell = shutil.which("sh") or "/bin/sh"
    return whole_data.measure([shell, "-c", f"'{sqlite3}' '{database}' 'SELECT * FROM label' > /dev/null"])


def first_model(url: str) -> tuple[str, int]:
    from sqlalchemy import text

    from db.store.engine import make_engine

    engine = make_engine(url)
    with engine.connect() as connection:
        model = connection.execute(text("SELECT model FROM response ORDER BY model LIMIT 1")).scalar_one()
        labels = int(connection.execute(text("SELECT count(*) FROM label")).scalar_one())
    engine.dispose()
    return str(model), labels


def decisions_of(url: str, judge: str) -> int:
    from sqlalchemy import text

    from db.store.engine import make_engine

    engine = make_engine(url)
    with engine.connect() as connection:
        found = connection.execute(text("SELECT count(*) FROM judge_decision WHERE judge = :j"), {"j": judge})
        count = int(found.scalar_one())
    engine.dispose()
    return count


def build_in_child(folder: Path, args: argparse.Namespace) -> str:
    url = f"sqlite:///{folder / 'bench.db'}"
    os.environ["CLINCONSENSUS_AUDIT_KEY_FILE"] = str(folder / "audit.key")
    print(f"building {args.cases:,} cases × {args.models} models in a child process …", flush=True)
    command = [sys.executable, "-m", "benchmarks.bench_batch", "--build-into", url, "--cases", str(args.cases)]
    subprocess.run([*command, "--models", str(args.models), "--seed", str(args.seed)], check=True)
    return url


def measure_batch(url: str, folder: Path) -> int:
    model, labels = first_model(url)
    print(whole_data.load_note(), flush=True)
    shell = shell_label_read(url)
    raw = whole_data.raw_label_read(url)
    if shell is not None:
        print(
            f"raw read, sqlite3 shell (SELECT * FROM label > /dev/null, {labels:,} rows): "
            f"{shell.cpu:.2f} s CPU, {shell.wall:.2f} s wall",
            flush=True,
        )
    print(
        f"raw read, driver (SELECT * FROM label, {int(raw.output):,} rows fetched): {raw.cpu:.2f} s CPU, "
        f"{raw.wall:.2f} s wall, {raw.peak_mb:,.0f} MB peak",
        flush=True,
    )
    reference = shell or raw
    batch = folder / "batch"
    exported = whole_data.clinconsensus(
        url, "judge", "batch", "export", str(batch), "--model", "judge-8b", "--judge", "bench-batch", "--models", model
    )
    requests = batch / "requests.jsonl"
    lines = sum(1 for _ in requests.open("rb"))
    print(
        f"judge batch export ({model}): {lines:,} requests, requests.jsonl {requests.stat().st_size / 1e6:,.1f} MB, "
        f"manifest.json {(batch / 'manifest.json').stat().st_size / 1e3:,.1f} kB; "
        f"{exported.against(reference)}",
        flush=True,
    )
    results = folder / "results.jsonl"
    write_results(requests, results)
    print(f"results.jsonl (the engine's output, not timed): {results.stat().st_size / 1e6:,.1f} MB", flush=True)
    imported = whole_data.clinconsensus(url, "judge", "batch", "import", str(results), "--batch", str(batch))
    stored = decisions_of(url, "bench-batch")
    print(f"judge batch import: {stored:,} decisions stored; {imported.against(reference)}", flush=True)
    again = whole_data.clinconsensus(url, "judge", "batch", "import", str(results), "--batch", str(batch))
    print(
        f"judge batch import again ({again.output.strip().split(': ', 1)[-1][:40]}…): {again.against(reference)}",
        flush=True,
    )
    if stored != lines or "0 new decisions" not in again.output:
        print(f"MISMATCH: {stored:,} decisions for {lines:,} requests; re-import said {again.output!r}", flush=True)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2500)
    parser.add_argument("--models", type=int, default=11)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--database", default=None, help="measure on this database instead of building one")
    parser.add_argument("--build-into", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.build_into:
        build_database(args.build_into, args.cases, args.models, args.seed)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as name:
        folder = Path(name)
        url = args.database if args.database is not None else build_in_child(folder, args)
        return measure_batch(url, folder)


if __name__ == "__main__":
    sys.exit(main())
