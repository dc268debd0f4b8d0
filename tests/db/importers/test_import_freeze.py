"""An admin's label import meets the feedback freeze (docs/REFERENCE.md §1): a file that would create or change
annotation labels of a round whose feedback was opened is refused with one line naming the round, and changes
nothing; with `override_freeze` (`--override-freeze`, the import page's option) it lands, audited, and the
feedback page's reader lists it. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlmodel import select

from db.access.audit import verify_chain
from db.importers import ImportFailed, import_file
from db.rules.errors import PermissionDenied
from db.store.engine import session_scope
from db.store.models import AuditLog, User
from db.work.freeze_overrides import freeze_overrides
from tests.db.labeling.test_final_labels import _labels, _round_of_a, _set_open, world  # noqa: F401  (fixture)
from tests.support.import_samples import label_record, write_jsonl


def _file(tmp_path, *records):
    return write_jsonl(tmp_path / "labels.jsonl", records)


def _round_time(engine, ids) -> str:
    return _round_of_a(engine, ids).round_at.strftime("%Y-%m-%d %H:%M:%S")


def test_an_import_changing_a_frozen_label_is_refused_naming_the_round(engine, world, tmp_path):  # noqa: F811
    _set_open(engine, world, True)
    before = _labels(engine, world["A"], 1)
    path = _file(
        tmp_path,
        label_record("CC-0002", "model-b", "c01", False, annotator="ann1"),  # round 2: feedback not opened
        label_record("CC-0001", "model-a", "c01", False, annotator="ann1"),  # round 1: final
        label_record("CC-0001", "model-a", "c02", True, annotator="ann1"),
    )
    with pytest.raises(ImportFailed) as failure:
        import_file(engine, "labels", path, actor="admin")
    assert len(failure.value.errors) == 1
    [line] = failure.value.errors
    assert "line 2" in line and _round_time(engine, world) in line and "--override-freeze" in line
    assert "CC-0001" in line and "model-a" in line
    # nothing landed, not even the round-2 row before it
    assert _labels(engine, world["A"], 1) == before
    assert _labels(engine, world["B"], 1) == {"c01": True, "c02": True, "c03": True}


def test_a_new_annotation_label_in_a_frozen_round_is_refused_too_and_other_stages_pass(engine, world, tmp_path):  # noqa: F811
    _set_open(engine, world, True)
    with session_scope(engine) as s:  # group 2's c03 label on A, removed: the file would add it back
        from db.store.models import Label

        label = s.exec(
            select(Label).where(Label.response_id == world["A"], Label.group_no == 2, Label.criterion_id == "c03")
        ).one()
        s.delete(label)
    with pytest.raises(ImportFailed, match="final since the feedback"):
        import_file(
            engine,
            "labels",
            _file(tmp_path, label_record("CC-0001", "model-a", "c03", True, group=2, annotator="ann2")),
        )
    # a check label of the frozen round is not an annotation label: the freeze does not apply
    summary = import_file(
        engine,
        "labels",
        _file(tmp_path, label_record("CC-0001", "model-a", "c01", True, stage="check", annotator="chk1")),
    )
    assert summary.inserted == 1


def test_an_unchanged_frozen_label_imports_as_unchanged(engine, world, tmp_path):  # noqa: F811
    _set_open(engine, world, True)
    summary = import_file(
        engine, "labels", _file(tmp_path, label_record("CC-0001", "model-a", "c01", True, annotator="ann1"))
    )
    assert summary.unchanged == 1 and summary.replaced == 0


def test_override_freeze_lands_audited_and_the_feedback_page_lists_it(engine, world, tmp_path):  # noqa: F811
    _set_open(engine, world, True)
    path = _file(
        tmp_path,
        label_record("CC-0001", "model-a", "c01", False, annotator="ann1"),
        label_record("CC-0001", "model-a", "c02", True, annotator="ann1"),
    )
    summary = import_file(engine, "labels", path, actor="admin", override_freeze=True)
    assert summary.replaced == 2
    assert _labels(engine, world["A"], 1) == {"c01": False, "c02": True, "c03": True}
    round_at = _round_of_a(engine, world).round_at
    with session_scope(engine, read_only=True) as s:
        [entry] = s.exec(select(AuditLog).where(AuditLog.action == "override_freeze")).all()
        assert entry.actor == "admin" and entry.entity_key == "labels.jsonl"
        [override] = freeze_overrides(s, actor=s.get(User, world["admin"]))
        assert override.actor == "admin" and override.source == "labels.jsonl"
        [(at, n)] = override.rounds.items()
        assert n == 2 and at.replace(tzinfo=None) == round_at.replace(tzinfo=None)
        # only admins read them
        with pytest.raises(PermissionDenied):
            freeze_overrides(s, actor=s.get(User, world["chk1"]))


def test_the_command_line_refuses_then_overrides_with_the_flag(
    engine,
    world,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
    database_url,
):
    from cli.main import main
    from db.store.engine import get_engine

    _set_open(engine, world, True)
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()
    try:
        path = str(_file(tmp_path, label_record("CC-0001", "model-a", "c01", False, annotator="ann1")))
        assert main(["import", "labels", path]) != 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and _round_time(engine, world) in err[0] and "Traceback" not in err[0]
        assert _labels(engine, world["A"], 1)["c01"] is True
        assert main(["import", "labels", path, "--override-freeze"]) == 0
        assert _labels(engine, world["A"], 1)["c01"] is False
        # the override's entry is on the keyed chain with the rest of the log
        with session_scope(engine, read_only=True) as s:
            assert verify_chain(s).ok
    finally:
        get_engine().dispose()
        get_engine.cache_clear()
