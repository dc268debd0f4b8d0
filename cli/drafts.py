"""`clinconsensus draft rubrics` (docs/REFERENCE.md §3.7, §4.3): LLM-drafted criteria for cases' authors.

Options are checked before the database is touched where they can be (endpoints, API-key variable,
template), so a bad command line changes nothing; every refusal is one line. Nothing is submitted:
each draft waits on the authoring page of the case's assigned author.
"""

from __future__ import annotations

from collections.abc import Callable

from cli.acting import command_line_name
from cli.runs import _endpoint_arguments, _run_finished, endpoint_options, print_run


def cmd_draft_rubrics(args, engine_of: Callable, progress_of: Callable) -> int:
    from judge.draft import DraftOptions, dropped_totals, read_draft_template, run_draft

    options = DraftOptions(
        **endpoint_options(args),
        generator=args.generator,
        cases=args.cases,
        template=args.template,
        temperature=args.temperature,
    )
    options.check()  # before the database is touched
    read_draft_template(options.template)
    summary = run_draft(engine_of(), options, by=command_line_name(args), progress=progress_of("draft rubrics"))
    print_run(summary, args.json)
    if not args.json:
        totals = dropped_totals(engine_of(), summary["id"])
        print(
            f"  drafts {totals.pop('drafts'):,} (fewer than {options.n} criteria: {totals.pop('short'):,}); "
            + ", ".join(f"{reason.replace('_', ' ')} {count:,}" for reason, count in sorted(totals.items()))
            + "; nothing submitted: each draft waits for the case's author"
        )
    return _run_finished(summary)


def add_commands(sub, engine_of: Callable, progress_of: Callable) -> None:
    """`draft rubrics` on the console script's parser."""
    p = sub.add_parser("draft", help="LLM-drafted criteria for cases' authors (never submitted)")
    draft = p.add_subparsers(dest="draft_command", required=True)
    q = draft.add_parser("rubrics", help="draft N criteria per case through OpenAI-compatible endpoints")
    _endpoint_arguments(q)
    q.add_argument(
        "--as", dest="generator", default=None, metavar="GENERATOR", help="the drafts' generator name (default: model)"
    )
    q.add_argument(
        "--cases",
        default="missing",
        metavar="missing|all|FILE",
        help="missing: cases nobody has a rubric version of (default); all; FILE: case ids, one a line",
    )
    q.add_argument("--template", default=None, metavar="FILE", help="the prompt template (default: the shipped one)")
    q.add_argument("--max-tokens", type=int, default=4096)
    q.add_argument("--temperature", type=float, default=0.0)
    q.set_defaults(handler=lambda args: cmd_draft_rubrics(args, engine_of, progress_of))
