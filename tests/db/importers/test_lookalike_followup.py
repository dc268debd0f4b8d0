"""Look-alike names beyond case ids and models: judge names (judge importer, judge runs), usernames (`users add`,
the label import's unknown annotators), criterion ids within one rubric and generated answers' `--as` name.
A name whose NFKC case-folded form is that of a different existing one is refused in one line naming file,
line and field (or the option), and nothing changes; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import unicodedata

import pytest
from sqlmodel import Session, func, select

from cli.main import main
from db.access import users
from db.access.policies import SystemActor
from db.importers import import_file
from db.rules.errors import ValidationFailed
from db.store.engine import get_engine, session_scope
from db.store.models import JudgeRun, User
from db.work import judge_runs
from tests.db.importers.test_input_safety import prepared  # noqa: F401  (a fixture)
from tests.support.import_samples import case_record, label_record, refused, write_jsonl

FOLDING = "(the same after NFKC and case folding)"


def _judge_rows(judge: str) -> list[dict]:
    return [{"judge": judge, "case_id": "CC-0001", "model": "model-a", "criterion_id": "c01", "met": True}]


@pytest.mark.parametrize("judge", ["Judge-A", "ＪＵＤＧＥ-ａ", "JUDGE-A"])
def test_a_judge_name_like_an_existing_judge_is_refused(prepared, tmp_path, judge):  # noqa: F811
    assert import_file(prepared, "judge", write_jsonl(tmp_path / "first.jsonl", _judge_rows("judge-a"))).records == 1
    assert unicodedata.normalize("NFKC", judge).casefold() == "judge-a"  # the rule, read independently
    (error,) = refused(prepared, "judge", write_jsonl(tmp_path / "judge.jsonl", _judge_rows(judge)))
    assert error == f"judge.jsonl line 1: judge {judge!r} looks like the existing 'judge-a' {FOLDING}"


def test_two_lookalike_judges_in_one_file_are_refused_at_the_second(prepared, tmp_path):  # noqa: F811
    rows = _judge_rows("judge-b") + [{**_judge_rows("Judge-B")[0], "criterion_id": "c02"}]
    (error,) = refused(prepared, "judge", write_jsonl(tmp_path / "judge.jsonl", rows))
    assert error.startswith("judge.jsonl line 2: judge 'Judge-B' looks like the existing 'judge-b'")


def test_the_same_judge_and_other_names_still_import(prepared, tmp_path):  # noqa: F811
    assert import_file(prepared, "judge", write_jsonl(tmp_path / "a.jsonl", _judge_rows("judge-a"))).records == 1
    again = [{**_judge_rows("judge-a")[0], "criterion_id": "c02"}] + _judge_rows("判官（甲）")
    assert import_file(prepared, "judge", write_jsonl(tmp_path / "b.jsonl", again)).records == 2


def test_an_official_file_under_a_lookalike_judge_option_is_refused(prepared, tmp_path):  # noqa: F811
    assert import_file(prepared, "judge", write_jsonl(tmp_path / "a.jsonl", _judge_rows("judge-a"))).records == 1
    path = tmp_path / "model-a_judge.json"
    path.write_text(
        json.dumps([{"case_id": "CC-0001", "criteria_results": [{"criterion_id": "c01", "criteria_met": True}]}]),
        encoding="utf-8",
    )
    (error,) = refused(prepared, "judge", path, judge="JUDGE-A")
    assert "judge 'JUDGE-A' looks like the existing 'judge-a'" in error and error.startswith("model-a_judge.json")


def test_a_rubric_with_criterion_ids_alike_after_folding_is_refused(prepared, tmp_path):  # noqa: F811
    record = case_record("CC-0009")
    first = record["rubrics"][0]["criterion_id"]
    record["rubrics"][3]["criterion_id"] = first.upper()
    (error,) = refused(prepared, "cases", write_jsonl(tmp_path / "cases.jsonl", [record]))
    assert error.startswith("cases.jsonl line 1: rubrics[3].criterion_id")
    assert f"{first.upper()!r} looks like {first!r} of rubrics[0] {FOLDING}" in error


def test_a_label_import_naming_an_account_in_another_case_is_refused(prepared, tmp_path):  # noqa: F811
    rows = [label_record(annotator="dr_a"), label_record(criterion_id="c02", annotator="DR_A")]
    (error,) = refused(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert error == f"labels.jsonl line 2: annotator 'DR_A' looks like the existing 'dr_a' {FOLDING}"


def test_two_new_annotators_alike_in_one_file_are_refused_at_the_second(prepared, tmp_path):  # noqa: F811
    rows = [label_record(annotator="dr_new"), label_record(criterion_id="c02", annotator="Dr_New")]
    (error,) = refused(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert error.startswith("labels.jsonl line 2: annotator 'Dr_New' looks like the existing 'dr_new'")


def test_users_add_refuses_a_name_alike_an_account(prepared):  # noqa: F811
    with Session(prepared) as session:
        before = session.exec(select(func.count()).select_from(User)).one()
        with pytest.raises(ValidationFailed) as refusal:
            users.add_user(
                session, username="BOSS", role="admin", group_no=None, password="long-enough-pw", actor=SystemActor("t")
            )
        assert str(refusal.value) == f"username 'BOSS' looks like the existing 'boss' {FOLDING}"
        session.rollback()
        assert session.exec(select(func.count()).select_from(User)).one() == before


def test_users_add_on_the_command_line_says_it_in_one_line(prepared, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setenv("DATABASE_URL", prepared.url.render_as_string(hide_password=False))
    get_engine.cache_clear()
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("long-enough-pw\n"))
    try:
        assert main(["users", "add", "Chk_A", "--role", "checker", "--group", "1", "--password-stdin"]) == 1
    finally:
        get_engine().dispose()
        get_engine.cache_clear()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "username 'Chk_A' looks like the existing 'chk_a'" in err


def _run(session: Session, name: str, kind: str) -> None:
    judge_runs.create_run(
        session,
        "@cli",
        judge=name,
        base_url="http://127.0.0.1:9/v1",
        model="m",
        template="official",
        template_sha256="0" * 64,
        params={},
        kind=kind,
    )


@pytest.mark.parametrize(("kind", "existing", "name", "option"), [
    ("judge", "judge-a", "Judge-A", "--judge"),
    ("generate", "model-a", "ＭＯＤＥＬ-Ａ", "--as"),
])  # fmt: skip
def test_a_run_storing_its_work_under_a_lookalike_name_is_refused(prepared, tmp_path, kind, existing, name, option):  # noqa: F811
    import_file(prepared, "judge", write_jsonl(tmp_path / "a.jsonl", _judge_rows("judge-a")))
    with session_scope(prepared) as session:
        _run(session, existing, kind)  # the existing name itself is fine
    with Session(prepared) as session:
        with pytest.raises(ValidationFailed) as refusal:
            _run(session, name, kind)
        assert str(refusal.value) == f"{option} {name!r} looks like the existing {existing!r} {FOLDING}"
        session.rollback()
        assert session.exec(select(func.count()).select_from(JudgeRun)).one() == 1


def test_a_judge_run_like_an_earlier_runs_judge_is_refused(prepared):  # noqa: F811
    with session_scope(prepared) as session:
        _run(session, "fresh-judge", "judge")
    with Session(prepared) as session, pytest.raises(ValidationFailed):
        _run(session, "Fresh-Judge", "judge")
