"""Look-alike ids and names are refused beside the real ones: spaces at either end, spaces other than the
ASCII one (NBSP, U+3000), invisible fillers (U+3164, U+115F, U+1160, U+2800) and names that equal an existing
one after NFKC and case folding. One line naming file, line and field; nothing lands; the same on SQLite
and PostgreSQL, on the command line and in the forms that take names. Other fullwidth characters stay."""

from __future__ import annotations

import json
import unicodedata

import pytest

from cli.main import main
from db.importers import import_file
from db.rules.limits import InputRejected
from db.rules.records import check_name
from db.store.engine import get_engine
from tests.db.importers.test_input_safety import prepared, write_text  # noqa: F401  (a fixture)
from tests.support.import_samples import case_record, label_record, refused, response_record, write_jsonl

SHAPES = [
    (" CC-0003", "case_id starts or ends with a space"),
    ("CC-0003 ", "case_id starts or ends with a space"),
    ("CC-0003\u00a0", "case_id starts or ends with a space"),
    ("\u3000CC-0003", "case_id starts or ends with a space"),
    ("CC-\u00a00003", "case_id contains a space other than the ASCII one (U+00A0)"),
    ("CC-\u30000003", "case_id contains a space other than the ASCII one (U+3000)"),
    ("CC-0003\u3164", "case_id contains an invisible filler (U+3164)"),
    ("CC-0003\u115f", "case_id contains an invisible filler (U+115F)"),
    ("CC\u1160-0003", "case_id contains an invisible filler (U+1160)"),
    ("CC-0003\u2800", "case_id contains an invisible filler (U+2800)"),
    ("CC-0003\u200b", "case_id contains an invisible or control character (U+200B)"),
]


@pytest.mark.parametrize(("case_id", "said"), SHAPES, ids=[repr(case_id) for case_id, _ in SHAPES])
def test_a_case_id_with_a_lookalike_shape_is_refused(prepared, tmp_path, case_id, said):  # noqa: F811
    path = write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0004"), case_record(case_id)])
    assert refused(prepared, "cases", path) == [f"cases.jsonl line 2: {said}"]


@pytest.mark.parametrize("case_id", ["ＣＣ-0001", "cc-0001", "Cc-０００１"])
def test_a_case_id_equal_to_an_existing_one_after_folding_is_refused(prepared, tmp_path, case_id):  # noqa: F811
    path = write_jsonl(tmp_path / "cases.jsonl", [case_record(case_id)])
    expected = f"cases.jsonl line 1: case_id {case_id!r} looks like the existing 'CC-0001' (the same after NFKC"
    (error,) = refused(prepared, "cases", path)
    assert error.startswith(expected)
    assert unicodedata.normalize("NFKC", case_id).casefold() == "cc-0001"  # the rule, read independently


def test_two_lookalikes_in_one_file_are_refused_at_the_second(prepared, tmp_path):  # noqa: F811
    path = write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0007"), case_record("ＣＣ-0007")])
    (error,) = refused(prepared, "cases", path)
    assert error.startswith("cases.jsonl line 2: case_id 'ＣＣ-0007' looks like the existing 'CC-0007'")


def test_other_fullwidth_characters_stay_allowed(prepared, tmp_path):  # noqa: F811
    cases = [case_record("CC-（甲）0001"), case_record("病例：０１")]
    summary = import_file(prepared, "cases", write_jsonl(tmp_path / "cases.jsonl", cases))
    assert summary.records == 2
    responses = [response_record("CC-（甲）0001", "模型：甲（第二版）")]
    assert import_file(prepared, "responses", write_jsonl(tmp_path / "r.jsonl", responses)).records == 1


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("model-a ", "model starts or ends with a space"),
        ("model-a\u00a0", "model starts or ends with a space"),
        ("model\u3164-a", "model contains an invisible filler (U+3164)"),
        ("MODEL-A", "model 'MODEL-A' looks like the existing 'model-a'"),
        ("ｍｏｄｅｌ-ａ", "model 'ｍｏｄｅｌ-ａ' looks like the existing 'model-a'"),
    ],
)
def test_a_lookalike_model_name_is_refused(prepared, tmp_path, model, said):  # noqa: F811
    path = write_jsonl(tmp_path / "responses.jsonl", [response_record("CC-0001", model)])
    (error,) = refused(prepared, "responses", path)
    assert error.startswith(f"responses.jsonl line 1: {said}")


@pytest.mark.parametrize("judge", ["jx ", "\u3000jx", "j\u00a0x", "jx\u2800"])
def test_a_lookalike_judge_name_is_refused_on_the_quick_path_too(prepared, tmp_path, judge):  # noqa: F811
    line = json.dumps({"judge": judge, **label_record()}, ensure_ascii=False)
    path = write_text(tmp_path / "judge.jsonl", line + "\n")
    (error,) = refused(prepared, "judge", path)
    assert error.startswith("judge.jsonl line 1: judge ")


@pytest.mark.parametrize("value", ["cli ", "c\u00a0li", "cli\u3164"])
def test_a_lookalike_name_option_is_refused_before_the_database(value, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'never.db'}")
    get_engine.cache_clear()
    try:
        assert main(["leaderboard", "list", "--actor", value]) == 1
    finally:
        get_engine.cache_clear()
    err = capsys.readouterr().err
    assert err.startswith("clinconsensus: --actor ") and err.count("\n") == 1
    assert not (tmp_path / "never.db").exists()
    with pytest.raises(InputRejected):
        check_name("--judge", value, "judge")
