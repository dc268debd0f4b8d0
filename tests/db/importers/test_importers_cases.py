"""Importing cases (docs/REFERENCE.md §3.1).

The release schema, rubrics empty or exactly N, one transaction per file.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st
from sqlmodel import Session, select

from db import importers
from db.access.audit import verify_chain
from db.importers import ImportFailed, import_file, import_stream
from db.rules.config import RUBRIC_SIZE
from db.rules.contacts import find_contacts
from db.store.models import AuditLog, Case, Criterion, RubricVersion, utcnow
from tests.support.import_samples import case_record, foreign_key_count, refused, table_counts, write_bytes, write_jsonl


def _case(engine, case_id: str) -> Case:
    with Session(engine) as session:
        return session.exec(select(Case).where(Case.case_id == case_id)).one()


def _rubrics(engine, case_id: str) -> list[tuple[RubricVersion, list[Criterion]]]:
    with Session(engine) as session:
        case = session.exec(select(Case).where(Case.case_id == case_id)).one()
        versions = session.exec(
            select(RubricVersion).where(RubricVersion.case_pk == case.id).order_by(RubricVersion.version)
        ).all()
        return [
            (
                version,
                list(
                    session.exec(
                        select(Criterion).where(Criterion.rubric_version_id == version.id).order_by(Criterion.position)
                    ).all()
                ),
            )
            for version in versions
        ]


def test_cases_round_trip_with_rubric_taxonomy_and_extra_keys(engine, tmp_path):
    records = [
        case_record(
            "CC-0001", register="professional", source_note="kept", task_labels=["鉴别诊断", "Patient education"]
        ),
        case_record("CC-0002", n=0, task_labels=["罕见病咨询"], subject_labels=["未知科室"]),
    ]
    summary = import_file(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", records))
    assert (summary.records, summary.inserted, summary.replaced, summary.unchanged) == (2, 2, 0, 0)
    assert (summary.rubric_versions, summary.criteria) == (1, RUBRIC_SIZE)

    first = _case(engine, "CC-0001")
    assert first.task_labels == ["differential_diagnosis", "patient_education"]
    assert first.task == "鉴别诊断"
    assert first.register_override == "professional"
    assert first.extra == {"source_note": "kept"}
    assert first.clinical_context == records[0]["clinical_context"]
    [(version, criteria)] = _rubrics(engine, "CC-0001")
    assert (version.version, version.status, version.author_id) == (1, "approved", None)
    assert [c.criterion_id for c in criteria] == [f"c{i:02d}" for i in range(1, RUBRIC_SIZE + 1)]
    assert [c.position for c in criteria] == list(range(1, RUBRIC_SIZE + 1))
    assert criteria[4].text == "CC-0001 第 5 条标准" and criteria[4].tags == ["safety"]

    second = _case(engine, "CC-0002")
    assert second.task_labels == ["罕见病咨询"], "an unknown task label is kept as given"
    assert second.register_override is None and second.extra == {}
    assert _rubrics(engine, "CC-0002") == []
    assert summary.unknown_task_labels == {"罕见病咨询": 1}
    text = "\n".join(summary.lines())
    assert "罕见病咨询 (1)" in text and "未知科室" in text and "2 inserted" in text
    with Session(engine) as session:
        assert verify_chain(session).ok


def test_same_file_twice_changes_nothing(engine, tmp_path):
    path = write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0001"), case_record("CC-0002", n=0)])
    import_file(engine, "cases", path)
    before = table_counts(engine)
    again = import_file(engine, "cases", path)
    assert (again.inserted, again.replaced, again.unchanged) == (0, 0, 2)
    assert table_counts(engine) == before


def test_changed_case_is_updated_and_audited(engine, tmp_path):
    import_file(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0001")]))
    changed = case_record("CC-0001", difficulty="high", user_request="新的问题？")
    summary = import_file(engine, "cases", write_jsonl(tmp_path / "cases-v2.jsonl", [changed]))
    assert (summary.inserted, summary.replaced, summary.unchanged) == (0, 1, 0)
    case = _case(engine, "CC-0001")
    assert (case.difficulty, case.user_request) == ("high", "新的问题？")
    assert len(_rubrics(engine, "CC-0001")) == 1, "an identical rubric gets no new version"
    with Session(engine) as session:
        entry = session.exec(select(AuditLog).where(AuditLog.entity == "case")).one()
    assert entry.action == "update" and entry.entity_key == "CC-0001"
    assert entry.before == {"difficulty": "medium", "user_request": "请问该怎么办？"}
    assert entry.after == {"difficulty": "high", "user_request": "新的问题？"}


def test_changed_rubric_becomes_a_new_approved_version(engine, tmp_path):
    import_file(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0001")]))
    record = case_record("CC-0001")
    record["rubrics"][2]["criterion"] = "改写后的第 3 条标准"
    summary = import_file(engine, "cases", write_jsonl(tmp_path / "cases-v2.jsonl", [record]))
    assert (summary.replaced, summary.rubric_versions) == (1, 1)
    (v1, old), (v2, new) = _rubrics(engine, "CC-0001")
    assert (v1.version, v2.version, v2.status) == (1, 2, "approved")
    assert old[2].text == "CC-0001 第 3 条标准" and new[2].text == "改写后的第 3 条标准"
    with Session(engine) as session:
        entry = session.exec(
            select(AuditLog)
            .where(AuditLog.entity == "rubric", AuditLog.entity_key == "CC-0001")
            .order_by(AuditLog.id.desc())
        ).first()
    assert entry.before["version"] == 1 and entry.before["criteria"][2]["criterion"] == "CC-0001 第 3 条标准"
    assert entry.after["version"] == 2 and entry.after["criteria"][2]["criterion"] == "改写后的第 3 条标准"
    # a case re-imported without criteria keeps the rubric it has
    import_file(engine, "cases", write_jsonl(tmp_path / "cases-v3.jsonl", [case_record("CC-0001", n=0)]))
    assert len(_rubrics(engine, "CC-0001")) == 2


def test_wrong_rubric_size_names_file_line_and_field(engine, tmp_path):
    records = [case_record(f"CC-000{i}") for i in range(1, 4)] + [case_record("CC-0004", n=RUBRIC_SIZE - 1)]
    errors = refused(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", records))
    assert errors[0].startswith(f"cases.jsonl line 4: rubrics has {RUBRIC_SIZE - 1} criteria, {RUBRIC_SIZE} required")


def _with_criterion(index: int, **changes) -> dict:
    record = case_record("CC-0002")
    record["rubrics"][index].update(changes)
    return record


@pytest.mark.parametrize(
    "bad_record, expected",
    [
        (_with_criterion(6, criterion="   "), "cases.jsonl line 2: rubrics[6].criterion is blank"),
        (
            _with_criterion(9, criterion_id="c03"),
            "cases.jsonl line 2: rubrics[9].criterion_id 'c03' repeats rubrics[2]",
        ),
        (_with_criterion(0, criterion=42), "cases.jsonl line 2: rubrics[0].criterion must be a string, found a number"),
        (
            _with_criterion(1, tags="safety"),
            "cases.jsonl line 2: rubrics[1].tags must be a list of strings, found a string",
        ),
        ({**case_record("CC-0002"), "case_id": 2}, "cases.jsonl line 2: case_id must be a string, found a number"),
        (case_record("CC-0002", difficulty="extreme"), "cases.jsonl line 2: difficulty must be low, medium or high"),
        (case_record("CC-0002", task_labels="鉴别诊断"), "cases.jsonl line 2: task_labels must be a list of strings"),
        (case_record("CC-0002", subject_labels=["心内科", ""]), "cases.jsonl line 2: subject_labels[1] is blank"),
        (case_record("CC-0002", user_request=" \n"), "cases.jsonl line 2: user_request is blank"),
        (case_record("CC-0002", register="expert"), "cases.jsonl line 2: register must be lay or professional"),
        (case_record("CC-0002", rubrics={"c01": "x"}), "cases.jsonl line 2: rubrics must be a list, found an object"),
        (
            {k: v for k, v in case_record("CC-0002").items() if k != "clinical_context"},
            "cases.jsonl line 2: clinical_context is missing",
        ),
        ({**case_record("CC-0002"), "case_id": "C" * 65}, "cases.jsonl line 2: case_id is longer than 64 characters"),
    ],
)
def test_bad_fields_are_refused_with_file_line_and_field(engine, tmp_path, bad_record, expected):
    path = write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0001"), bad_record, case_record("CC-0003")])
    errors = refused(engine, "cases", path)
    assert errors[0].startswith(expected), errors


def test_duplicate_case_id_in_one_file(engine, tmp_path):
    path = write_jsonl(
        tmp_path / "cases.jsonl", [case_record("CC-0001"), case_record("CC-0002"), case_record("CC-0001")]
    )
    assert refused(engine, "cases", path)[0] == "cases.jsonl line 3: case_id 'CC-0001' repeats line 1"


def test_broken_json_non_object_and_non_utf8_lines(engine, tmp_path):
    good = json.dumps(case_record("CC-0001"), ensure_ascii=False).encode("utf-8")
    path = write_bytes(
        tmp_path / "cases.jsonl",
        [
            good,
            b'{"case_id": "CC-0002", "difficulty": ',
            b'["CC-0003"]',
            json.dumps(case_record("CC-0004"), ensure_ascii=False)
            .encode("utf-8")
            .replace("胸痛".encode(), b"\xff\xfe"),
            b"42",
        ],
    )
    errors = refused(engine, "cases", path)
    assert errors[0].startswith("cases.jsonl line 2: not valid JSON")
    assert errors[1] == "cases.jsonl line 3: each line must be a JSON object, found a list"
    assert errors[2].startswith("cases.jsonl line 4: not valid UTF-8 (byte 0xff")
    assert errors[3] == "cases.jsonl line 5: each line must be a JSON object, found a number"


def test_a_bad_line_after_written_chunks_lands_nothing(engine, tmp_path, monkeypatch):
    monkeypatch.setattr(importers.import_summary, "RECORD_CHUNK", 3)  # several chunks are written before the bad line
    monkeypatch.setattr(importers.import_summary, "BULK_ROWS", 10)  # and they go in as bulk loads
    records = [case_record(f"CC-{i:04d}") for i in range(1, 8)] + [case_record("CC-0008", n=1)]
    errors = refused(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", records))
    assert errors[0].startswith("cases.jsonl line 8: rubrics has 1 criteria")
    assert table_counts(engine)["Case"] == 0
    assert foreign_key_count(engine, "criterion") == 1

    summary = import_file(engine, "cases", write_jsonl(tmp_path / "good.jsonl", records[:7]))
    assert (summary.inserted, summary.criteria) == (7, 7 * RUBRIC_SIZE)
    assert foreign_key_count(engine, "criterion") == 1, "the foreign key is back after a bulk load"
    with Session(engine) as session:
        criterion = session.exec(select(Criterion).order_by(Criterion.id)).first()
        assert criterion.tags == ["safety"] and criterion.text == "CC-0001 第 1 条标准"
        case = session.exec(select(Case).order_by(Case.id)).first()
        assert case.created_at.tzinfo is not None and abs((utcnow() - case.created_at).total_seconds()) < 600


def test_errors_are_collected_up_to_a_limit(engine, tmp_path):
    records = [case_record(f"CC-{i:04d}", difficulty="?") for i in range(1, 40)]
    errors = refused(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", records))
    assert len(errors) == importers.MAX_ERRORS + 1
    assert errors[1].startswith("cases.jsonl line 2: difficulty")
    assert errors[-1] == f"cases.jsonl: stopped after {importers.MAX_ERRORS} errors"


def test_contact_like_strings_are_warned_masked_and_still_imported(engine, tmp_path):
    record = case_record("CC-0001", clinical_context="患者电话13812345678，身份证110101199003071234。")
    record["rubrics"][3]["criterion"] = "应建议联系 doctor.li@example.com"
    summary = import_file(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", [record]))
    assert summary.inserted == 1 and summary.warning_count == 3
    text = "\n".join(summary.lines())
    assert "cases.jsonl line 1: clinical_context contains a mobile phone number" in text
    assert "cases.jsonl line 1: clinical_context contains an ID-card number" in text
    assert "cases.jsonl line 1: rubrics[3].criterion contains an e-mail address (d***@example.com)" in text
    for secret in ("13812345678", "110101199003071234", "doctor.li@"):
        assert secret not in text


def test_upload_bytes_with_bom_and_blank_lines(engine):
    body = (
        "\ufeff"
        + json.dumps(case_record("CC-0001"), ensure_ascii=False)
        + "\n\n   \n"
        + json.dumps(case_record("CC-0002", n=0), ensure_ascii=False)
        + "\n"
    ).encode("utf-8")
    summary = import_stream(engine, "cases", "upload.jsonl", body, actor="admin")
    assert summary.inserted == 2
    with Session(engine) as session:
        entry = session.exec(select(AuditLog).where(AuditLog.entity == "cases")).one()
    assert entry.actor == "admin" and entry.entity_key == "upload.jsonl" and entry.after["inserted"] == 2


def test_unknown_kind_and_missing_file(engine, tmp_path):
    with pytest.raises(ImportFailed, match="unknown kind"):
        import_file(engine, "patients", write_jsonl(tmp_path / "x.jsonl", []))
    with pytest.raises(ImportFailed, match="missing.jsonl: no such file"):
        import_file(engine, "cases", tmp_path / "missing.jsonl")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="0123456789１３８-– ()+@.abcXx病", max_size=40))
def test_the_quick_skip_never_hides_a_contact(text):
    """Text the importer does not scan must be text in which the scanner finds nothing."""
    if "@" not in text and importers.reading._DIGIT_GROUP.search(text) is None:
        assert find_contacts(text) == []
