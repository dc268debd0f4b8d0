"""Judge runner speed: items/s against a loopback endpoint answering in 30 ms, and full-scale item generation.

1. Full-scale judge items (2,500 cases × 30 criteria × 11 models = 825,000): the time to select every
   item and compute its cache key (what a run does before sending anything, and all a re-run does),
   beside the straightforward way (fill each prompt with str.format, json.dumps the request, sha256).
2. Throughput: `judge run` against the loopback OpenAI-compatible server (tools/llm_server.py,
   its own process) answering every request after 30 ms, at concurrency 1, 8 and 32, each on items
   not answered before (a fresh seed). Printed beside the ideal (concurrency / latency), with our
   overhead per item: wall time per item minus the latency share (latency / concurrency).
   Beside each, the SDK alone (the same requests, as many at a time, no cache, no database): what
   the runner's bookkeeping costs.
3. A re-run of the last run: nothing is sent, every item comes from the cache.
4. One and two endpoints: `judge run` and `generate` against ONE and then TWO loopback servers (each
   its own process, each answering after the latency), at the same concurrency per endpoint, each on
   items not answered before; beside each the SDK alone sending the same requests (no structured
   output with the official template, as the runner asks) over the same endpoints, as many at a time.

Setup (not timed): the demo generator writes the full-scale files and the importers load cases and
responses (no labels; a judge run does not read them) into a fresh SQLite file.

    .venv/bin/python -m benchmarks.bench_judge [--cases 2500] [--models 11] [--latency 0.03]
                                               [--items 150,800,2400] [--endpoint-items 1600]
                                               [--endpoint-concurrency 16]
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = (1, 8, 32)


def build_database(url: str, cases: int, models: int, seed: int) -> None:
    from db.importers import import_file
    from db.migrations.upgrade import upgrade
    from db.store.engine import make_engine
    from demo.generator import write_demo_files

    engine = make_engine(url)
    upgrade(engine)
    with tempfile.TemporaryDirectory(prefix="bench-judge-") as folder:
        started = time.perf_counter()
        paths = write_demo_files(folder, scale="full", seed=seed, n_cases=cases, n_models=models, n_judges=1)
        print(f"setup: demo files written in {time.perf_counter() - started:.1f} s", flush=True)
        for kind in ("cases", "responses"):
            started = time.perf_counter()
            summary = import_file(engine, kind, paths[kind], actor="benchmark")
            print(f"setup: imported {summary.records:,} {kind} in {time.perf_counter() - started:.1f} s", flush=True)
    engine.dispose()


def time_items(engine) -> None:
    from analysis.loader import load_cases, load_criteria, load_responses
    from analysis.prompt import read_template, user_message
    from judge.items import ItemSource, canonical_request
    from judge.runner import RunOptions

    options = RunOptions(base_url="http://127.0.0.1:9/v1", model="judge-8b")
    template = read_template("official")
    started = time.perf_counter()
    source = ItemSource(
        engine, judge="bench", model=options.model, template=template, parameters=options.key_parameters()
    )
    loaded = time.perf_counter() - started
    keys = sum(len(chunk) for chunk in source.chunks())
    ours = time.perf_counter() - started
    print(
        f"judge items: {keys:,} items selected and keyed in {ours:.1f} s "
        f"({loaded:.1f} s reading the database, {keys / ours:,.0f} items/s)",
        flush=True,
    )

    # The straightforward way, on the same items: fill each prompt, dump the request, hash it.
    started = time.perf_counter()
    cases = load_cases(engine, text=True).set_index("case_pk")
    criteria = load_criteria(engine, text=True)
    responses = load_responses(engine, text=True)
    rubric = {pk: list(zip(group["criterion_id"], group["text"])) for pk, group in criteria.groupby("case_pk")}
    parameters = options.key_parameters()
    count = 0
    for case_pk, text in zip(responses["case_pk"], responses["text"]):
        message = user_message(cases.at[case_pk, "clinical_context"], cases.at[case_pk, "user_request"])
        for _criterion_id, item in rubric.get(case_pk, []):
            prompt = template.format(user_message=message, response=text, rubric_item=item)
            hashlib.sha256(canonical_request(options.model, prompt, parameters).encode("utf-8")).hexdigest()
            count += 1
    plain = time.perf_counter() - started
    print(
        f"judge items, straightforward (str.format + json.dumps + sha256 per item): {count:,} in {plain:.1f} s "
        f"— ours takes {ours / plain:.2f}× its time",
        flush=True,
    )


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.llm_server", "--latency", str(latency)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise SystemExit("the loopback server did not start")
    return process, url


def bare_rate(urls: list[str], concurrency: int, requests: list[dict]) -> float:
    """Items/s of the SDK alone: `requests` (create() arguments) spread in turn over `urls`, `concurrency`
    at a time on each, no cache, no database."""
    import asyncio

    import openai

    async def main() -> float:
        clients = [openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=2, timeout=30) for url in urls]
        slots = [asyncio.Semaphore(concurrency) for _ in urls]

        async def one(index: int, request: dict) -> None:
            async with slots[index % len(urls)]:
                raw = await clients[index % len(urls)].chat.completions.with_raw_response.create(**request)
                raw.parse()

        started = time.perf_counter()
        await asyncio.gather(*(one(index, request) for index, request in enumerate(requests)))
        elapsed = time.perf_counter() - started
        for client in clients:
            await client.close()
        return len(requests) / elapsed

    return asyncio.run(main())


def judge_requests(engine, count: int, seed: int) -> list[dict]:
    """The requests a judge run with the official template sends (no response_format: structured is off)."""
    from analysis.prompt import read_template
    from judge.items import ItemSource

    source = ItemSource(
        engine, judge="bare", model="judge-8b", template=read_template("official"), parameters={}, limit=count
    )
    prompts = [source.prompt(item) for chunk in source.chunks() for item in chunk]
    return [
        {
            "model": "judge-8b",
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "seed": seed,
            "max_tokens": 512,
        }
        for prompt in prompts
    ]


def bare_sdk_rate(engine, url: str, concurrency: int, count: int, seed: int) -> float:
    return bare_rate([url], concurrency, judge_requests(engine, count, seed))


def time_runs(engine, latency: float, items: list[int]) -> None:
    from judge.runner import RunOptions, run_judge

    process, url = start_server(latency)
    try:
        rows = []
        last = None
        for seed, (concurrency, limit) in enumerate(zip(CONCURRENCY, items), start=1):
            last = RunOptions(
                base_url=url,
                model="judge-8b",
                judge=f"bench-{concurrency}",
                concurrency=concurrency,
                limit=limit,
                seed=seed,
                timeout=30,
            )
            started = time.perf_counter()
            summary = run_judge(engine, last)
            total = time.perf_counter() - started
            answered = summary["done"] - summary["cached"]
            rate = answered / summary["wall_seconds"]
            ideal = concurrency / latency
            overhead_ms = (summary["wall_seconds"] / answered - latency / concurrency) * 1000
            rows.append(
                (
                    concurrency,
                    answered,
                    summary["wall_seconds"],
                    total,
                    rate,
                    ideal,
                    overhead_ms,
                    summary["requests"],
                    summary["errors"],
                    bare_sdk_rate(engine, url, concurrency, limit, seed),
                )
            )
        print(f"judge run against the loopback endpoint, {latency * 1000:.0f} ms per answer:", flush=True)
        print(
            f"{'concurrency':>11} {'items':>6} {'run s':>7} {'with setup s':>12} {'items/s':>8} {'ideal':>7} "
            f"{'share':>6} {'overhead ms/item':>17} {'bare SDK items/s':>17} {'ours/bare':>9}"
        )
        for concurrency, answered, wall, total, rate, ideal, overhead, _requests, errors, bare in rows:
            print(
                f"{concurrency:>11} {answered:>6} {wall:>7.2f} {total:>12.2f} {rate:>8.1f} {ideal:>7.0f} "
                f"{rate / ideal:>6.0%} {overhead:>17.2f} {bare:>17.1f} {rate / bare:>9.2f}"
                + (f"  ({errors} errors)" if errors else "")
            )
        base = rows[0][4]
        print(
            "speed-up over one request at a time (the straightforward way): "
            + ", ".join(f"concurrency {row[0]}: {row[4] / base:.1f}×" for row in rows),
            flush=True,
        )
        started = time.perf_counter()
        again = run_judge(engine, last)
        print(
            f"re-run of the last run: {again['requests']} requests, {again['cached']:,} items from the cache in "
            f"{time.perf_counter() - started:.2f} s",
            flush=True,
        )
    finally:
        process.kill()
        process.wait()


def case_sample(engine, count: int, offset: int = 0) -> list[tuple[str, str]]:
    """(case id, user message) of `count` cases with distinct messages, from `offset` on (fewer when the
    database has fewer): cases asking the same are one request to generate, so the bare SDK sends each once too."""
    from analysis.loader import load_cases
    from analysis.prompt import user_message

    cases = load_cases(engine, text=True).iloc[offset:]
    distinct: dict[str, str] = {}
    for case_id, context, request in zip(cases["case_id"], cases["clinical_context"], cases["user_request"]):
        distinct.setdefault(user_message(context, request), case_id)
        if len(distinct) == count:
            break
    return [(case_id, message) for message, case_id in distinct.items()]


def endpoint_rates(engine, urls: list[str], concurrency: int, count: int, seed: int, folder: str) -> dict:
    """Items/s of judge and generate over `urls`, ours and the bare SDK's, on items not answered before."""
    from judge.generate import GenerateOptions, run_generate
    from judge.runner import RunOptions, run_judge

    judged = run_judge(
        engine,
        RunOptions(
            base_url=urls,
            model="judge-8b",
            judge=f"bench-ep{len(urls)}",
            concurrency=concurrency,
            limit=count,
            seed=seed,
            timeout=30,
        ),
    )
    cases = case_sample(engine, count)
    case_file = Path(folder) / f"cases-{len(urls)}.txt"
    case_file.write_text("".join(f"{case_id}\n" for case_id, _ in cases), encoding="utf-8")
    generated = run_generate(
        engine,
        GenerateOptions(
            base_url=urls,
            model="cand-7b",
            stored_as=f"bench-gen-{len(urls)}",
            cases=str(case_file),
            concurrency=concurrency,
            seed=seed,
            timeout=30,
        ),
    )
    generate_requests = [
        {
            "model": "cand-7b",
            "messages": [{"role": "user", "content": message}],
            "temperature": 0.0,
            "seed": seed,
            "max_tokens": 4096,
        }
        for _, message in cases
    ]
    return {
        "judge": _rate(judged),
        "judge_bare": bare_rate(urls, concurrency, judge_requests(engine, count, seed)),
        "generate": _rate(generated),
        "generate_bare": bare_rate(urls, concurrency, generate_requests),
        "judge_items": judged["done"] - judged["cached"],
        "generate_items": generated["done"] - generated["cached"],
        "errors": judged["errors"] + generated["errors"],
    }


