"""`clinconsensus import`, `status --json` and `users add` (docs/REFERENCE.md §3.7), on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlmodel import Session

from cli.main import main
from db.access import users
from db.rules.config import RUBRIC_SIZE
from db.store.engine import get_engine, make_engine
from tests.support.import_samples import MODELS, case_record, label_record, response_record, write_jsonl

STATUS_KEYS = {"cases", "criteria", "responses", "labels", "judge_decisions", "users"}


@pytest.fixture
def cli(database_url, monkeypatch, capsys):
    """Runs `clinconsensus ARGS…` in this process against the test database: (exit code, stdout, stderr)."""
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()

    def run(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    run.url = database_url
    yield run
    get_engine().dispose()
    get_engine.cache_clear()


def _status(cli) -> dict:
    code, out, _err = cli("status", "--json")
    assert code == 0
    return json.loads(out)


def test_import_then_status(cli, tmp_path):
    cases = write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0001"), case_record("CC-0002", n=0)])
    responses = write_jsonl(tmp_path / "responses.jsonl", [response_record("CC-0001", m) for m in MODELS])
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [label_record(model=m, criterion_id="c01", group=g, annotator=f"reader{g}") for m in MODELS for g in (1, 2)]
        + [label_record(criterion_id="c01", stage="adjudication", group=None, annotator="senior")],
    )
    code, out, _err = cli("import", "cases", str(cases))
    assert code == 0 and "cases.jsonl: 2 cases read — 2 inserted" in out
    assert cli("import", "responses", str(responses))[0] == 0
    code, out, _err = cli("import", "labels", str(labels))
    assert code == 0 and "reader1, reader2, senior" in out

    status = _status(cli)
    assert set(status) == STATUS_KEYS
    assert (status["cases"], status["criteria"], status["responses"], status["judge_decisions"]) == (
        2,
        RUBRIC_SIZE,
        2,
        0,
    )
    assert status["labels"]["total"] == 5 and status["labels"]["adjudication"] == 1
    assert status["users"] == 3

    code, out, _err = cli("import", "cases", str(cases))
    assert code == 0 and "0 inserted, 0 replaced, 2 unchanged" in out


def test_bad_file_exits_non_zero_with_one_line_and_changes_nothing(cli, tmp_path):
    good = write_jsonl(tmp_path / "first.jsonl", [case_record("CC-0001")])
    assert cli("import", "cases", str(good))[0] == 0
    before = _status(cli)
    bad = write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0002"), case_record("CC-0003", n=RUBRIC_SIZE - 1)])
    code, out, err = cli("import", "cases", str(bad))
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [
        f"clinconsensus: cases.jsonl line 2: rubrics has {RUBRIC_SIZE - 1} criteria, {RUBRIC_SIZE} required "
        f"(or none, to author them in the app)"
    ]
    assert _status(cli) == before

    code, _out, err = cli("import", "labels", str(tmp_path / "missing.jsonl"))
    assert code == 1 and len(err.strip().splitlines()) == 1 and "missing.jsonl" in err


def test_import_official_judge_file_with_judge_option(cli, tmp_path):
    cli("import", "cases", str(write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0001")])))
    cli("import", "responses", str(write_jsonl(tmp_path / "responses.jsonl", [response_record("CC-0001", "model-a")])))
    official = tmp_path / "model-a_judge.json"
    official.write_text(
        json.dumps(
            [
                {
                    "case_id": "CC-0001",
                    "criteria_results": [
                        {"criterion_id": f"c{i:02d}", "criteria_met": True} for i in range(1, RUBRIC_SIZE + 1)
                    ],
                }
            ]
        ),
        encoding="utf-8",
    )
    code, _out, err = cli("import", "judge", str(official))
    assert code == 1 and "--judge NAME" in err
    code, out, _err = cli("import", "judge", str(official), "--judge", "gpt-judge")
    assert code == 0 and f"{RUBRIC_SIZE} inserted" in out
    assert _status(cli)["judge_decisions"] == RUBRIC_SIZE


def test_users_add_reads_the_password_from_stdin(cli):
    code, out, _err = cli(
        "users", "add", "dr_chen", "--role", "checker", "--group", "2", "--password-stdin", stdin="long-enough-secret\n"
    )
    assert code == 0 and "added dr_chen" in out
    engine = make_engine(cli.url)
    try:
        user = users.authenticate(engine, username="dr_chen", password="long-enough-secret")
        with Session(engine) as session:
            user = session.merge(user)
            assert user is not None and (user.role, user.group_no, user.is_active) == ("checker", 2, True)
            assert "long-enough-secret" not in user.password_hash
    finally:
        engine.dispose()
    assert _status(cli)["users"] == 1


@pytest.mark.parametrize(
    "argv, stdin, reason",
    [
        (["users", "add", "dr_x", "--role", "annotator", "--group", "1"], None, "--password-stdin"),
        (
            ["users", "add", "dr_x", "--role", "annotator", "--group", "1", "--password-stdin"],
            "short\n",
            "password: at least",
        ),
        (
            ["users", "add", "dr_x", "--role", "admin", "--group", "1", "--password-stdin"],
            "long-enough-secret\n",
            "group: admins belong to no expert group",
        ),
        (
            ["users", "add", "dr x", "--role", "annotator", "--group", "1", "--password-stdin"],
            "long-enough-secret\n",
            "username:",
        ),
        (
            ["users", "add", "dr_x", "--role", "annotator", "--password-stdin"],
            "long-enough-secret\n",
            "group: annotators and checkers belong to expert group 1 or 2",
        ),
    ],
)
def test_users_add_refuses_bad_input_with_one_line(cli, argv, stdin, reason):
    code, out, err = cli(*argv, stdin=stdin)
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clinconsensus: ") and reason in lines[0]
    assert _status(cli)["users"] == 0


def test_users_add_twice_is_refused(cli):
    argv = ["users", "add", "dr_li", "--role", "annotator", "--group", "1", "--password-stdin"]
    assert cli(*argv, stdin="long-enough-secret\n")[0] == 0
    code, _out, err = cli(*argv, stdin="long-enough-secret\n")
    assert code == 1 and "exists already" in err and len(err.strip().splitlines()) == 1


def test_console_script_on_a_fresh_database(tmp_path):
    """The installed `clinconsensus` migrates a new DATABASE_URL at once and exits 1 on a bad file."""
    script = Path(sys.executable).with_name("clinconsensus")
    if not script.exists():
        pytest.fail("the clinconsensus console script is not installed in this environment")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.db'}"}
    status = subprocess.run([str(script), "status", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert status.returncode == 0, status.stderr
    counts = json.loads(status.stdout)
    assert set(counts) == STATUS_KEYS and counts["cases"] == 0 and counts["labels"]["total"] == 0
    bad = tmp_path / "responses.jsonl"
    bad.write_text('{"case_id": "CC-0001", "model": "m", "response": "x"}\n', encoding="utf-8")
    result = subprocess.run(
        [str(script), "import", "responses", str(bad)], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "clinconsensus: responses.jsonl line 1: case_id 'CC-0001' is not a known case (import the cases first)"
    ]
