"""Rubric validation speed: `validate rubrics` beside a plain `judge run` of the same number of items.

Both grade items against the loopback OpenAI-compatible server (tools/llm_server.py, its own process)
answering every request after `--latency` seconds, at the same concurrency, each on items not answered
before (a fresh seed per round), in alternate rounds; printed as items/s of each and their ratio
(validation / judge run) per round. Then a re-run of the last validation: nothing is sent.

Setup (not timed): the demo generator writes the cases and responses of `--cases` cases (no labels) into a
fresh SQLite file, and every case gets a reference answer (three anchors a case).

    .venv/bin/python -m benchmarks.bench_validate [--cases 40] [--latency 0.03] [--concurrency 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from benchmarks.bench_judge import build_database, start_server


def add_references(engine, folder: Path) -> None:
    from sqlalchemy import select

    from db.importers import import_file
    from db.store.engine import session_scope
    from db.store.models import Case

    with session_scope(engine, read_only=True) as session:
        case_ids = list(session.execute(select(Case.case_id)).scalars())
    path = folder / "references.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for case_id in case_ids:
            row = {
                "case_id": case_id,
                "reference_answer": f"{case_id} 的参考答案：先排除危重情况，再给出检查、处理与随访。",
            }
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    import_file(engine, "references", path, actor="benchmark")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--latency", type=float, default=0.03)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)

    from db.store.engine import make_engine
    from judge.runner import RunOptions, run_judge
    from judge.validate import ValidateOptions, run_validation

    with tempfile.TemporaryDirectory(prefix="bench-validate-") as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        build_database(url, args.cases, 3, seed=11)
        engine = make_engine(url)
        add_references(engine, Path(folder))
        server, base_url = start_server(args.latency)
        try:
            common = {"base_url": base_url, "model": "judge-8b", "concurrency": args.concurrency, "max_retries": 2}
            for round_no in range(args.rounds):
                seed = 1000 + round_no
                validated = run_validation(engine, ValidateOptions(judge=f"anchors-{seed}", seed=seed, **common))
                items = validated["done"] - validated["cached"]
                if not items or validated["errors"]:
                    print(f"round {round_no + 1}: validation sent nothing new ({validated['message']})", flush=True)
                    break
                judged = run_judge(engine, RunOptions(judge=f"plain-{seed}", seed=seed, limit=items, **common))
                v_rate, j_rate = validated["items_per_second"] or 0.0, judged["items_per_second"] or 0.0
                print(
                    f"round {round_no + 1}: validate rubrics {items:,} items at {v_rate:.1f} items/s; "
                    f"judge run {judged['done']:,} items at {j_rate:.1f} items/s; "
                    f"ratio {v_rate / j_rate if j_rate else float('nan'):.2f} "
                    f"(ideal {args.concurrency / args.latency:.0f} items/s)",
                    flush=True,
                )
            again = run_validation(engine, ValidateOptions(judge=f"anchors-{seed}", seed=seed, **common))
            print(
                f"re-run: {again['done']:,} items, {again['cached']:,} from the cache, {again['requests']:,} requests",
                flush=True,
            )
        finally:
            server.kill()
            engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
