"""`clinconsensus`: everything an admin or a pipeline does without a browser (docs/REFERENCE.md §3.7).

Every command first brings the database (`DATABASE_URL`) up to the current schema, and exits
non-zero with a one-line reason on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cli.acting import ACTOR_HELP, command_line_name
from db.rules.errors import ClinConsensusError

ENTRY_FILE = Path(__file__).resolve().parent.parent / "streamlit_app.py"


class CommandFailed(Exception):
    """A reason for the user; printed on one line, exit status 1."""


def _engine():
    from db.migrations.upgrade import upgrade
    from db.store.engine import get_engine

    engine = get_engine()
    upgrade(engine)
    return engine


def _progress(label: str):
    """A progress printer for long work, on stderr so stdout stays clean for --json."""
    from db.rules.progress_report import TerminalProgress

    return TerminalProgress(label, stream=sys.stderr)


# Commands ---------------------------------------------------------------------------------


def cmd_import(args) -> int:
    from db import labels
    from db.importers import ImportFailed, import_file

    engine = _engine()
    actor, progress = command_line_name(args), _progress(f"import {args.kind}")
    try:
        if args.kind == "labels":  # through the label room, whose writer writes every label row
            summary = labels.import_rows(
                engine, Path(args.file), actor=actor, progress=progress, override_freeze=args.override_freeze
            )
        else:
            summary = import_file(
                engine,
                args.kind,
                Path(args.file),
                fmt=args.format,
                actor=actor,
                judge=args.judge,
                progress=progress,
                override_freeze=args.override_freeze,
            )
    except ImportFailed as failure:
        for line in failure.errors[1:]:
            print(line, file=sys.stderr)
        raise CommandFailed(failure.errors[0]) from None
    for line in summary.lines():
        print(line)
    return 0


def cmd_status(args) -> int:
    from db.store.engine import session_scope
    from db.work.status import counts

    with session_scope(_engine(), read_only=True) as session:
        result = counts(session)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


def cmd_users(args) -> int:
    from db.access import users
    from db.store.engine import session_scope

    engine = _engine()
    with session_scope(engine) as session:
        if args.action == "add":
            password = _read_password(args)
            group = int(args.group) if args.group else None
            users.add_user(
                session, username=args.name, role=args.role, group_no=group, password=password, actor=users.CLI_ACTOR
            )
            print(f"added {args.name} ({args.role}{f', group {group}' if group else ''})")
        elif args.action == "deactivate":
            users.set_active(session, username=args.name, active=False, actor=users.CLI_ACTOR)
            print(f"deactivated {args.name}")
        elif args.action == "activate":
            users.set_active(session, username=args.name, active=True, actor=users.CLI_ACTOR)
            print(f"activated {args.name}")
        elif args.action == "reset-password":
            users.reset_password(session, username=args.name, password=_read_password(args), actor=users.CLI_ACTOR)
            print(f"password reset for {args.name}")
        elif args.action == "link":
            users.link_identity(session, username=args.name, identity=args.identity, actor=users.CLI_ACTOR)
            print(f"{args.name} linked to {args.identity}" if args.identity else f"{args.name} unlinked")
        elif args.action == "unlock":
            was_locked = users.unlock(session, username=args.name, actor=users.CLI_ACTOR)
            print(f"login lock of {args.name} lifted" if was_locked else f"{args.name} was not locked")
        elif args.action == "list":
            for user in users.list_users(session, actor=users.CLI_ACTOR):
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
    from cli import basis

    # Checked before the engine: a bad option changes nothing, not even the schema.
    gold, minimum = basis.gold_basis(args), basis.min_responses(args)
    engine, progress = _engine(), _progress("report")
    options = {
        "k": args.k,
        "source": args.source,
        "judge_scored": args.judge_scored,
        "heldout_models": _names(args.heldout_models) or None,
        "gold_basis": gold,
        "min_responses": minimum,
    }

    def run(stream) -> None:
        # Imported only when computing: a report kept for an unchanged database needs none of it.
        from analysis.report import run_report

        run_report(
            engine,
            **options,
            json_path=args.json,
            out_dir=args.out,
            figures=args.figures,
            lang=args.lang,
            stream=stream,
            progress=progress,
        )

    if args.out or args.figures:
        run(sys.stdout)
        return 0
    from analysis.report_cache import kept_or_run
    from db.store.data_version import data_version

    version = data_version(engine)
    kept_or_run(
        engine, run, version=version, options=options, json_path=args.json, stream=sys.stdout, progress=progress
    )
    return 0


#: Exports that write one file; the others write a folder.
_FILE_EXPORTS = ("gold", "judge-items", "healthbench-meta")


def cmd_export(args) -> int:
    from cli import basis as gold_basis
    from cli.export_dispatch import run_export

    # Checked before anything else: a bad option changes nothing, not even the schema.
    basis = gold_basis.gold_basis(args)
    from analysis.exports.paths import output_dir, output_file

    # A target that cannot be written is said before the database is read (and again as each file is written).
    if args.what in _FILE_EXPORTS:
        output_file(args.target)
    else:
        output_dir(args.target, create=False)
    engine = _engine()
    summary = run_export(args, engine, basis, _progress(f"export {args.what}"), models=_names(args.models))
    print(summary)
    return 0


def _names(text: str | None) -> list[str]:
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def cmd_demo(args) -> int:
    from demo.generator import build_demo

    result = build_demo(
        _engine(), scale=args.scale, seed=args.seed, n_cases=args.cases, progress=_progress(f"demo {args.scale}")
    )
    for line in result.lines():
        print(line)
    return 0


def cmd_audit(args) -> int:
    from analysis.exports.paths import input_file
    from db.access.audit_replay import anchor_from_manifest, verify_audit
    from db.rules.limits import InputRejected, loads
    from db.store.engine import session_scope

    anchor = None
    if args.anchor:
        path = input_file(args.anchor)
        try:
            anchor = anchor_from_manifest(loads(path.read_text(encoding="utf-8")))
        except (ValueError, InputRejected, OSError) as error:
            raise CommandFailed(f"{path}: {error.strerror if isinstance(error, OSError) else error}") from None
    engine = _engine()
    with session_scope(engine, read_only=True) as session:
        result = verify_audit(session, anchor=anchor)
    if not result.ok:
        for line in result.problems:
            print(line, file=sys.stderr)
        raise CommandFailed(f"audit verify failed: {len(result.problems)} problem(s); first: {result.problems[0]}")
    replayed = result.replay
    print(
        f"audit verified: {result.entries} entries, chain keyed and intact; replay matches "
        f"{replayed.labels} labels, {replayed.rubric_versions} rubric versions, {replayed.assignments} assignments, "
        f"{replayed.counts.get('users', 0)} users, {replayed.counts.get('sessions', 0)} sessions, "
        f"{replayed.counts.get('texts', 0)} case and response texts, "
        f"{replayed.counts.get('judge_decisions', 0)} judge decisions, "
        f"{replayed.counts.get('feedback_rounds', 0)} feedback rounds, "
        f"{replayed.counts.get('adjudication_openings', 0)} adjudication openings, "
        f"{replayed.counts.get('calibration_samples', 0)} calibration sample rows, "
        f"{replayed.counts.get('disagreement_draws', 0)} disagreement draws, "
        f"{replayed.counts.get('leaderboard_snapshots', 0)} leaderboard snapshots, "
        f"{replayed.counts.get('reference_answers', 0)} reference answers; head sealed"
        + (f"; anchor of {args.anchor} present" if anchor else "")
    )
    return 0


def cmd_backup(args) -> int:
    from db.store.backup import backup

    print(backup(_engine(), Path(args.file)))
    return 0


def cmd_migrate(args) -> int:
    _engine()
    print("database is at the current schema")
    return 0


def cmd_serve(args) -> int:
    from db.access.audit_key import KEY_FILE_ENV, audit_key_file
    from db.rules.config import database_url
    from db.store.engine import get_engine

    _engine()
    # ui.process runs Streamlit's own command with the upload gate installed before the first connection.
    command = [
        sys.executable,
        "-m",
        "ui.process",
        "run",
        str(ENTRY_FILE),
        "--server.port",
        str(args.port),
        "--server.address",
        args.address,
    ]
    # Streamlit reads .streamlit/config.toml from its working directory: run it from the project's
    # root, with the database this command just migrated and the audit key file it would use (a
    # relative default would move with the working directory).
    env = {**os.environ, "DATABASE_URL": database_url(), KEY_FILE_ENV: str(audit_key_file())}
    get_engine().dispose()
    os.chdir(ENTRY_FILE.parent)
    sys.stdout.flush()
    sys.stderr.flush()
    # Replace this process with Streamlit: a SIGTERM to the pid the caller holds stops the server itself.
    os.execve(sys.executable, command, env)


# Parser -----------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse turns the error into one line)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, found {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, found {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The console script's parser: one subcommand each, handlers set as `handler`."""
    parser = argparse.ArgumentParser(prog="clinconsensus", description="ClinConsensus Studio command line")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_import(sub)
    _add_status_and_users(sub)
    _add_report(sub)
    _add_export(sub)
    _add_demo(sub)
    _add_upkeep(sub)

    from cli import drafts, plans, runs, scores, validate

    runs.add_commands(sub, _engine, _progress)
    scores.add_commands(sub, _engine)
    plans.add_commands(sub, _engine)
    validate.add_commands(sub, _engine, _progress)
    drafts.add_commands(sub, _engine, _progress)
    return parser


