"""`clinconsensus`: everything an admin or a pipeline does without a browser (DESIGN §3.7).

Every command first brings the database (`DATABASE_URL`) up to the current schema, and exits
non-zero with a one-line reason on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from db.errors import ClinConsensusError

ENTRY_FILE = Path(__file__).resolve().parent.parent / "streamlit_app.py"


class CommandFailed(Exception):
    """A reason for the user; printed on one line, exit status 1."""


def _engine():
    from db.engine import get_engine
    from db.migrate import upgrade

    engine = get_engine()
    upgrade(engine)
    return engine


def _progress(label: str):
    """A progress printer for long work, on stderr so stdout stays clean for --json."""
    from db.progress import TerminalProgress

    return TerminalProgress(label, stream=sys.stderr)


# Commands ---------------------------------------------------------------------------------


def cmd_import(args) -> int:
    from db.importers import ImportFailed, import_file

    engine = _engine()
    try:
        summary = import_file(
            engine,
            args.kind,
            Path(args.file),
            fmt=args.format,
            actor=args.actor,
            judge=args.judge,
            progress=_progress(f"import {args.kind}"),
        )
    except ImportFailed as failure:
        for line in failure.errors[1:]:
            print(line, file=sys.stderr)
        raise CommandFailed(failure.errors[0]) from None
    for line in summary.lines():
        print(line)
    return 0


def cmd_status(args) -> int:
    from db.engine import session_scope
    from db.status import counts

    with session_scope(_engine(), read_only=True) as session:
        result = counts(session)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


def cmd_users(args) -> int:
    from db import users
    from db.engine import session_scope

    engine = _engine()
    with session_scope(engine) as session:
        if args.action == "add":
            password = _read_password(args)
            group = int(args.group) if args.group else None
            users.add_user(session, username=args.name, role=args.role, group_no=group, password=password, actor="cli")
            print(f"added {args.name} ({args.role}{f', group {group}' if group else ''})")
        elif args.action == "deactivate":
            users.set_active(session, username=args.name, active=False, actor="cli")
            print(f"deactivated {args.name}")
        elif args.action == "activate":
            users.set_active(session, username=args.name, active=True, actor="cli")
            print(f"activated {args.name}")
        elif args.action == "reset-password":
            users.reset_password(session, username=args.name, password=_read_password(args), actor="cli")
            print(f"password reset for {args.name}")
        elif args.action == "list":
            for user in users.list_users(session):
                state = "active" if user.is_active else "inactive"
                print(f"{user.username}\t{user.role}\t{user.group_no or '-'}\t{state}")
    return 0


def _read_password(args) -> str:
    if not args.password_stdin:
        raise CommandFailed("give the password on standard input with --password-stdin")
    password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise CommandFailed("no password on standard input")
    return password


def cmd_report(args) -> int:
    from analysis.report import run_report

    run_report(
        _engine(),
        k=args.k,
        source=args.source,
        json_path=args.json,
        out_dir=args.out,
        stream=sys.stdout,
        progress=_progress("report"),
    )
    return 0


def cmd_export(args) -> int:
    from analysis import exports

    engine = _engine()
    progress = _progress(f"export {args.what}")
    if args.what == "gold":
        summary = exports.export_gold(engine, Path(args.target), progress=progress)
    elif args.what == "release":
        summary = exports.export_release(engine, Path(args.target), progress=progress)
    elif args.what == "judgements":
        summary = exports.export_judgements(engine, Path(args.target), source=args.source, progress=progress)
    elif args.what == "judge-items":
        summary = exports.export_judge_items(engine, Path(args.target), progress=progress)
    else:
        holdout = [m for m in (args.holdout_models or "").split(",") if m]
        summary = exports.export_sft(
            engine,
            Path(args.target),
            seed=args.seed,
            holdout_models=holdout,
            fmt=args.format,
            dev_fraction=args.dev_fraction,
            template_path=Path(args.template) if args.template else None,
            progress=progress,
        )
    print(summary)
    return 0


def cmd_demo(args) -> int:
    from demo.generator import build_demo

    result = build_demo(_engine(), scale=args.scale, seed=args.seed, progress=_progress(f"demo {args.scale}"))
    for line in result.lines():
        print(line)
    return 0


def cmd_audit(args) -> int:
    from db.audit import verify_chain
    from db.engine import session_scope

    with session_scope(_engine(), read_only=True) as session:
        report = verify_chain(session)
    if not report.ok:
        raise CommandFailed(f"audit chain broken at entry {report.first_bad_id}: {report.reason}")
    print(f"audit chain verified: {report.entries} entries")
    return 0


def cmd_migrate(args) -> int:
    _engine()
    print("database is at the current schema")
    return 0


def cmd_serve(args) -> int:
    from db.config import database_url

    _engine()
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(ENTRY_FILE),
        "--server.port",
        str(args.port),
        "--server.address",
        args.address,
    ]
    # Streamlit reads .streamlit/config.toml from its working directory: run it from the project's
    # root, with the database this command just migrated (a relative default would move with it).
    env = {**os.environ, "DATABASE_URL": database_url()}
    return subprocess.call(command, env=env, cwd=ENTRY_FILE.parent)


# Parser -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clinconsensus", description="ClinConsensus Studio command line")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("import", help="import cases, responses, labels or judge decisions (JSONL)")
    p.add_argument("kind", choices=["cases", "responses", "labels", "judge"])
    p.add_argument("file")
    p.add_argument(
        "--format",
        default=None,
        help="judge files: decisions | local-judge | official (default: recognised from the file)",
    )
    p.add_argument(
        "--judge", default=None, metavar="NAME", help="judge files: the judge's name where the file does not give it"
    )
    p.add_argument("--actor", default="cli", help="name recorded in the audit log")
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser("status", help="row counts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("users", help="manage accounts")
    p.add_argument("action", choices=["add", "deactivate", "activate", "reset-password", "list"])
    p.add_argument("name", nargs="?")
    p.add_argument("--role", choices=["admin", "annotator", "checker"])
    p.add_argument("--group", choices=["1", "2"])
    p.add_argument("--password-stdin", action="store_true")
    p.set_defaults(handler=cmd_users)

    p = sub.add_parser("report", help="compute every figure; print tables, write report.json")
    p.add_argument("--json", default=None, metavar="FILE")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--source", default="gold", help="gold | group1 | group2 | judge:NAME")
    p.add_argument("--out", default=None, metavar="DIR", help="also write CSV tables and report.html here")
    p.set_defaults(handler=cmd_report)

    p = sub.add_parser("export", help="gold | release | judgements | judge-items | sft")
    p.add_argument("what", choices=["gold", "release", "judgements", "judge-items", "sft"])
    p.add_argument("target", metavar="FILE_OR_DIR")
    p.add_argument("--source", default="gold", help="judgements: gold | group1 | group2 | judge:NAME")
    p.add_argument("--seed", type=int, default=20260101, help="sft: split seed")
    p.add_argument("--holdout-models", default="", help="sft: comma-separated models kept for heldout.jsonl")
    p.add_argument("--format", default="instruction", choices=["instruction", "messages"], help="sft row format")
    p.add_argument("--dev-fraction", type=float, default=0.1, help="sft: share of cases in dev")
    p.add_argument("--template", default=None, help="sft: judge prompt template file")
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("demo", help="synthetic data: small for trying the app, full for benchmarks")
    p.add_argument("--scale", choices=["small", "full"], default="small")
    p.add_argument("--seed", type=int, default=7)
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("audit", help="verify the audit log's hash chain")
    p.add_argument("action", choices=["verify"])
    p.set_defaults(handler=cmd_audit)

    p = sub.add_parser("migrate", help="bring the database to the current schema")
    p.set_defaults(handler=cmd_migrate)

    p = sub.add_parser("serve", help="the browser app")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--address", default="localhost")
    p.set_defaults(handler=cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "users" and args.action != "list" and not args.name:
        parser.error("users: a NAME is required")
    if args.command == "users" and args.action == "add" and not args.role:
        parser.error("users add: --role is required")
    try:
        return args.handler(args)
    except (CommandFailed, ClinConsensusError) as error:
        print(f"clinconsensus: {error}", file=sys.stderr)
        return 1
    except FileNotFoundError as error:
        print(f"clinconsensus: no such file: {error.filename}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
