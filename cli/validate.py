"""`clinconsensus validate rubrics` (docs/REFERENCE.md §3.7, §4.2): a judge grades each case's anchor answers.

Options are checked before the database is touched where they can be; every refusal is one line. The
summary adds, per anchor, the items decided, unreadable (the judge's answer did not parse) and not
answered (no endpoint answered): neither of the last two is stored as met or not met.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from cli.acting import command_line_name
from cli.runs import _endpoint_arguments, _run_finished, endpoint_options, print_run


def print_anchors(summary: dict) -> None:
    for anchor, counts in summary.get("anchors", {}).items():
        print(
            f"  {anchor}: items {counts['items']:,}, decided {counts['decided']:,}, "
            f"unreadable {counts['unreadable']:,}, not answered {counts['not_answered']:,}"
        )


def cmd_validate_rubrics(args, engine_of: Callable, progress_of: Callable) -> int:
    from judge.validate import ValidateOptions, run_validation

    options = ValidateOptions(
        **endpoint_options(args),
        judge=args.judge,
        template=args.template,
        cases=args.cases,
        rubric=args.rubric,
        structured=args.structured,
    )
    options.check()  # before the database is touched
    summary = run_validation(engine_of(), options, by=command_line_name(args), progress=progress_of("validate rubrics"))
    if args.json:
        print(json.dumps(summary, ensure_ascii=False, indent=2))
    else:
        print_run(summary, False)
        print_anchors(summary)
    return _run_finished(summary)


def add_commands(sub, engine_of: Callable, progress_of: Callable) -> None:
    """`validate rubrics` on the console script's parser."""
    p = sub.add_parser("validate", help="rubric validation: a judge grades each case's anchor answers on its rubric")
    validate = p.add_subparsers(dest="validate_command", required=True)
    q = validate.add_parser(
        "rubrics", help="grade the reference, refusal and generic answers of each case on its rubric (§4.2)"
    )
    _endpoint_arguments(q)
    q.add_argument("--judge", required=True, help="the judge's name recorded with the anchor decisions")
    q.add_argument("--cases", default="all", metavar="all|FILE", help="FILE: case ids, one a line")
    q.add_argument(
        "--rubric",
        choices=["current", "submitted"],
        default="current",
        help="the current approved version (default) or the version waiting for audit",
    )
    q.add_argument("--template", default="official", help="official (default) | zh | a template FILE")
    q.add_argument("--max-tokens", type=int, default=512)
    q.add_argument(
        "--structured",
        choices=["auto", "on", "off"],
        default=None,
        help="ask for structured JSON output (default: off with the official template, auto otherwise)",
    )
    q.set_defaults(handler=lambda args: cmd_validate_rubrics(args, engine_of, progress_of))