def _add_import(sub: argparse._SubParsersAction) -> None:
    """`import KIND FILE`."""
    p = sub.add_parser("import", help="import cases, responses, labels or judge decisions (JSONL)")
    p.add_argument("kind", choices=["cases", "responses", "labels", "judge", "references"])
    p.add_argument("file")
    p.add_argument(
        "--format",
        default=None,
        help="judge files: decisions | local-judge | official (default: recognised from the file)",
    )
    p.add_argument(
        "--judge", default=None, metavar="NAME", help="judge files: the judge's name where the file does not give it"
    )
    p.add_argument("--actor", default=None, help=ACTOR_HELP)
    p.add_argument(
        "--override-freeze",
        action="store_true",
        help="labels: change annotation labels made final by an opened feedback round (audited)",
    )
    p.set_defaults(handler=cmd_import)


def _add_status_and_users(sub: argparse._SubParsersAction) -> None:
    """`status` (row counts) and `users ACTION [NAME]` (accounts)."""
    p = sub.add_parser("status", help="row counts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("users", help="manage accounts")
    p.add_argument("action", choices=["add", "deactivate", "activate", "reset-password", "unlock", "link", "list"])
    p.add_argument("name", nargs="?")
    p.add_argument("--role", choices=["admin", "annotator", "checker"])
    p.add_argument("--group", choices=["1", "2"])
    p.add_argument("--password-stdin", action="store_true")
    p.add_argument(
        "--identity",
        default=None,
        metavar="'ISSUER SUBJECT'",
        help="users link: the identity-provider account (issuer URL and subject); empty to unlink",
    )
    p.set_defaults(handler=cmd_users)


def _add_report(sub: argparse._SubParsersAction) -> None:
    """`report`: report.json, the printed tables, CSV, HTML and figures."""
    p = sub.add_parser("report", help="compute every figure; print tables, write report.json")
    p.add_argument("--json", default=None, metavar="FILE")
    p.add_argument(
        "--judge-scored",
        default=None,
        metavar="NAME",
        help="score models the source does not score (e.g. a new model with responses only) by this judge, marked",
    )
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--source", default="gold", help="gold | group1 | group2 | judge:NAME")
    p.add_argument("--out", default=None, metavar="DIR", help="also write CSV tables and report.html here")
    p.add_argument("--figures", action="store_true", help="also write every figure as PNG and SVG to DIR/figures")
    p.add_argument("--lang", choices=["zh", "en"], default="zh", help="language of report.html and the figures")
    p.add_argument(
        "--heldout-models", default="", metavar="A,B", help="judge figures over these models' responses only"
    )
    from cli import basis

    basis.add_gold_option(p)
    basis.add_min_responses_option(p)
    p.set_defaults(handler=cmd_report)


def _add_export(sub: argparse._SubParsersAction) -> None:
    """`export WHAT FILE_OR_DIR`, with the options of each export."""
    p = sub.add_parser(
        "export", help="gold | release | judgements | judge-items | sft | healthbench-meta | leaderboard"
    )
    p.add_argument(
        "what", choices=["gold", "release", "judgements", "judge-items", "sft", "healthbench-meta", "leaderboard"]
    )
    p.add_argument("target", metavar="FILE_OR_DIR")
    p.add_argument("--source", default="gold", help="judgements: gold | group1 | group2 | judge:NAME")
    p.add_argument("--seed", type=int, default=20260101, help="sft: split seed")
    p.add_argument("--holdout-models", default="", help="sft: comma-separated models kept for heldout.jsonl")
    p.add_argument("--format", default="instruction", choices=["instruction", "messages"], help="sft row format")
    p.add_argument("--dev-fraction", type=float, default=0.1, help="sft: share of cases in dev")
    p.add_argument("--template", default=None, help="sft: official (default) | zh | a template FILE")
    p.add_argument(
        "--include-calibration",
        action="store_true",
        help="sft: keep calibration-sample responses (left out by default)",
    )
    p.add_argument("--only-disagreements", action="store_true", help="sft: only responses of assign disagreements")
    p.add_argument(
        "--difficulty",
        action="append",
        choices=["low", "medium", "high"],
        help="release: only cases of this tier (repeatable; the public tier is low)",
    )
    p.add_argument("--models", default="", help="judgements: comma-separated models (default: every scored model)")
    p.add_argument("--k", type=int, default=10, help="judgements: the threshold of scores.json")
    p.add_argument("--per-model", action="store_true", help="judgements: DIR/<model>/ per model, its complete cases")
    from cli import basis

    basis.add_gold_option(p)
    p.set_defaults(handler=cmd_export)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    """`demo`: the synthetic data set into an empty database."""
    p = sub.add_parser("demo", help="synthetic data: small for trying the app, full for benchmarks")
    p.add_argument("--scale", choices=["small", "full"], default="small")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--cases",
        type=_positive_int,
        default=None,
        help="number of cases (default: the scale's, full: 2,500); a team of eight physicians comes with every "
        "2,500 cases (anno1a-t2 to check2-t2 from case 2,501 on), so nobody's queue grows with the data",
    )
    p.set_defaults(handler=cmd_demo)


