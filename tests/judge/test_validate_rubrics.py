"""`validate rubrics` and `import references` (docs/REFERENCE.md §3.1, §3.7, §4.2) against the loopback judge server.

The server's verdict is a fixed function of (rubric item, answer) (tools.llm_server.expected_met), so criterion
texts are chosen here for which the reference answer misses c03 and the generic answer meets c05; every
expectation is that choice, read back through the command line's report.json.
"""

from __future__ import annotations

import io
import json
import socket
import sys

import pytest
from sqlmodel import Session, func, select

from cli.main import main
from db.rules.anchors import GENERIC, REFUSAL, WEAK_TEXTS
from db.store.engine import get_engine
from db.store.models import AnchorDecision, AuditLog, Criterion, JudgeDecision, ReferenceAnswer, RubricVersion
from tests.support.factories import make_case, make_response
from tools.llm_server import LLMServer, expected_met

N = 5
REFERENCE_TEXT = "考虑急性冠脉综合征，立即行心电图和肌钙蛋白检查，给予阿司匹林，必要时急诊冠脉造影。"
#: CC-0001's wanted verdicts: criterion → (reference meets it, refusal meets it, generic meets it).
WANTED = {f"c{j:02d}": (j != 3, False, j == 5) for j in range(1, N + 1)}
CLEAN = {f"c{j:02d}": (True, False, False) for j in range(1, N + 1)}


def criterion_text(case_id: str, criterion_id: str, wanted: tuple[bool, bool, bool]) -> str:
    """The first text whose verdicts on the three anchors are `wanted`."""
    for variant in range(5000):
        text = f"{case_id} {criterion_id}：回答提到心电图检查（写法 {variant}）"
        verdicts = tuple(
            expected_met(text, answer) for answer in (REFERENCE_TEXT, WEAK_TEXTS[REFUSAL], WEAK_TEXTS[GENERIC])
        )
        if verdicts == wanted:
            return text
    raise AssertionError("no text found")


@pytest.fixture
def cli(database_url, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()

    def run(*argv: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    yield run
    get_engine().dispose()
    get_engine.cache_clear()


@pytest.fixture
def server():
    with LLMServer() as running:
        yield running


def build(session: Session) -> None:
    for case_id, wanted in (("CC-0001", WANTED), ("CC-0002", CLEAN)):
        case = make_case(session, case_id, n=N)
        make_response(session, case, model="model-a", text=f"{case_id} 的回答")
        version = session.exec(select(RubricVersion).where(RubricVersion.case_pk == case.id)).one()
        for criterion in session.exec(select(Criterion).where(Criterion.rubric_version_id == version.id)).all():
            criterion.text = criterion_text(case_id, criterion.criterion_id, wanted[criterion.criterion_id])
            session.add(criterion)
    session.commit()


def write_lines(path, rows) -> str:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def validate(cli, server, *more: str) -> tuple[int, str, str]:
    return cli("validate", "rubrics", "--base-url", server.url, "--model", "judge-8b", "--judge", "anchor-judge", *more)


def test_flags_exactly_the_planted_criteria_and_rerun_sends_nothing(cli, session, server, tmp_path):
    build(session)
    references = write_lines(tmp_path / "refs.jsonl", [{"case_id": "CC-0001", "reference_answer": REFERENCE_TEXT}])
    code, out, err = cli("import", "references", references)
    assert code == 0, err
    assert "1 reference answers read — 1 inserted" in out

    code, out, err = validate(cli, server)
    assert code == 0, err
    # CC-0001: 3 anchors × 5 criteria; CC-0002 has no reference: 2 × 5.
    assert server.requests == 25
    assert "reference: items 5, decided 5, unreadable 0, not answered 0" in out
    assert "generic: items 10, decided 10" in out

    code, _out, err = cli("report", "--k", "3", "--json", str(tmp_path / "report.json"))
    assert code == 0, err
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    validity = report["rubric_validity"]
    assert validity["CC-0001"]["flags"] == {"c03": ["reference_not_met"], "c05": ["weak_met"]}
    assert validity["CC-0002"]["flags"] == {}
    first = validity["CC-0001"]
    assert first["reference_s"] == 4 and first["weak"] == {"refusal": 0, "generic": 1}
    assert first["gap"] == pytest.approx((4 - 1) / N)
    assert first["reference_cacs"] == pytest.approx((4 - 3 + 1) / (N - 3 + 1))
    assert first["judge"] == "anchor-judge" and first["rubric_version"] == 1
    assert validity["CC-0002"]["reference_s"] is None and validity["CC-0002"]["gap"] is None
    # Anchors enter no model's figures: no judge decision, no judge in the report.
    assert session.exec(select(func.count()).select_from(JudgeDecision)).one() == 0
    session.commit()  # end the read: on SQLite a transaction holds the lock the next command needs
    assert report["judges"] == {}

    before = server.requests
    code, out, err = validate(cli, server)
    assert code == 0, err
    assert server.requests == before  # nothing changed: every answer from the cache
    assert "done 25 (25 from the cache)" in out


def test_unreadable_and_unreachable_are_counted_per_anchor_never_stored(cli, session, server, tmp_path):
    build(session)
    version = session.exec(select(RubricVersion).join_from(RubricVersion, Criterion)).first()
    criterion = session.exec(
        select(Criterion).where(Criterion.rubric_version_id == version.id, Criterion.criterion_id == "c02")
    ).one()
    criterion.text += " [bad]"
    session.add(criterion)
    session.commit()
    code, out, _err = validate(cli, server)
    assert code == 0
    assert "refusal: items 10, decided 9, unreadable 1, not answered 0" in out
    stored = session.exec(select(AnchorDecision).where(AnchorDecision.criterion_id == "c02")).all()
    assert {row.met for row in stored if row.rubric_version_id == version.id} == {None}
    session.commit()

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    code, out, err = cli(
        "validate", "rubrics", "--base-url", closed, "--model", "other-judge", "--judge", "down", "--max-retries", "0"
    )
    assert code == 1
    assert "refusal: items 10, decided 0, unreadable 0, not answered 10" in out
    runs = session.exec(select(AnchorDecision.run_id).distinct()).all()
    assert len(runs) == 1  # the unreachable run stored no anchor decision


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([{"case_id": "CC-9999", "reference_answer": "答"}], "refs.jsonl line 1: case_id: unknown case 'CC-9999'"),
        ([{"case_id": "CC-0001", "reference_answer": "  "}], "refs.jsonl line 1: reference_answer: must not be empty"),
        (
            [{"case_id": "CC-0001", "reference_answer": "长" * 200_001}],
            "refs.jsonl line 1: reference_answer: at most 200,000 characters (got 200,001)",
        ),
        (
            [{"case_id": "CC-0001", "reference_answer": "甲"}, {"case_id": "CC-0001", "reference_answer": "乙"}],
            "refs.jsonl line 2: case_id 'CC-0001' repeats line 1",
        ),
        ([{"case_id": "CC-0001", "reference_answer": 7}], "refs.jsonl line 1: reference_answer"),
    ],
)
def test_bad_reference_files_land_nothing(cli, session, tmp_path, rows, expected):
    build(session)
    good = {"case_id": "CC-0002", "reference_answer": "先保留的好行"}
    code, _out, err = cli("import", "references", write_lines(tmp_path / "refs.jsonl", [*rows, good]))
    assert code == 1
    assert expected in err.splitlines()[0]
    assert session.exec(select(func.count()).select_from(ReferenceAnswer)).one() == 0


