"""`clinconsensus judge run|resume|runs|cancel` and `generate` (docs/REFERENCE.md §3.7): runs against
OpenAI-compatible endpoints, one core for both (judge/core.py).

Options are checked before the database is touched where they can be (endpoints, API-key variable),
so a bad command line changes nothing; every refusal is one line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cli import batches
from cli.acting import ACTOR_HELP, command_line_name
from db.rules.errors import ValidationFailed
from db.rules.limits import InputRejected, refuse_invisible_text


def _names(text: str | None) -> list[str]:
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def _urls(values: list[str] | None) -> list[str]:
    """The endpoints given with --base-url (repeated), each free of invisible characters."""
    urls = [value.strip() for value in values or [] if value.strip()]
    for url in urls:
        try:
            refuse_invisible_text(url)
        except InputRejected as error:
            raise ValidationFailed(str(error).replace("value contains", "--base-url contains", 1)) from None
    return urls


def endpoint_options(args) -> dict[str, Any]:
    """The run options every command on endpoints reads from its command line (`_endpoint_arguments` and
    --max-tokens), as keyword arguments of its options class."""
    return {
        "base_url": _urls(args.base_url),
        "model": args.model,
        "api_key_env": args.api_key_env,
        "concurrency": args.concurrency,
        "seed": args.seed,
        "max_tokens": args.max_tokens,
        "thinking": not args.no_thinking,
        "timeout": args.timeout,
        "max_retries": args.max_retries,
    }


def print_run(summary: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, ensure_ascii=False, indent=2))
        return
    rate = summary["items_per_second"]
    what = {"generate": "generate run", "draft": "drafting run"}.get(summary["kind"], "judge run")
    urls = ", ".join(summary["base_urls"])
    print(
        f"{what} {summary['id']} ({summary['judge']}: {summary['model']} at {urls}): {summary['status']}\n"
        f"  items {summary['items']:,}, done {summary['done']:,} ({summary['cached']:,} from the cache), "
        + (
            f"truncated {summary['truncated']:,}, empty {summary['empty']:,} (not stored), "
            f"refused {summary['parse_failures']:,}, "
            if summary["kind"] == "generate"
            else f"parse failures {summary['parse_failures']:,}, "
        )
        + f"errors {summary['errors']:,}\n"
        f"  requests {summary['requests']:,}, retries {summary['retries']:,}, re-asks {summary['reasks']:,}, "
        f"tokens {summary['prompt_tokens']:,} in / {summary['completion_tokens']:,} out\n"
        f"  wall time {summary['wall_seconds']:.1f}s" + (f", {rate:.1f} items/s" if rate else "")
    )
    if len(summary["endpoints"]) > 1:
        for share in summary["endpoints"]:
            left = f", left out: {share['left_out']}" if share.get("left_out") else ""
            print(f"  {share['base_url']}: done {share['done']:,}, requests {share['requests']:,}{left}")
    if summary["message"]:
        print(f"  {summary['message']}")


def _run_finished(summary: dict) -> int:
    return 0 if summary["status"] == "finished" and not summary["errors"] else 1


def cmd_judge_run(args, engine_of: Callable, progress_of: Callable) -> int:
    from judge.runner import RunOptions, run_judge

    options = RunOptions(
        **endpoint_options(args),
        judge=args.judge,
        template=args.template,
        responses=args.responses,
        models=_names(args.models),
        limit=args.limit,
        structured=args.structured,
    )
    options.check()  # before the database is touched
    summary = run_judge(engine_of(), options, by=command_line_name(args), progress=progress_of("judge run"))
    print_run(summary, args.json)
    return _run_finished(summary)


def cmd_generate(args, engine_of: Callable, progress_of: Callable) -> int:
    from judge.generate import GenerateOptions, run_generate

    options = GenerateOptions(
        **endpoint_options(args),
        stored_as=args.stored_as,
        cases=args.cases,
        system=args.system,
        temperature=args.temperature,
    )
    options.check()  # before the database is touched
    options.system_text()
    summary = run_generate(engine_of(), options, by=command_line_name(args), progress=progress_of("generate"))
    print_run(summary, args.json)
    return _run_finished(summary)


def cmd_judge_resume(args, engine_of: Callable, progress_of: Callable) -> int:
    from judge import validate
    from judge.core import recorded_run
    from judge.runner import execute_run

    engine = engine_of()
    if recorded_run(engine, args.run_id)["kind"] == validate.KIND:
        summary = validate.execute_validation(engine, args.run_id, progress=progress_of(f"run {args.run_id}"))
        print_run(summary, args.json)
        return _run_finished(summary)
    summary = execute_run(engine, args.run_id, progress=progress_of(f"run {args.run_id}"))
    print_run(summary, args.json)
    return _run_finished(summary)


def cmd_judge_runs(args, engine_of: Callable) -> int:
    from db.store.engine import session_scope
    from db.work import judge_runs

    with session_scope(engine_of(), read_only=True) as session:
        runs = [judge_runs.run_summary(run) for run in judge_runs.list_runs(session, command_line_name())]
    if args.json:
        print(json.dumps(runs, ensure_ascii=False, indent=2))
        return 0
    if not runs:
        print("no judge runs yet")
    for summary in runs:
        rate = summary["items_per_second"]
        print(
            f"{summary['id']}\t{summary['kind']}\t{summary['status']}\t{summary['judge']}\t{summary['model']}\t"
            f"items {summary['items']}\tdone {summary['done']}\tparse failures {summary['parse_failures']}\t"
            f"errors {summary['errors']}\tretries {summary['retries']}\t"
            f"tokens {summary['prompt_tokens'] + summary['completion_tokens']}\t{summary['wall_seconds']:.1f}s\t"
            + (f"{rate:.1f} items/s" if rate else "-")
        )
    return 0


def cmd_judge_cancel(args, engine_of: Callable) -> int:
    from db.store.engine import session_scope
    from db.work import judge_runs

    with session_scope(engine_of()) as session:
        run = judge_runs.request_cancel(session, command_line_name(), args.run_id)
        print(f"run {run.id}: {judge_runs.shown_status(run)}, asked to stop")
    return 0


def _endpoint_arguments(q, model_required: bool = True) -> None:
    """The options every run against endpoints takes."""
    q.add_argument(
        "--base-url",
        action="append",
        default=None,
        metavar="URL",
        help="an endpoint, e.g. http://localhost:8000/v1 (vLLM); repeat to share the run among several",
    )
    q.add_argument("--model", required=model_required, help="the model name the endpoint serves")
    q.add_argument("--api-key-env", default=None, metavar="VAR", help="environment variable holding the API key")
    q.add_argument("--concurrency", type=int, default=8, help="items in flight at once per endpoint (default 8)")
    q.add_argument("--seed", type=int, default=20260101)
    q.add_argument(
        "--no-thinking",
        action="store_true",
        help="Qwen3-family servers: turn thinking off (chat_template_kwargs enable_thinking false)",
    )
    q.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    q.add_argument("--max-retries", type=int, default=2, help="SDK retries of 429/5xx answers per request")
    q.add_argument("--actor", default=None, help=ACTOR_HELP)
    q.add_argument("--json", action="store_true", help="print the run's summary as JSON")


def add_commands(sub, engine_of: Callable, progress_of: Callable) -> None:
    """`judge` and `generate` on the console script's parser; `engine_of` migrates and returns the engine."""
    p = sub.add_parser("judge", help="run an LLM judge behind OpenAI-compatible endpoints; list past runs")
    judge = p.add_subparsers(dest="judge_command", required=True)
    q = judge.add_parser("run", help="grade responses criterion by criterion; results become judge decisions")
    _endpoint_arguments(q)
    q.add_argument("--judge", default=None, help="the judge's name for its decisions (default: the model)")
    q.add_argument("--template", default="official", help="official (default) | zh | a template FILE")
    q.add_argument(
        "--responses",
        choices=["all", "missing"],
        default="all",
        help="all responses, or only decisions this judge lacks",
    )
    q.add_argument("--models", default="", help="comma-separated models to grade (default: all)")
    q.add_argument("--limit", type=int, default=None, help="grade at most N items (a trial run)")
    q.add_argument("--max-tokens", type=int, default=512)
    q.add_argument(
        "--structured",
        choices=["auto", "on", "off"],
        default=None,
        help="ask for structured JSON output (default: off with the official template, auto otherwise;"
        " auto: unless the server refuses it)",
    )
    q.set_defaults(handler=lambda args: cmd_judge_run(args, engine_of, progress_of))
    q = judge.add_parser("resume", help="continue a recorded run, judge or generate (answered items are not sent)")
    q.add_argument("run_id", type=int)
    q.add_argument("--json", action="store_true")
    q.set_defaults(handler=lambda args: cmd_judge_resume(args, engine_of, progress_of))
    q = judge.add_parser("runs", help="past runs: items, done, parse failures, retries, tokens, time")
    q.add_argument("--json", action="store_true")
    q.set_defaults(handler=lambda args: cmd_judge_runs(args, engine_of))
    q = judge.add_parser("cancel", help="ask a running run to stop")
    q.add_argument("run_id", type=int)
    q.set_defaults(handler=lambda args: cmd_judge_cancel(args, engine_of))
    batches.add_judge_batch(judge, engine_of, progress_of)

    q = sub.add_parser("generate", help="a candidate model's answers to the cases, stored as its responses")
    # `generate batch export|import` stand beside the online run, whose --model is then checked by the run.
    batches.add_generate_batch(q.add_subparsers(dest="generate_command"), engine_of, progress_of)
    _endpoint_arguments(q, model_required=False)
    q.add_argument(
        "--as", dest="stored_as", default=None, metavar="MODEL", help="the model name of the stored responses"
    )
    q.add_argument("--cases", default="all", metavar="all|released|FILE", help="FILE: case ids, one a line")
    q.add_argument("--system", default=None, metavar="FILE", help="a system message sent before each case")
    q.add_argument("--max-tokens", type=int, default=4096)
    q.add_argument("--temperature", type=float, default=0.0)
    q.set_defaults(handler=lambda args: cmd_generate(args, engine_of, progress_of))
