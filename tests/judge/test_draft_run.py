"""`draft rubrics` against the loopback OpenAI-compatible server (tools/llm_server.py).

Expectations come from the server's fixed answer function (`expected_draft`) and from the stored rows,
never from the runner's code: drafts stored per case, markers for unreadable, duplicated, short and
dirty answers, the cache (a re-run sends nothing), the scopes, and one-line refusals that store nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, func, select

from cli.main import main as cli_main
from db.rules.config import RUBRIC_SIZE
from db.rules.errors import ValidationFailed
from db.store.models import AuditLog, JudgeRun, RubricDraft, RubricVersion
from judge.draft import DraftOptions, fill, read_draft_template, run_draft
from judge.runner import execute_run
from tests.support.factories import make_case
from tools.llm_server import LLMServer, expected_draft


def drafts(engine) -> dict[str, RubricDraft]:
    with Session(engine) as session:
        rows = session.exec(select(RubricDraft)).all()
        from db.store.models import Case

        ids = {case.id: case.case_id for case in session.exec(select(Case)).all()}
        return {ids[row.case_pk]: row for row in rows}


def world(engine, contexts: dict[str, str]) -> None:
    with Session(engine) as session:
        for case_id, context in contexts.items():
            make_case(session, case_id, n=0, clinical_context=context)
        make_case(session, "CC-0900", n=RUBRIC_SIZE)  # has an approved rubric: not drafted under `missing`
        session.commit()


def prompt_of(engine, case_id: str) -> str:
    from db.rules.taxonomy import get_taxonomy
    from db.store.models import Case

    with Session(engine) as session:
        case = session.exec(select(Case).where(Case.case_id == case_id)).one()
        tags = [tag["id"] for tag in get_taxonomy().failure_tags()]
        return fill(read_draft_template(None), case, RUBRIC_SIZE, tags)


def test_missing_cases_are_drafted_once_each_and_a_rerun_sends_nothing(sqlite_engine):
    world(sqlite_engine, {f"CC-000{i}": f"病例{i}：胸闷两天" for i in range(1, 5)})
    with LLMServer() as server:
        options = DraftOptions(base_url=server.url, model="qwen-drafter", generator="qwen-d", concurrency=2)
        summary = run_draft(sqlite_engine, options)
        assert summary["status"] == "finished" and summary["kind"] == "draft"
        assert summary["items"] == summary["done"] == 4 and server.requests == 4
        stored = drafts(sqlite_engine)
        assert set(stored) == {"CC-0001", "CC-0002", "CC-0003", "CC-0004"}
        for case_id, row in stored.items():
            assert [item["criterion"] for item in row.criteria] == expected_draft(prompt_of(sqlite_engine, case_id), 30)
            assert row.generator == "qwen-d" and row.parse_ok
        again = run_draft(sqlite_engine, options)
        assert server.requests == 4, "every draft came from the cache"
        assert again["cached"] == 4
    with Session(sqlite_engine) as session:
        assert session.exec(select(func.count()).select_from(RubricVersion)).one() == 1, "nothing submitted"
        entries = session.exec(select(AuditLog).where(AuditLog.entity == "rubric_draft")).all()
        assert len(entries) == 1 and len(entries[0].after["drafts"]) == 4


def test_faulty_answers_are_reasked_at_most_twice_then_what_is_valid_is_kept_and_counted(sqlite_engine):
    world(
        sqlite_engine,
        {
            "CC-0001": "[draft-bad] 无法读取",
            "CC-0002": "[draft-bad-once] 第一次读不出",
            "CC-0003": "[draft-dup] 有重复",
            "CC-0004": "[draft-short] 偏少",
            "CC-0005": "[draft-dirty] 过长与控制字符",
        },
    )
    with LLMServer() as server:
        summary = run_draft(sqlite_engine, DraftOptions(base_url=server.url, model="m", concurrency=2))
        assert server.requests == 3 + 2 + 1 + 1 + 1
    assert summary["status"] == "finished" and summary["parse_failures"] == 1 and summary["reasks"] == 3
    stored = drafts(sqlite_engine)
    assert not stored["CC-0001"].parse_ok and stored["CC-0001"].criteria == []
    assert stored["CC-0002"].parse_ok and len(stored["CC-0002"].criteria) == 30
    assert len(stored["CC-0003"].criteria) == 30
    assert stored["CC-0003"].dropped["duplicates"] == 2 and stored["CC-0003"].dropped["beyond_n"] == 3
    assert len(stored["CC-0004"].criteria) == 25
    dirty = stored["CC-0005"]
    assert dirty.dropped["too_long"] == 1 and dirty.dropped["control"] == 1
    assert all("\x07" not in item["criterion"] and len(item["criterion"]) <= 2000 for item in dirty.criteria)
    assert dirty.criteria[0]["tags"] == []


def test_two_cases_that_read_alike_get_a_draft_each(sqlite_engine):
    world(sqlite_engine, {"CC-0001": "同样的病例", "CC-0002": "同样的病例"})
    with LLMServer() as server:
        run_draft(sqlite_engine, DraftOptions(base_url=server.url, model="m"))
        assert server.requests == 2
    stored = drafts(sqlite_engine)
    assert set(stored) == {"CC-0001", "CC-0002"} and stored["CC-0001"].criteria == stored["CC-0002"].criteria


def test_a_case_file_and_the_all_scope(sqlite_engine, tmp_path):
    world(sqlite_engine, {"CC-0001": "甲", "CC-0002": "乙"})
    listing = tmp_path / "cases.txt"
    listing.write_text("CC-0002\n\nCC-0900\n", encoding="utf-8")
    with LLMServer() as server:
        run_draft(sqlite_engine, DraftOptions(base_url=server.url, model="m", cases=str(listing)))
        assert set(drafts(sqlite_engine)) == {"CC-0002", "CC-0900"}
        run_draft(sqlite_engine, DraftOptions(base_url=server.url, model="m", cases="all"))
        assert set(drafts(sqlite_engine)) == {"CC-0001", "CC-0002", "CC-0900"}


def test_a_recorded_run_resumes_through_judge_resume(sqlite_engine):
    from judge.draft import create_draft_run

    world(sqlite_engine, {"CC-0001": "甲"})
    with LLMServer() as server:
        run_id = create_draft_run(sqlite_engine, DraftOptions(base_url=server.url, model="m", generator="g"))
        summary = execute_run(sqlite_engine, run_id)
    assert summary["status"] == "finished" and summary["done"] == 1
    assert drafts(sqlite_engine)["CC-0001"].generator == "g"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{clinical_context} {user_request} {patient}", "unknown field {patient}"),
        ("{clinical_context} only", "the field {user_request} is missing"),
        ("{clinical_context} {user_request} [{criterion}]", "unknown field {criterion}"),
        ("{clinical_context} {user_request} {", "literal braces are doubled"),
    ],
)
def test_a_bad_template_is_refused_in_one_line(tmp_path, template, message):
    path = tmp_path / "t.txt"
    path.write_text(template, encoding="utf-8")
    with pytest.raises(ValidationFailed, match=message.replace("{", r"\{").replace("[", r"\[")):
        read_draft_template(str(path))


def test_the_command_line_drafts_and_refuses_bad_input_changing_nothing(
    sqlite_url, sqlite_engine, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    world(sqlite_engine, {"CC-0001": "[draft-dup] 甲"})
    bad_cases = tmp_path / "cases.txt"
    bad_cases.write_text("CC-0001\nCC-9999\n", encoding="utf-8")
    not_text = tmp_path / "t.bin"
    not_text.write_bytes(b"\xff\xfe{clinical_context}")
    with LLMServer() as server:
        for argv, said in [
            (["--cases", str(bad_cases)], "cases.txt line 2: unknown case id 'CC-9999'"),
            (["--template", str(tmp_path / "none.txt")], "no such file"),
            (["--template", str(not_text)], "not UTF-8"),
            (["--as", "a\tb"], "--as"),
        ]:
            code = cli_main(["draft", "rubrics", "--base-url", server.url, "--model", "m", *argv])
            err = capsys.readouterr().err
            assert code == 1 and said in err and len(err.strip().splitlines()) == 1, err
        assert server.requests == 0
        with Session(sqlite_engine) as session:
            assert session.exec(select(func.count()).select_from(JudgeRun)).one() == 0
        code = cli_main(["draft", "rubrics", "--base-url", server.url, "--model", "m", "--as", "草稿器"])
    out = capsys.readouterr().out
    assert code == 0
    assert "drafting run 1" in out and "duplicates 2" in out and "beyond n 3" in out and "nothing submitted" in out
    assert drafts(sqlite_engine)["CC-0001"].generator == "草稿器"
    assert Path(sqlite_url.split("///", 1)[1]).exists()