def test_nul_in_a_reference_is_refused(cli, session, tmp_path):
    build(session)
    path = tmp_path / "refs.jsonl"
    path.write_text('{"case_id": "CC-0001", "reference_answer": "a\\u0000b"}\n', encoding="utf-8")
    code, _out, err = cli("import", "references", str(path))
    assert code == 1 and err.startswith("clinconsensus: refs.jsonl line 1:")
    assert session.exec(select(func.count()).select_from(ReferenceAnswer)).one() == 0


def test_a_later_import_replaces_and_audits_by_digest(cli, session, tmp_path):
    build(session)
    first = write_lines(tmp_path / "a.jsonl", [{"case_id": "CC-0001", "reference_answer": "第一版参考答案"}])
    second = write_lines(tmp_path / "b.jsonl", [{"case_id": "CC-0001", "reference_answer": "第二版参考答案"}])
    session.commit()
    assert cli("import", "references", first)[0] == 0
    code, out, _err = cli("import", "references", second)
    assert code == 0 and "1 replaced" in out
    code, out, _err = cli("import", "references", second)
    assert "1 unchanged" in out
    stored = session.exec(select(ReferenceAnswer)).one()
    assert stored.text == "第二版参考答案"
    entries = session.exec(select(AuditLog).where(AuditLog.entity == "reference_answer")).all()
    assert [entry.action for entry in entries] == ["import", "replace"]
    import hashlib

    digest = hashlib.sha256("第二版参考答案".encode()).hexdigest()
    assert entries[1].after == {"sha256": digest, "length": 7}
    assert "第一版" not in json.dumps([entry.before for entry in entries], ensure_ascii=False)
    assert all("参考答案" not in json.dumps(entry.after, ensure_ascii=False) for entry in entries)


def test_case_lines_carry_reference_answers(cli, session, tmp_path):
    from tests.support.import_samples import case_record

    record = case_record("CC-0100") | {"reference_answer": "病例文件里的参考答案"}
    code, _out, err = cli("import", "cases", write_lines(tmp_path / "cases.jsonl", [record]))
    assert code == 0, err
    assert session.exec(select(ReferenceAnswer.text)).one() == "病例文件里的参考答案"
    from db.store.models import Case

    assert "reference_answer" not in session.exec(select(Case.extra)).one()
    session.commit()
    bad = case_record("CC-0101") | {"reference_answer": ""}
    code, _out, err = cli("import", "cases", write_lines(tmp_path / "bad.jsonl", [bad]))
    assert code == 1 and "bad.jsonl line 1: reference_answer: must not be empty" in err


def test_bad_validate_options_are_one_line_and_record_nothing(cli, session, server, tmp_path):
    build(session)
    session.commit()
    unknown = tmp_path / "cases.txt"
    unknown.write_text("CC-0001\nCC-4040\n", encoding="utf-8")
    code, _out, err = validate(cli, server, "--cases", str(unknown))
    assert code == 1 and err.strip() == "clinconsensus: cases.txt line 2: unknown case id 'CC-4040'"
    code, _out, err = cli("validate", "rubrics", "--model", "judge-8b", "--judge", "j")
    assert code == 1 and "--base-url" in err and len(err.strip().splitlines()) == 1
    code, _out, err = cli("validate", "rubrics", "--base-url", "localhost:1", "--model", "m", "--judge", "j")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert server.requests == 0
    from db.store.models import JudgeRun

    assert session.exec(select(func.count()).select_from(JudgeRun)).one() == 0
    session.commit()
