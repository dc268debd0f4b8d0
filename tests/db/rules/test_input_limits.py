"""Bad input against every importer: one line naming file, line and field; nothing lands (SQLite and PostgreSQL).

Kinds tried: nesting deeper than the limit (and deep enough to overflow Python's recursion), NaN /
Infinity / overflowing numbers, overlong text in every free-text field, too many list items,
invalid usernames that would become accounts, and an official judgement file that is not a list.
"""

from __future__ import annotations

import json
import math

import pytest

from db.importers import import_file
from db.rules import limits
from db.rules.limits import MAX_JSON_DEPTH, TEXT_LIMITS
from tests.support.import_samples import case_record, label_record, refused, response_record, write_jsonl

DEEP = "[" * 5000 + "]" * 5000  # beyond Python's recursion limit: used to crash every importer
JUST_TOO_DEEP = "[" * MAX_JSON_DEPTH + "1" + "]" * MAX_JSON_DEPTH  # within the list inside a record: +1 level


def line_with(record: dict, key: str, raw_value: str) -> str:
    """`record` as a JSON line whose `key` holds the raw JSON text `raw_value` (which json.dumps cannot write)."""
    text = json.dumps({**record, key: "__RAW__"}, ensure_ascii=False)
    return text.replace('"__RAW__"', raw_value)


@pytest.fixture
def prepared(engine, tmp_path):
    """One case with its rubric, two responses, nothing else."""
    import_file(engine, "cases", write_jsonl(tmp_path / "ok_cases.jsonl", [case_record()]))
    import_file(
        engine,
        "responses",
        write_jsonl(tmp_path / "ok_responses.jsonl", [response_record(), response_record(model="model-b")]),
    )
    return engine


def judge_row(**fields) -> dict:
    return {"judge": "j", "case_id": "CC-0001", "model": "model-a", "criterion_id": "c01", "met": True, **fields}


NESTING = [
    ("cases", lambda: line_with(case_record("CC-0009"), "extra_info", DEEP)),
    ("responses", lambda: line_with(response_record(), "meta", DEEP)),
    ("labels", lambda: line_with(label_record(), "meta", DEEP)),
    ("judge", lambda: line_with(judge_row(), "raw", DEEP)),
    ("cases", lambda: line_with(case_record("CC-0009"), "extra_info", JUST_TOO_DEEP)),
]


@pytest.mark.parametrize("kind,make_line", NESTING)
def test_deep_nesting_is_refused_with_the_line(prepared, tmp_path, kind, make_line):
    path = write_jsonl(tmp_path / f"{kind}.jsonl", [make_line()])
    errors = refused(prepared, kind, path)
    assert errors == [f"{kind}.jsonl line 1: not accepted: nested deeper than {MAX_JSON_DEPTH} levels"]


def test_deep_nesting_in_an_official_judgement_file(prepared, tmp_path):
    path = tmp_path / "model-a_judge.json"
    path.write_text('[\n{"case_id": "CC-0001", "criteria_results": ' + DEEP + "}\n]", encoding="utf-8")
    errors = refused(prepared, "judge", path, judge="j")
    assert errors == [f"model-a_judge.json line 2: not accepted: nested deeper than {MAX_JSON_DEPTH} levels"]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("kind", ["cases", "judge"])
def test_non_finite_numbers_are_refused(prepared, tmp_path, kind, constant):
    record = case_record("CC-0009") if kind == "cases" else judge_row()
    path = write_jsonl(
        tmp_path / f"{kind}.jsonl", [json.dumps(record, ensure_ascii=False), line_with(record, "score", constant)]
    )
    errors = refused(prepared, kind, path, **({"fmt": "decisions"} if kind == "judge" else {}))
    assert len(errors) == 1 and errors[0].startswith(f"{kind}.jsonl line 2: not accepted: ")
    assert "finite" in errors[0]


def test_non_finite_numbers_in_an_official_judgement_file(prepared, tmp_path):
    path = tmp_path / "model-a_judge.json"
    item = {"case_id": "CC-0001", "criteria_results": [{"criterion_id": "c01", "criteria_met": True, "score": 1}]}
    path.write_text("[\n" + json.dumps(item).replace("1}", "NaN}") + "\n]", encoding="utf-8")
    errors = refused(prepared, "judge", path, judge="j")
    assert (
        len(errors) == 1 and errors[0].startswith("model-a_judge.json line 2: not accepted") and "finite" in errors[0]
    )