def _rate(summary: dict) -> float:
    return (summary["done"] - summary["cached"]) / summary["wall_seconds"]


def time_endpoints(engine, latency: float, count: int, concurrency: int) -> None:
    servers = [start_server(latency) for _ in range(2)]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-judge-cases-") as folder:
            urls = [url for _, url in servers]
            rows = [(n, endpoint_rates(engine, urls[:n], concurrency, count, 1000 + n, folder)) for n in (1, 2)]
    finally:
        for process, _ in servers:
            process.kill()
            process.wait()
    print(
        f"one and two endpoints, {latency * 1000:.0f} ms per answer, concurrency {concurrency} per endpoint:",
        flush=True,
    )
    print(f"{'endpoints':>9} {'work':>9} {'items':>6} {'items/s':>8} {'bare SDK items/s':>17} {'ours/bare':>9}")
    for n, rates in rows:
        for work in ("judge", "generate"):
            ours, bare = rates[work], rates[f"{work}_bare"]
            print(f"{n:>9} {work:>9} {rates[f'{work}_items']:>6} {ours:>8.1f} {bare:>17.1f} {ours / bare:>9.2f}")
        if rates["errors"]:
            print(f"          ({rates['errors']} errors)")
    for work in ("judge", "generate"):
        print(
            f"{work}: two endpoints give {rows[1][1][work] / rows[0][1][work]:.2f}× one endpoint's items/s", flush=True
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2500)
    parser.add_argument("--models", type=int, default=11)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--latency", type=float, default=0.03)
    parser.add_argument("--items", default="150,800,2400", help="items per run at concurrency 1, 8, 32")
    parser.add_argument("--endpoint-items", type=int, default=1600, help="items per run of the endpoints section")
    parser.add_argument("--endpoint-concurrency", type=int, default=16, help="concurrency per endpoint there")
    parser.add_argument("--database", default=None, help="use this database (cases and responses loaded)")
    parser.add_argument("--runs-only", action="store_true", help="skip the full-scale item generation")
    args = parser.parse_args(argv)
    items = [int(value) for value in args.items.split(",")]

    from db.store.engine import make_engine

    with tempfile.TemporaryDirectory(prefix="bench-judge-db-") as folder:
        url = args.database or f"sqlite:///{folder}/judge.db"
        if not args.database:
            build_database(url, args.cases, args.models, args.seed)
        engine = make_engine(url)
        if not args.runs_only:
            time_items(engine)
        time_runs(engine, args.latency, items)
        time_endpoints(engine, args.latency, args.endpoint_items, args.endpoint_concurrency)
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
