"""Importing physician labels (docs/REFERENCE.md §3.3): validation, placeholders, replacement with audit, bulk loads."""

from __future__ import annotations

import gc

import pytest
from sqlmodel import Session, select

from db import importers
from db.access.audit import verify_chain
from db.importers import import_file
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import NO_GROUP
from db.store.collector import collector_paused
from db.store.models import AuditLog, Case, Label, Response, RubricVersion, User, utcnow
from tests.support.factories import make_user
from tests.support.import_samples import (
    MODELS,
    case_record,
    foreign_key_count,
    label_record,
    refused,
    response_record,
    table_counts,
    write_jsonl,
)


@pytest.fixture
def prepared(engine, tmp_path):
    """Two cases with rubrics, one without; responses of both models to each."""
    cases = [case_record("CC-0001"), case_record("CC-0002"), case_record("CC-0003", n=0)]
    import_file(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", cases))
    responses = [response_record(case["case_id"], model) for case in cases for model in MODELS]
    import_file(engine, "responses", write_jsonl(tmp_path / "responses.jsonl", responses))
    with Session(engine) as session:
        make_user(session, "dr_a", role="annotator", group_no=1)
        make_user(session, "dr_b", role="annotator", group_no=2)
        make_user(session, "dr_c", role="annotator", group_no=1)
        make_user(session, "chk_a", role="checker", group_no=1)
        make_user(session, "chk_b", role="checker", group_no=2)
        session.commit()
    return engine


def _labels(engine) -> list[tuple]:
    with Session(engine) as session:
        rows = session.exec(
            select(
                Case.case_id,
                Response.model,
                Label.criterion_id,
                Label.stage,
                Label.group_no,
                Label.met,
                User.username,
                Label.note,
                Label.rubric_version_id,
                Label.lock_version,
            )
            .join(Response, Label.response_id == Response.id)
            .join(Case, Response.case_pk == Case.id)
            .join(User, Label.user_id == User.id)
            .order_by(Case.case_id, Response.model, Label.criterion_id, Label.stage, Label.group_no)
        ).all()
    return [tuple(row) for row in rows]


def _version_id(engine, case_id: str, version: int = 1) -> int:
    with Session(engine) as session:
        return session.exec(
            select(RubricVersion.id)
            .join(Case, RubricVersion.case_pk == Case.id)
            .where(Case.case_id == case_id, RubricVersion.version == version)
        ).one()


def test_labels_of_every_stage_land_with_their_rubric_version(prepared, tmp_path):
    rows = [
        label_record(criterion_id="c01", met=True, annotator="dr_a", group=1),
        label_record(criterion_id="c01", met=False, annotator="dr_b", group=2, note="未提及随访"),
        label_record(criterion_id="c01", met=False, stage="check", annotator="chk_a", group=1),
        label_record(criterion_id="c01", met=False, stage="adjudication", annotator="chk_a", group=None),
        {
            k: v
            for k, v in label_record("CC-0002", "model-b", "c30", stage="adjudication", annotator="chk_b").items()
            if k != "group"
        },
    ]
    summary = import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert (summary.records, summary.inserted, summary.replaced, summary.unchanged) == (5, 5, 0, 0)
    assert summary.placeholders == []
    v1, v2 = _version_id(prepared, "CC-0001"), _version_id(prepared, "CC-0002")
    assert _labels(prepared) == [
        ("CC-0001", "model-a", "c01", "adjudication", NO_GROUP, False, "chk_a", None, v1, 1),
        ("CC-0001", "model-a", "c01", "annotation", 1, True, "dr_a", None, v1, 1),
        ("CC-0001", "model-a", "c01", "annotation", 2, False, "dr_b", "未提及随访", v1, 1),
        ("CC-0001", "model-a", "c01", "check", 1, False, "chk_a", None, v1, 1),
        ("CC-0002", "model-b", "c30", "adjudication", NO_GROUP, True, "chk_b", None, v2, 1),
    ]
    with Session(prepared) as session:
        assert verify_chain(session).ok


def test_unknown_usernames_become_inactive_accounts(prepared, tmp_path):
    rows = [
        label_record(criterion_id="c01", annotator="dr_zhang", group=2),
        label_record(criterion_id="c02", annotator="dr_zhang", group=2),
        label_record(criterion_id="c01", stage="check", annotator="qc_li", group=1),
        label_record(criterion_id="c01", stage="adjudication", annotator="adj_wu", group=None),
    ]
    summary = import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert summary.placeholders == ["dr_zhang", "qc_li", "adj_wu"]
    assert any("dr_zhang, qc_li, adj_wu" in line and "inactive" in line for line in summary.lines())
    with Session(prepared) as session:
        users = {u.username: u for u in session.exec(select(User)).all()}
        created = session.exec(select(AuditLog).where(AuditLog.entity == "user", AuditLog.action == "create")).all()
    assert (users["dr_zhang"].role, users["dr_zhang"].group_no) == ("annotator", 2)
    assert (users["qc_li"].role, users["qc_li"].group_no) == ("checker", 1)
    assert (users["adj_wu"].role, users["adj_wu"].group_no) == ("checker", None)
    for name in ("dr_zhang", "qc_li", "adj_wu"):
        assert users[name].is_active is False and users[name].password_hash is None
    assert {entry.entity_key for entry in created} == {"dr_zhang", "qc_li", "adj_wu"}
    # the second time they exist: no new accounts
    again = import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert again.placeholders == [] and again.unchanged == 4


def test_same_file_twice_changes_nothing(prepared, tmp_path):
    rows = [
        label_record(model=m, criterion_id=f"c{i:02d}", met=i % 3 == 0, group=g, annotator=f"dr_{'ab'[g - 1]}")
        for m in MODELS
        for i in range(1, RUBRIC_SIZE + 1)
        for g in (1, 2)
    ]
    path = write_jsonl(tmp_path / "labels.jsonl", rows)
    first = import_file(prepared, "labels", path)
    assert first.inserted == len(rows)
    before = table_counts(prepared)
    again = import_file(prepared, "labels", path)
    assert (again.inserted, again.replaced, again.unchanged) == (0, 0, len(rows))
    assert table_counts(prepared) == before


def test_a_changed_label_replaces_the_old_one_and_the_audit_log_keeps_it(prepared, tmp_path):
    import_file(
        prepared,
        "labels",
        write_jsonl(
            tmp_path / "labels.jsonl",
            [
                label_record(criterion_id="c05", met=True, annotator="dr_a"),
                label_record(criterion_id="c06", met=True, annotator="dr_a"),
            ],
        ),
    )
    summary = import_file(
        prepared,
        "labels",
        write_jsonl(
            tmp_path / "labels-v2.jsonl",
            [
                label_record(criterion_id="c05", met=False, annotator="dr_c", note="复核后改为未满足"),
                label_record(criterion_id="c06", met=True, annotator="dr_a"),
            ],
        ),
    )
    assert (summary.inserted, summary.replaced, summary.unchanged) == (0, 1, 1)
    labels = {row[2]: row for row in _labels(prepared)}
    assert labels["c05"][5:] == (False, "dr_c", "复核后改为未满足", _version_id(prepared, "CC-0001"), 2)
    assert labels["c06"][5:7] == (True, "dr_a") and labels["c06"][-1] == 1
    with Session(prepared) as session:
        [entry] = session.exec(select(AuditLog).where(AuditLog.entity == "label")).all()
        assert verify_chain(session).ok
    assert entry.action == "replace" and entry.entity_key == "CC-0001/model-a/c05/annotation/1"
    assert entry.before == {
        "met": True,
        "note": None,
        "annotator": "dr_a",
        "rubric_version_id": _version_id(prepared, "CC-0001"),
    }
    assert entry.after["met"] is False and entry.after["annotator"] == "dr_c"


def test_labels_follow_the_current_approved_rubric(prepared, tmp_path):
    record = case_record("CC-0001")
    for index, criterion in enumerate(record["rubrics"]):
        criterion["criterion_id"] = f"k{index + 1:02d}"
    import_file(prepared, "cases", write_jsonl(tmp_path / "cases-v2.jsonl", [record]))
    errors = refused(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", [label_record(criterion_id="c01")]))
    assert errors[0] == "labels.jsonl line 1: criterion_id 'c01' is not in the current rubric of case 'CC-0001'"
    import_file(prepared, "labels", write_jsonl(tmp_path / "labels-k.jsonl", [label_record(criterion_id="k01")]))
    assert _labels(prepared)[0][8] == _version_id(prepared, "CC-0001", version=2)


@pytest.mark.parametrize(
    "bad_record, expected",
    [
        (
            label_record(group=None),
            "labels.jsonl line 2: group is null: annotation labels belong to expert group 1 or 2",
        ),
        (
            {k: v for k, v in label_record(stage="check").items() if k != "group"},
            "labels.jsonl line 2: group is missing",
        ),
        (label_record(stage="adjudication", group=1), "labels.jsonl line 2: group must be null for an adjudication"),
        (label_record(group=3), "labels.jsonl line 2: group must be 1 or 2, found 3"),
        (label_record(group=True), "labels.jsonl line 2: group must be 1 or 2, found True"),
        (label_record(stage="review"), "labels.jsonl line 2: stage must be annotation, check or adjudication"),
        (label_record(stage=["check"]), "labels.jsonl line 2: stage must be annotation, check or adjudication"),
        (label_record(met="yes"), "labels.jsonl line 2: met must be true or false, found a string"),
        (label_record(met=1), "labels.jsonl line 2: met must be true or false, found a number"),
        (label_record(criterion_id="c99"), "labels.jsonl line 2: criterion_id 'c99' is not in the current rubric"),
        (label_record(case_id="CC-0404"), "labels.jsonl line 2: case_id 'CC-0404' is not a known case"),
        (label_record(model="model-z"), "labels.jsonl line 2: model 'model-z' has no response to case_id 'CC-0001'"),
        (
            label_record(case_id="CC-0003"),
            "labels.jsonl line 2: criterion_id 'c01': case 'CC-0003' has no approved rubric",
        ),
        (label_record(annotator=" "), "labels.jsonl line 2: annotator is blank"),
        (label_record(note=5), "labels.jsonl line 2: note must be a string, found a number"),
        (label_record(criterion_id=""), "labels.jsonl line 2: criterion_id is blank"),
        (
            label_record(criterion_id="c02", met=False),
            "labels.jsonl line 2: criterion_id 'c02': a second annotation label for case_id 'CC-0001', "
            "model 'model-a', group 1",
        ),
    ],
)
def test_bad_labels_are_refused(prepared, tmp_path, bad_record, expected):
    path = write_jsonl(
        tmp_path / "labels.jsonl",
        [label_record(criterion_id="c02"), bad_record, label_record(criterion_id="c03", annotator="new_person")],
    )
    errors = refused(prepared, "labels", path)
    assert errors[0].startswith(expected), errors


def test_bulk_load_over_several_chunks_then_a_bad_line_lands_nothing(prepared, tmp_path, monkeypatch):
    monkeypatch.setattr(importers.import_summary, "ROW_CHUNK", 40)
    monkeypatch.setattr(importers.import_summary, "BULK_ROWS", 20)
    rows = [
        label_record(case_id, m, f"c{i:02d}", met=i % 2 == 0, group=g, annotator=f"g{g}_reader")
        for case_id in ("CC-0001", "CC-0002")
        for m in MODELS
        for i in range(1, RUBRIC_SIZE + 1)
        for g in (1, 2)
    ]
    bad = label_record("CC-0002", "model-b", "c31")
    errors = refused(prepared, "labels", write_jsonl(tmp_path / "bad.jsonl", rows + [bad]))
    assert errors[0] == (
        f"labels.jsonl line {len(rows) + 1}: criterion_id 'c31' is not in the current rubric of case 'CC-0002'".replace(
            "labels.jsonl", "bad.jsonl"
        )
    )
    assert foreign_key_count(prepared, "label") == 3

    summary = import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert summary.inserted == len(rows) == 240
    assert summary.placeholders == ["g1_reader", "g2_reader"]
    assert len(_labels(prepared)) == 240
    assert foreign_key_count(prepared, "label") == 3, "the foreign keys are back after a bulk load"
    with prepared.connect() as connection:
        if prepared.dialect.name == "sqlite":
            assert connection.exec_driver_sql("PRAGMA cache_size").scalar() == -2000
    again = import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert again.unchanged == 240
    with Session(prepared) as session:
        label = session.exec(select(Label)).first()
    # timestamps written straight through the driver read back as aware UTC datetimes
    assert label.created_at.tzinfo is not None and label.updated_at == label.created_at
    assert abs((utcnow() - label.created_at).total_seconds()) < 600


def test_contacts_in_notes_are_reported(prepared, tmp_path):
    rows = [label_record(note="已电话联系家属 139 1234 5678")]
    summary = import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert summary.inserted == 1 and summary.warning_count == 1
    assert "labels.jsonl line 1: note contains a mobile phone number" in "\n".join(summary.lines())


def test_the_collector_pauses_while_an_import_reads_and_is_restored_after(prepared, tmp_path, monkeypatch):
    monkeypatch.setattr(importers.import_summary, "ROW_CHUNK", 40)
    rows = [
        label_record(case_id, m, f"c{i:02d}", group=1, annotator="dr_a")
        for case_id in ("CC-0001", "CC-0002")
        for m in MODELS
        for i in range(1, RUBRIC_SIZE + 1)
    ]
    collecting: list[bool] = []

    def progress(done, total, unit):
        if unit == "lines":
            collecting.append(gc.isenabled())

    assert gc.isenabled()
    import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows), progress=progress)
    assert collecting and not any(collecting), "the collector runs while the lines are read"
    assert gc.isenabled(), "the collector is back on after the import"

    bad = [*rows, label_record("CC-0002", "model-b", "c31")]
    refused(prepared, "labels", write_jsonl(tmp_path / "bad.jsonl", bad))
    assert gc.isenabled(), "a refused import leaves the collector on"

    gc.disable()
    try:
        import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
        assert not gc.isenabled(), "a collector the process had turned off stays off"
    finally:
        gc.enable()


def test_overlapping_imports_restore_the_collector_when_the_last_ends():
    first, second = collector_paused(), collector_paused()
    first.__enter__()
    second.__enter__()
    assert not gc.isenabled()
    first.__exit__(None, None, None)
    assert not gc.isenabled(), "the second import is still running"
    second.__exit__(None, None, None)
    assert gc.isenabled()
