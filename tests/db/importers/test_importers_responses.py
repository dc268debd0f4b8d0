"""Importing model responses (docs/REFERENCE.md §3.2): opaque codes, lengths, replacement with audit."""

from __future__ import annotations

import re

import pytest
from sqlmodel import Session, select

from db.importers import import_file
from db.store.models import AuditLog, Response
from db.work.status import overview
from tests.support.import_samples import (
    MODELS,
    case_record,
    label_record,
    refused,
    response_record,
    table_counts,
    write_jsonl,
)


@pytest.fixture
def with_cases(engine, tmp_path):
    import_file(
        engine, "cases", write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0001"), case_record("CC-0002")])
    )
    return engine


def _responses(engine) -> dict[tuple[int, str], Response]:
    with Session(engine) as session:
        return {(r.case_pk, r.model): r for r in session.exec(select(Response)).all()}


def test_responses_get_opaque_unique_codes_and_lengths(with_cases, tmp_path):
    texts = {"model-a": "建议就医。🙂", "model-b": "先观察 24 小时。"}
    records = [response_record(case_id, model, texts[model]) for case_id in ("CC-0001", "CC-0002") for model in MODELS]
    summary = import_file(with_cases, "responses", write_jsonl(tmp_path / "responses.jsonl", records))
    assert (summary.records, summary.inserted) == (4, 4)
    responses = _responses(with_cases)
    assert len(responses) == 4
    codes = [r.code for r in responses.values()]
    assert len(set(codes)) == 4
    for response in responses.values():
        assert re.fullmatch(r"R[0-9A-F]{10}", response.code)
        assert response.model not in response.code
        assert response.text == texts[response.model]
        assert response.length == len(texts[response.model])  # code points: the emoji counts once
    assert {r.length for r in responses.values()} == {6, 10}


def test_reimport_unchanged_and_replacement_keeps_the_code(with_cases, tmp_path):
    path = write_jsonl(tmp_path / "responses.jsonl", [response_record("CC-0001", m) for m in MODELS])
    import_file(with_cases, "responses", path)
    codes = {key: r.code for key, r in _responses(with_cases).items()}
    before = table_counts(with_cases)
    again = import_file(with_cases, "responses", path)
    assert (again.inserted, again.replaced, again.unchanged) == (0, 0, 2)
    assert table_counts(with_cases) == before

    changed = write_jsonl(tmp_path / "responses-v2.jsonl", [response_record("CC-0001", "model-a", "全新的回答")])
    summary = import_file(with_cases, "responses", changed)
    assert (summary.inserted, summary.replaced, summary.unchanged) == (0, 1, 0)
    after = _responses(with_cases)
    replaced = next(r for r in after.values() if r.model == "model-a")
    assert replaced.text == "全新的回答" and replaced.length == 5
    assert {key: r.code for key, r in after.items()} == codes, "codes never change"
    with Session(with_cases) as session:
        entry = session.exec(select(AuditLog).where(AuditLog.entity == "response")).one()
    assert entry.action == "replace" and entry.entity_key == "CC-0001/model-a"
    assert entry.before["text"] == "model-a 对 CC-0001 的回答。" and entry.after["text"] == "全新的回答"


def test_replacing_a_labelled_response_warns(with_cases, tmp_path):
    import_file(with_cases, "responses", write_jsonl(tmp_path / "r.jsonl", [response_record("CC-0001", "model-a")]))
    import_file(with_cases, "labels", write_jsonl(tmp_path / "l.jsonl", [label_record()]))
    summary = import_file(
        with_cases,
        "responses",
        write_jsonl(tmp_path / "r2.jsonl", [response_record("CC-0001", "model-a", "改过的回答")]),
    )
    assert summary.relabel_needed == 1
    assert any("1 replaced responses already have labels" in line for line in summary.lines())


@pytest.mark.parametrize(
    "bad_record, expected",
    [
        (response_record("CC-9999", "model-a"), "responses.jsonl line 2: case_id 'CC-9999' is not a known case"),
        (response_record("CC-0001", "model-a", " "), "responses.jsonl line 2: response is blank"),
        (
            {"case_id": "CC-0001", "model": ["model-c"], "response": "x"},
            "responses.jsonl line 2: model must be a string, found a list",
        ),
        ({"case_id": "CC-0001", "response": "x"}, "responses.jsonl line 2: model is missing"),
        (
            response_record("CC-0002", "model-b"),
            "responses.jsonl line 2: model 'model-b' for case_id 'CC-0002' repeats line 1",
        ),
    ],
)
def test_bad_responses_are_refused(with_cases, tmp_path, bad_record, expected):
    path = write_jsonl(tmp_path / "responses.jsonl", [response_record("CC-0002", "model-b"), bad_record])
    errors = refused(with_cases, "responses", path)
    assert errors[0].startswith(expected), errors


def test_contacts_in_responses_are_reported(with_cases, tmp_path):
    record = response_record("CC-0001", "model-a", "可拨打 010-62345678 或写信至 help@clinic.cn 咨询。")
    summary = import_file(with_cases, "responses", write_jsonl(tmp_path / "responses.jsonl", [record]))
    assert summary.inserted == 1 and summary.warning_count == 2
    text = "\n".join(summary.lines())
    assert "responses.jsonl line 1: response contains a landline number" in text
    assert "responses.jsonl line 1: response contains an e-mail address (h***@clinic.cn)" in text
    assert "62345678" not in text


def _shown_and_stored(engine) -> tuple[tuple[int, int], tuple[int, int]]:
    """(cases, responses) as the admins' overview shows them, and as the tables hold them."""
    with Session(engine) as session:
        shown = overview(session)
    stored = table_counts(engine)
    return (shown["cases"], shown["responses"]), (stored["Case"], stored["Response"])


def test_the_overview_counts_inserted_cases_and_responses_not_replacements_nor_refusals(with_cases, tmp_path):
    assert _shown_and_stored(with_cases) == ((2, 0),) * 2
    path = write_jsonl(
        tmp_path / "responses.jsonl", [response_record(c, m) for c in ("CC-0001", "CC-0002") for m in MODELS]
    )
    import_file(with_cases, "responses", path)
    import_file(with_cases, "responses", path)  # unchanged: nothing inserted
    replaced = [response_record("CC-0001", "model-a", "改过的回答")]
    assert import_file(with_cases, "responses", write_jsonl(tmp_path / "r2.jsonl", replaced)).replaced == 1
    bad = [response_record("CC-0002", "model-c"), response_record("CC-9999", "model-a")]
    refused(with_cases, "responses", write_jsonl(tmp_path / "bad.jsonl", bad))
    assert _shown_and_stored(with_cases) == ((2, 4),) * 2

    more_cases = [case_record("CC-0001"), case_record("CC-0003"), case_record("CC-0004")]
    import_file(with_cases, "cases", write_jsonl(tmp_path / "cases2.jsonl", more_cases))
    assert _shown_and_stored(with_cases) == ((4, 4),) * 2
