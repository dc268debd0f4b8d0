"""The command line acts as the system actor `@cli`: the audit log tells it apart from every account (even one
named `cli`, or the account `--actor` names), policies take it explicitly, and `audit verify` replays it."""

from __future__ import annotations

import io
import sys

import pytest
from sqlmodel import select

from cli.main import main
from db.access import users
from db.access.audit import record
from db.access.policies import COMMAND_LINE, SystemActor
from db.rules.errors import ValidationFailed
from db.store.engine import get_engine, session_scope
from db.store.models import AuditLog
from tests.support.import_samples import case_record, write_jsonl

PASSWORD = "long-enough-pw"


@pytest.fixture
def cli(database_url, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()

    def run(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    yield run
    get_engine().dispose()
    get_engine.cache_clear()


def _actors(entity: str) -> list[str]:
    with session_scope(get_engine(), read_only=True) as session:
        return list(session.exec(select(AuditLog.actor).where(AuditLog.entity == entity).order_by(AuditLog.id)))


@pytest.mark.parametrize("name", [COMMAND_LINE, f"{COMMAND_LINE}:boss", "cli:boss", "@boss"])
def test_no_account_can_carry_the_command_lines_name(name):
    with pytest.raises(ValidationFailed):
        users.validate_username(name)


def test_the_command_line_is_recorded_apart_from_accounts_named_like_it(cli, tmp_path):
    # Accounts named `cli` (an admin) and `boss` exist; neither is the command line.
    assert cli("users", "add", "cli", "--role", "admin", "--password-stdin", stdin=PASSWORD + "\n")[0] == 0
    assert cli("users", "add", "boss", "--role", "admin", "--password-stdin", stdin=PASSWORD + "\n")[0] == 0
    cases = write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0001")])
    more = write_jsonl(tmp_path / "more.jsonl", [case_record("CC-0002")])
    assert cli("import", "cases", str(cases))[0] == 0
    assert cli("import", "cases", str(more), "--actor", "boss")[0] == 0
    code, _out, err = cli("leaderboard", "freeze", "q1", "--actor", "cli")
    assert code == 0, err

    assert _actors("user") == ["@cli", "@cli"]
    with session_scope(get_engine(), read_only=True) as session:
        every_actor = set(session.exec(select(AuditLog.actor)))
    assert every_actor == {"@cli", "@cli:boss", "@cli:cli"}
    assert _actors("leaderboard_snapshot") == ["@cli:cli"]
    code, out, err = cli("leaderboard", "list")
    assert code == 0 and "q1" in out, err
    code, out, err = cli("audit", "verify")
    assert code == 0, out + err


def test_entries_written_before_under_the_old_name_still_verify(cli):
    """Older logs name the command line `cli`; replay reads actors as recorded, so they keep verifying."""
    assert cli("users", "add", "boss", "--role", "admin", "--password-stdin", stdin=PASSWORD + "\n")[0] == 0
    with session_scope(get_engine()) as session:
        users.add_user(
            session, username="old_made", role="admin", group_no=None, password=PASSWORD, actor=SystemActor("cli")
        )
        record(session, "cli", action="note", entity="export", entity_key="old", after={"kind": "gold"})
    assert set(_actors("user")) == {"@cli", "cli"}
    code, out, err = cli("audit", "verify")
    assert code == 0, out + err


def test_an_overlong_actor_note_is_one_line_and_changes_nothing(cli, tmp_path):
    cases = write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0001")])
    code, out, err = cli("import", "cases", str(cases), "--actor", "x" * 65)
    assert code != 0 and len(err.strip().splitlines()) == 1 and "--actor" in err
    assert "Traceback" not in out + err