LONG_FIELDS = [
    ("cases", "clinical_context", lambda n: case_record("CC-0009", clinical_context="病" * n)),
    ("cases", "user_request", lambda n: case_record("CC-0009", user_request="问" * n)),
    ("responses", "response", lambda n: response_record(text="答" * n)),
    ("labels", "note", lambda n: label_record(note="理" * n)),
]


@pytest.mark.parametrize("kind,field,make", LONG_FIELDS)
def test_text_longer_than_its_limit_is_refused_and_the_limit_itself_accepted(prepared, tmp_path, kind, field, make):
    limit = TEXT_LIMITS[field]
    errors = refused(prepared, kind, write_jsonl(tmp_path / f"{kind}.jsonl", [make(limit + 1)]))
    assert errors == [f"{kind}.jsonl line 1: {field} is longer than {limit:,} characters ({limit + 1:,})"]
    summary = import_file(prepared, kind, write_jsonl(tmp_path / f"{kind}_ok.jsonl", [make(limit)]))
    assert summary.inserted == 1 or summary.replaced == 1


def test_criterion_text_tags_and_list_sizes_have_limits(prepared, tmp_path):
    record = case_record("CC-0009")
    record["rubrics"][3]["criterion"] = "标" * (TEXT_LIMITS["criterion"] + 1)
    errors = refused(prepared, "cases", write_jsonl(tmp_path / "cases.jsonl", [record]))
    assert errors == [
        f"cases.jsonl line 1: rubrics[3].criterion is longer than {TEXT_LIMITS['criterion']:,} characters "
        f"({TEXT_LIMITS['criterion'] + 1:,})"
    ]
    many = case_record("CC-0009", task_labels=[f"t{i}" for i in range(limits.MAX_LIST_ITEMS + 1)])
    errors = refused(prepared, "cases", write_jsonl(tmp_path / "cases.jsonl", [many]))
    assert errors == [
        f"cases.jsonl line 1: task_labels has {limits.MAX_LIST_ITEMS + 1} items, at most {limits.MAX_LIST_ITEMS}"
    ]


def test_huge_extra_keys_are_refused(prepared, tmp_path):
    record = case_record("CC-0009", source_notes="x" * (TEXT_LIMITS["extra"] + 1))
    errors = refused(prepared, "cases", write_jsonl(tmp_path / "cases.jsonl", [record]))
    assert len(errors) == 1 and errors[0].startswith("cases.jsonl line 1: extra keys: at most")


@pytest.mark.parametrize("name", ["x'; DROP TABLE user;--", "a", "名字 带空格", "<script>", "x" * 65])
def test_label_imports_refuse_account_names_that_users_add_would_refuse(prepared, tmp_path, name):
    rows = [label_record(annotator="dr_ok"), label_record(criterion_id="c02", annotator=name)]
    errors = refused(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert len(errors) == 1 and errors[0].startswith("labels.jsonl line 2: annotator")


@pytest.mark.parametrize("fmt", [None, "official"])
def test_official_file_that_is_not_a_list_gets_that_message(prepared, tmp_path, fmt):
    path = tmp_path / "model-a_judge.json"
    path.write_text(json.dumps({"case_id": "CC-0001", "criteria_results": []}, indent=2), encoding="utf-8")
    errors = refused(prepared, "judge", path, judge="j", **({"fmt": fmt} if fmt else {}))
    assert errors == [
        "model-a_judge.json line 1: an official judgement file must be a JSON list of cases at its top level, "
        "found an object"
    ]


def test_safe_loads_and_dumps():
    with pytest.raises(limits.InputRejected):
        limits.loads('{"a": NaN}')
    with pytest.raises(limits.InputRejected):
        limits.loads(DEEP)
    assert limits.loads('{"a": [1.5, {"b": [true]}]}') == {"a": [1.5, {"b": [True]}]}
    with pytest.raises(ValueError):
        limits.dumps({"a": math.nan})
    assert limits.nesting_depth([[[]]]) == 3 and limits.nesting_depth(1) == 0


def test_cli_reports_one_line_and_exits_non_zero(tmp_path, sqlite_url, monkeypatch, capsys):
    from cli.main import main
    from db.store.engine import get_engine

    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    get_engine.cache_clear()
    path = write_jsonl(tmp_path / "cases.jsonl", [line_with(case_record("CC-0009"), "extra_info", DEEP)])
    try:
        code = main(["import", "cases", str(path)])
    finally:
        get_engine.cache_clear()
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip() == f"clinconsensus: cases.jsonl line 1: not accepted: nested deeper than {MAX_JSON_DEPTH} levels"
    assert "Traceback" not in err
