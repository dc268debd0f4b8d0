"""`clinconsensus assign calibration|disagreements` and `leaderboard freeze|list|show|diff` (docs/REFERENCE.md §3.7).

The rules (once per model, unique snapshot names, admin only, audit entries) live in `db.work.calibration`,
`db.work.disagreements` and `db.work.leaderboard`;
the payload of a snapshot and the comparison of two are `analysis.leaderboard`.
The command line acts as the system actor `@cli` (`cli.acting`), as the other commands do.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from cli.acting import ACTOR_HELP, command_line
from db.rules.errors import ValidationFailed


def cmd_assign(args, engine_of: Callable) -> int:
    from db.store.engine import session_scope
    from db.work.calibration import DEFAULT_SAMPLE_SIZE, draw_calibration_sample
    from db.work.disagreements import DEFAULT_DRAW_SIZE, draw_disagreements

    # Checked before the engine: a bad command line changes nothing, not even the schema.
    if args.kind == "calibration" and (args.model is None or args.judges is not None):
        raise ValidationFailed("assign calibration: give --model NAME (and no --judges)")
    if args.kind == "disagreements" and (args.judges is None or args.model is not None):
        raise ValidationFailed("assign disagreements: give --judges A,B (and no --model)")
    with session_scope(engine_of()) as session:
        actor = command_line(args)
        if args.kind == "calibration":
            n = DEFAULT_SAMPLE_SIZE if args.n is None else args.n
            lines = draw_calibration_sample(session, actor=actor, model=args.model, n=n, seed=args.seed).lines()
        else:
            n = DEFAULT_DRAW_SIZE if args.n is None else args.n
            lines = draw_disagreements(session, actor=actor, judges=args.judges.split(","), n=n).lines()
    for line in lines:
        print(line)
    return 0


def cmd_leaderboard(args, engine_of: Callable) -> int:
    from analysis import leaderboard
    from cli import basis
    from db.store.engine import session_scope
    from db.work import leaderboard as store

    # Checked before the engine: a bad option changes nothing, not even the schema.
    gold, minimum = (basis.gold_basis(args), basis.min_responses(args)) if args.action == "freeze" else (None, None)
    engine = engine_of()
    if args.action == "freeze":
        with session_scope(engine, read_only=True) as session:
            name = store.require_new_name(session, _one(args.names, "freeze NAME"))
        payload = leaderboard.build_payload(engine, k=args.k, gold_basis=str(gold), min_responses=int(minimum or 1))
        with session_scope(engine) as session:
            store.freeze_snapshot(session, actor=command_line(args), name=name, payload=payload)
        ranked = sum(1 for row in payload["models"] if row["ranked"])
        print(
            f"froze leaderboard {name} ({len(payload['models'])} models, {ranked} ranked; "
            f"{leaderboard.basis_text(payload)})"
        )
        return 0
    actor = command_line(args)
    problems: list = []
    with session_scope(engine, read_only=True) as session:
        if args.action == "list":
            snapshots, problems = store.list_snapshots(session, actor=actor)
            rows = [leaderboard.listing(row) for row in snapshots]
        elif args.action == "show":
            found = store.get_snapshot(session, _one(args.names, "show NAME"), actor=actor)
            shown = leaderboard.snapshot_dict(found)
        else:
            if len(args.names) != 2:
                raise ValidationFailed("leaderboard diff: give two snapshot names, A B")
            before, after = (
                leaderboard.snapshot_dict(store.get_snapshot(session, name, actor=actor)) for name in args.names
            )
    if args.action == "list":
        _print_listing(rows, args.json)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    elif args.action == "show":
        print(json.dumps(shown, ensure_ascii=False, indent=2) if args.json else leaderboard.show_text(shown))
    else:
        changes = leaderboard.diff(before, after)
        print(json.dumps(changes, ensure_ascii=False, indent=2) if args.json else leaderboard.diff_text(changes))
    return 0


def _print_listing(rows: list[dict], as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    if not rows:
        print("no leaderboard snapshots yet")
    for row in rows:
        print(f"{row['name']}\t{row['created_at']}\t{row['created_by']}\t{row['n_models']} models")


def export_newest(engine, directory):
    """`export leaderboard DIR`: the newest snapshot as JSON and a static HTML page."""
    from analysis import leaderboard
    from analysis.exports.manifest import export_head
    from db.store.engine import session_scope
    from db.work import leaderboard as store

    head = export_head(engine)
    with session_scope(engine, read_only=True) as session:
        newest = leaderboard.snapshot_dict(store.newest_snapshot(session, actor=command_line()))
    return leaderboard.export_leaderboard(newest, directory, head=head)


def _one(names: list[str], usage: str) -> str:
    if len(names) != 1:
        raise ValidationFailed(f"leaderboard {usage}: give one snapshot name")
    return names[0]


def add_commands(sub, engine_of: Callable) -> None:
    """The subcommands of this module, on the console script's parser; `engine_of` migrates and returns the engine."""
    p = sub.add_parser(
        "assign",
        help="calibration: a model's calibration sample; disagreements: responses where two judges differ most;"
        " each assigned to both groups",
    )
    p.add_argument("kind", choices=["calibration", "disagreements"])
    p.add_argument("--model", default=None, help="calibration: the model whose responses are sampled")
    p.add_argument("--judges", default=None, metavar="A,B", help="disagreements: the two judges compared")
    p.add_argument("--n", type=int, default=None, help="responses drawn (default: calibration 60, disagreements 100)")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="calibration: seed of the draw, for replays and tests (default: the server draws one; audited either way)",
    )
    p.add_argument("--actor", default=None, help=ACTOR_HELP)
    p.set_defaults(handler=lambda args: cmd_assign(args, engine_of))

    p = sub.add_parser("leaderboard", help="dated leaderboard snapshots: freeze NAME | list | show NAME | diff A B")
    p.add_argument("action", choices=["freeze", "list", "show", "diff"])
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("--k", type=int, default=10, help="freeze: the CACS threshold")
    p.add_argument("--json", action="store_true", help="list, show, diff: print JSON")
    p.add_argument("--actor", default=None, help=ACTOR_HELP)
    from cli import basis

    basis.add_gold_option(p)
    basis.add_min_responses_option(p)
    p.set_defaults(handler=lambda args: cmd_leaderboard(args, engine_of))
