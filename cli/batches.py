"""`clinconsensus judge batch export|import` and `generate batch export|import` (docs/REFERENCE.md §3.7, §3.8).

The same selection and request options as `judge run` and `generate`, without endpoints: the requests go
out in a file (`vllm run-batch`, Ray Data LLM, a hosted batch API) and their results come back by import.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from cli.acting import ACTOR_HELP, command_line_name


def _names(text: str | None) -> list[str]:
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def cmd_judge_export(args, engine_of: Callable, progress_of: Callable) -> int:
    from judge.batch import export_judge_batch
    from judge.runner import RunOptions

    options = RunOptions(
        base_url=[],
        model=args.model,
        judge=args.judge,
        template=args.template,
        responses=args.responses,
        models=_names(args.models),
        limit=args.limit,
        seed=args.seed,
        max_tokens=args.max_tokens,
        thinking=not args.no_thinking,
        structured=args.structured,
    )
    options.check_request()  # before the database is touched
    options.check_selection()
    exported = export_judge_batch(
        engine_of(), Path(args.dir), options, by=command_line_name(args), progress=progress_of("batch")
    )
    print(exported.line("judge"))
    return 0


def cmd_generate_export(args, engine_of: Callable, progress_of: Callable) -> int:
    from judge.batch import export_generate_batch
    from judge.generate import GenerateOptions

    options = GenerateOptions(
        base_url=[],
        model=args.model,
        stored_as=args.stored_as,
        cases=args.cases,
        system=args.system,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        seed=args.seed,
        thinking=not args.no_thinking,
    )
    options.check_request()  # before the database is touched
    options.check_name()
    options.system_text()
    exported = export_generate_batch(
        engine_of(), Path(args.dir), options, by=command_line_name(args), progress=progress_of("batch")
    )
    print(exported.line("generate"))
    return 0


def cmd_import(args, kind: str, engine_of: Callable, progress_of: Callable) -> int:
    from judge.batch import import_batch

    imported = import_batch(engine_of(), kind, Path(args.results), Path(args.batch), progress=progress_of("import"))
    if args.json:
        summary = {
            "run": imported.run,
            "lines": imported.lines,
            "new": imported.new,
            "new_decisions": imported.decisions,
            "parse_failures": imported.parse_failures,
            "errors": imported.errors,
            "already": imported.already,
            "stale": imported.stale,
        }
        print(json.dumps(summary, indent=2))
    else:
        print(f"{kind} batch run {imported.run}: {imported.said()}")
    return 0


def _request_arguments(q, max_tokens: int) -> None:
    q.add_argument("dir", metavar="DIR", help="a new folder for requests.jsonl and manifest.json")
    q.add_argument("--model", required=True, help="the model name the batch engine serves (the body's model)")
    q.add_argument("--seed", type=int, default=20260101)
    q.add_argument("--max-tokens", type=int, default=max_tokens)
    q.add_argument(
        "--no-thinking",
        action="store_true",
        help="Qwen3-family models: turn thinking off (chat_template_kwargs enable_thinking false)",
    )
    q.add_argument("--actor", default=None, help=ACTOR_HELP)


def _import_arguments(q) -> None:
    q.add_argument("results", metavar="RESULTS.jsonl", help="the batch output file (vllm run-batch, a batch API)")
    q.add_argument("--batch", required=True, metavar="DIR", help="the folder the batch export wrote")
    q.add_argument("--json", action="store_true", help="print the import's summary as JSON")


def add_judge_batch(judge_commands, engine_of: Callable, progress_of: Callable) -> None:
    """`judge batch export|import` on `judge`'s subcommands."""
    p = judge_commands.add_parser("batch", help="judge offline: requests as an OpenAI Batch JSONL file, results back")
    batch = p.add_subparsers(dest="batch_command", required=True)
    q = batch.add_parser("export", help="the requests a judge run would send, in DIR/requests.jsonl")
    _request_arguments(q, 512)
    q.add_argument("--judge", default=None, help="the judge's name for its decisions (default: the model)")
    q.add_argument("--template", default="official", help="official (default) | zh | a template FILE")
    q.add_argument("--responses", choices=["all", "missing"], default="all")
    q.add_argument("--models", default="", help="comma-separated models to grade (default: all)")
    q.add_argument("--limit", type=int, default=None, help="at most N items")
    q.add_argument("--structured", choices=["auto", "on", "off"], default=None)
    q.set_defaults(handler=lambda args: cmd_judge_export(args, engine_of, progress_of))
    q = batch.add_parser("import", help="a results file of a judge batch: decisions, parse failures, errors")
    _import_arguments(q)
    q.set_defaults(handler=lambda args: cmd_import(args, "judge", engine_of, progress_of))


def add_generate_batch(generate_commands, engine_of: Callable, progress_of: Callable) -> None:
    """`generate batch export|import` on `generate`'s subcommands."""
    p = generate_commands.add_parser("batch", help="generate offline: requests as an OpenAI Batch JSONL file")
    batch = p.add_subparsers(dest="batch_command", required=True)
    q = batch.add_parser("export", help="the requests a generate run would send, in DIR/requests.jsonl")
    _request_arguments(q, 4096)
    q.add_argument("--as", dest="stored_as", default=None, metavar="MODEL", help="the model name of the responses")
    q.add_argument("--cases", default="all", metavar="all|released|FILE")
    q.add_argument("--system", default=None, metavar="FILE", help="a system message sent before each case")
    q.add_argument("--temperature", type=float, default=0.0)
    q.set_defaults(handler=lambda args: cmd_generate_export(args, engine_of, progress_of))
    q = batch.add_parser("import", help="a results file of a generate batch: responses, truncated, empty, errors")
    _import_arguments(q)
    q.set_defaults(handler=lambda args: cmd_import(args, "generate", engine_of, progress_of))
