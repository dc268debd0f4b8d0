"""Number literals beyond 4,300 digits and NUL characters in keys: one line each, nothing lands, the same
on SQLite and PostgreSQL and in every importer (JSON Lines, the official judgement file, the command line)."""

from __future__ import annotations

import json

import pytest

from cli.main import main
from db.rules.limits import InputRejected, loads, raw_decode
from db.store.engine import get_engine
from tests.db.importers.test_input_safety import prepared, write_text  # noqa: F401  (a fixture)
from tests.support.import_samples import case_record, label_record, refused, response_record

HUGE = "9" * 5000
MESSAGE = "not accepted: a number longer than 4,300 digits"

LINES = [
    ("cases", lambda: json.dumps(case_record("CC-0009"))[:-1] + f', "extra_n": {HUGE}}}'),
    ("responses", lambda: json.dumps(response_record())[:-1] + f', "n": -{HUGE}}}'),
    ("labels", lambda: json.dumps(label_record())[:-1] + f', "group_n": {HUGE}.5}}'),
    ("judge", lambda: json.dumps({"judge": "jx", **label_record()})[:-1] + f', "score": {HUGE}}}'),
]


@pytest.mark.parametrize(("kind", "line"), LINES, ids=[kind for kind, _ in LINES])
def test_a_5000_digit_number_is_one_line_and_lands_nothing(prepared, tmp_path, kind, line):  # noqa: F811
    path = write_text(tmp_path / f"{kind}.jsonl", line() + "\n")
    errors = refused(prepared, kind, path)
    assert errors == [f"{kind}.jsonl line 1: {MESSAGE}"]


def test_a_5000_digit_number_in_an_official_judgement_file(prepared, tmp_path):  # noqa: F811
    item = f'{{"case_id": "CC-0001", "criteria_results": [{{"criterion_id": "c01", "criteria_met": {HUGE}}}]}}'
    path = write_text(tmp_path / "model-a_judge.json", f"[\n{item}\n]\n")
    errors = refused(prepared, "judge", path, judge="jx")
    assert len(errors) == 1 and errors[0].endswith(MESSAGE) and errors[0].startswith("model-a_judge.json line ")


def test_the_command_line_prints_one_line_without_a_traceback(prepared, database_url, tmp_path, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()
    try:
        path = write_text(tmp_path / "labels.jsonl", LINES[2][1]() + "\n")
        assert main(["import", "labels", str(path)]) == 1
    finally:
        get_engine.cache_clear()
    err = capsys.readouterr().err
    assert err == f"clinconsensus: labels.jsonl line 1: {MESSAGE}\n"


def test_numbers_up_to_the_limit_still_read():
    assert loads("9" * 4300) == int("9" * 4300)
    assert raw_decode("[-" + "1" * 4300 + "]")[0] == [-int("1" * 4300)]
    with pytest.raises(InputRejected):
        loads("1" * 4301)


def test_a_nul_in_a_key_is_printed_escaped(prepared, tmp_path):  # noqa: F811
    line = json.dumps({"judge": "jx", **label_record(), "meta": {"a\x00b\x1b[31m": 1}})
    path = write_text(tmp_path / "judge.jsonl", line + "\n")
    (error,) = refused(prepared, "judge", path)
    assert error == "judge.jsonl line 1: not accepted: key meta.a\\u0000b\\u001b[31m contains a NUL character (\\u0000)"
    assert "\x00" not in error and "\x1b" not in error