def _add_upkeep(sub: argparse._SubParsersAction) -> None:
    """Keeping the database and serving it: `audit verify`, `backup FILE`, `migrate`, `serve`."""
    p = sub.add_parser("audit", help="verify the audit log: keyed chain, replay against the tables, anchors")
    p.add_argument("action", choices=["verify"])
    p.add_argument("--anchor", default=None, metavar="MANIFEST", help="an export's manifest.json: detect a rollback")
    p.set_defaults(handler=cmd_audit)

    p = sub.add_parser("backup", help="a consistent copy of the database while the app runs")
    p.add_argument("file", help="SQLite: a database file; PostgreSQL: a pg_dump archive (pg_restore)")
    p.set_defaults(handler=cmd_backup)

    p = sub.add_parser("migrate", help="bring the database to the current schema")
    p.set_defaults(handler=cmd_migrate)

    p = sub.add_parser("serve", help="the browser app")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--address", default="localhost")
    p.set_defaults(handler=cmd_serve)


#: Options whose value is stored as a name (the audit log's actor, a judge's name), with the limit of each.
_NAME_OPTIONS = {"actor": "username", "judge": "judge"}


def _check_options(args: argparse.Namespace) -> None:
    """Every text option: no NUL or undecodable byte; names within their length, without invisible characters.

    Checked here, before any database sees them, so SQLite and PostgreSQL refuse them alike."""
    from db.rules.limits import InputRejected, refuse_invisible_text

    for name, value in vars(args).items():
        if not isinstance(value, str):
            continue
        option = "--" + name.replace("_", "-") if name not in _POSITIONALS else name.upper()
        try:
            refuse_invisible_text(value)
            if name in _NAME_OPTIONS:
                # Imported only here: the record schemas cost a tenth of a second every command would pay.
                from db.rules.records import check_name

                check_name(option, value, _NAME_OPTIONS[name])
        except InputRejected as error:
            message = str(error).replace("value contains", f"{option} contains", 1)
            raise CommandFailed(message) from None


#: Positional arguments, named in messages by their metavar.
_POSITIONALS = {"kind", "file", "name", "action", "what", "target", "command", "judge_command", "validate_command"}


def main(argv: list[str] | None = None) -> int:
    from db.rules.security import keep_files_private

    # Databases, backups, exports and reports hold labels, hashes or keys: private from their creation.
    keep_files_private()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "users" and args.action != "list" and not args.name:
        parser.error("users: a NAME is required")
    if args.command == "users" and args.action == "add" and not args.role:
        parser.error("users add: --role is required")
    try:
        _check_options(args)
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
