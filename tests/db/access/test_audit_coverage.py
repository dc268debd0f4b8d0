"""`audit verify` covers every row the rules read: labels' rubric versions, feedback rounds, adjudication
openings, calibration samples and their draw, disagreement draws, leaderboard snapshots and display names.

The small project of test_audit_proof is built through the real writers and given one of each; then each
row is changed by raw SQL the way someone with write access to the database but not the key would.
"""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from db.access import independence, users
from db.access.audit_digest import payload_hash
from db.importers import import_file
from db.rubrics.references import set_reference
from db.rules.anchors import text_sha256
from db.store.engine import session_scope
from db.store.models import CalibrationSample, Case, Response
from db.work import feedback
from db.work.calibration import draw_calibration_sample
from db.work.disagreements import draw_disagreements
from db.work.leaderboard import freeze_snapshot
from tests.db.access.test_audit_proof import N, _write_jsonl, build_project, execute, verify

REFERENCE = "先完善血常规与肝肾功能，再评估是否需要调整抗凝方案。"
PAYLOAD = {"k": 10, "n": N, "models": [{"model": "m-a", "cacs_at_k": 0.25, "ci_low": 0.1, "ci_high": 0.4}]}


@pytest.fixture
def project(engine, tmp_path):
    response_ids = build_project(engine, tmp_path)
    judged = [
        {"judge": judge, "case_id": "CC-0001", "model": model, "criterion_id": f"c{i:02d}", "met": (i + shift) % 4 == 0}
        for judge, shift in (("judge-x", 0), ("judge-y", 1))
        for model in ("m-a", "m-b")
        for i in range(1, N + 1)
    ]
    import_file(engine, "judge", _write_jsonl(tmp_path / "judge.jsonl", judged), actor="cli")
    with session_scope(engine) as s:
        boss = users.get_user(s, username="boss")
        (round_state,) = feedback.round_states(s, actor=boss)
        feedback.set_feedback_open(s, actor=boss, round_at=round_state.round_at, is_open=True)
        independence.open_adjudication(s, users.get_user(s, username="chk1"), response_ids["m-a"])
        draw_calibration_sample(s, actor=boss, model="m-a", n=1, seed=7)
        draw_disagreements(s, actor=boss, judges=["judge-x", "judge-y"], n=5)
        freeze_snapshot(s, actor=boss, name="2026-q1", payload=PAYLOAD)
        case_pk = s.exec(select(Case.id).where(Case.case_id == "CC-0001")).one()
        set_reference(s, boss, case_pk, REFERENCE)
    return engine, response_ids


def named_after(project, statement: str, **values) -> list[str]:
    engine, _ = project
    execute(engine, statement, **values)
    result = verify(engine)
    assert not result.ok
    return result.problems


def test_the_untampered_project_verifies_with_every_kind_counted(project):
    result = verify(project[0])
    assert result.ok, result.problems
    counts = result.replay.counts
    assert counts["feedback_rounds"] == 1 and counts["adjudication_openings"] == 1
    assert counts["calibration_samples"] == 1 and counts["disagreement_draws"] == 1
    assert counts["leaderboard_snapshots"] == 1 and counts["reference_answers"] == 1


def test_a_label_whose_rubric_version_was_cleared_is_named(project):
    problems = named_after(
        project,
        "UPDATE label SET rubric_version_id = NULL "
        "WHERE criterion_id = 'c05' AND stage = 'annotation' AND group_no = 2",
    )
    assert len(problems) == 2
    assert all(": rubric version: audit log says CC-0001 v1, database has none" in line for line in problems)


def test_a_deleted_feedback_round_is_named(project):
    problems = named_after(project, "DELETE FROM feedback_round")
    assert len(problems) == 1 and problems[0].startswith("feedback round ")
    assert problems[0].endswith("audit log says open, database has closed")


def test_a_feedback_round_closed_by_sql_is_named(project):
    problems = named_after(project, "UPDATE feedback_round SET is_open = :closed", closed=False)
    assert len(problems) == 1 and problems[0].endswith("audit log says open, database has closed")


def test_a_deleted_adjudication_opening_is_named(project):
    problems = named_after(project, "DELETE FROM adjudication_opening")
    assert len(problems) == 1
    assert problems[0].startswith("adjudication opening CC-0001/") and problems[0].endswith(
        "by chk1: in the audit log but not in the database"
    )


def test_a_swapped_calibration_sample_is_named(project):
    engine, response_ids = project
    with session_scope(engine, read_only=True) as s:
        (drawn,) = s.exec(select(CalibrationSample.response_id)).all()
    other = response_ids["m-b"] if drawn == response_ids["m-a"] else response_ids["m-a"]
    problems = named_after(project, "UPDATE calibration_sample SET response_id = :other", other=other)
    assert len(problems) == 1 and problems[0].startswith("calibration sample of m-a: audit log says seed 7, 1")


def test_a_calibration_seed_changed_is_named(project):
    problems = named_after(project, "UPDATE calibration_sample SET seed = 8")
    assert len(problems) == 1 and "audit log says seed 7" in problems[0] and "database has seed 8" in problems[0]


def test_a_deleted_disagreement_draw_is_named(project):
    engine, _ = project
    with session_scope(engine, read_only=True) as s:
        codes = set(s.exec(select(Response.code)).all())
    problems = named_after(project, "DELETE FROM disagreement_draw")
    assert problems and all(line.startswith("disagreement draw ") for line in problems)
    assert {line.split()[2].rstrip(":") for line in problems} <= codes


def test_an_edited_leaderboard_snapshot_is_named(project):
    changed = json.loads(json.dumps(PAYLOAD))
    changed["models"][0]["cacs_at_k"] = 0.99
    problems = named_after(project, "UPDATE leaderboard_snapshot SET payload = :p", p=json.dumps(changed))
    assert len(problems) == 1 and problems[0].startswith("leaderboard snapshot 2026-q1: audit log says payload sha256 ")
    assert payload_hash(PAYLOAD)[:16] in problems[0] and payload_hash(changed)[:16] in problems[0]


def test_a_deleted_leaderboard_snapshot_is_named(project):
    problems = named_after(project, "DELETE FROM leaderboard_snapshot")
    assert len(problems) == 1 and problems[0].endswith("database has absent")


def test_a_changed_display_name_is_named(project):
    problems = named_after(project, """UPDATE "user" SET display_name = '王主任' WHERE username = 'ann1'""")
    assert problems == ["user ann1: display_name: audit log says ann1, database has 王主任"]


def test_a_reference_answer_edited_by_sql_is_named(project):
    """The answer a validation run must see pass its rubric: changed in the table, it no longer matches its digest."""
    changed = REFERENCE + "（无需复查）"
    statement = "UPDATE reference_answer SET text = :t, sha256 = :h"
    problems = named_after(project, statement, t=changed, h=text_sha256(changed))
    logged, stored = (f"sha256 {text_sha256(text)[:12]}… ({len(text)} characters)" for text in (REFERENCE, changed))
    assert problems == [f"reference answer CC-0001: audit log says {logged}, database has {stored}"]


def test_a_deleted_reference_answer_is_named(project):
    problems = named_after(project, "DELETE FROM reference_answer")
    assert len(problems) == 1 and problems[0].startswith("reference answer CC-0001:")
    assert problems[0].endswith("database has absent")
