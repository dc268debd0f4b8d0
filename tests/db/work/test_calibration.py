"""Calibration samples (db/work/calibration.py, `assign calibration`) and the calibrated scores of report.json,
on both databases; values against `ppi_py` from a literal reading of §4's L, U and Y."""

from __future__ import annotations

import json

import numpy as np
import ppi_py
import pytest
from sqlmodel import func, select

from analysis.exports.sft import export_sft
from analysis.loader import load_frames
from analysis.report import build_report, report_json
from cli.main import main
from db.rules.enums import AssignmentKind, RubricStatus, Stage
from db.rules.errors import PermissionDenied, ValidationFailed
from db.store.engine import get_engine, session_scope
from db.store.models import Assignment, AuditLog, CalibrationSample, JudgeDecision, Response
from db.work.calibration import draw_calibration_sample
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_label, make_response, make_user

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")

N, K = 3, 2
MODEL = "new-model"


def _plan(case: int) -> tuple[list[int], list[int]]:
    """Gold and judge decisions of the new model's response to case `case` (judge wrong on a few)."""
    rng = np.random.default_rng(case)
    gold = (rng.random(N) < 0.6).astype(int).tolist()
    judge = [1 - met if rng.random() < 0.2 else met for met in gold]
    return gold, judge


@pytest.fixture
def calibration_db(engine, session):
    """16 cases (N = 3) with responses of two models, one case without an approved rubric; a judge on all of
    the new model's responses; two annotators per group and an admin."""
    make_user(session, "boss", "admin")
    for group in (1, 2):
        for i in (1, 2):
            make_user(session, f"g{group}a{i}", "annotator", group)
    for number in range(1, 17):
        status = RubricStatus.submitted if number == 16 else RubricStatus.approved
        case = make_case(session, f"CC-{number:04d}", n=N, status=status)
        response = make_response(session, case, MODEL, f"回答{number}")
        make_response(session, case, "old-model", f"旧回答{number}")
        for position, met in enumerate(_plan(number)[1], start=1):
            session.add(
                JudgeDecision(judge="jx", response_id=response.id, criterion_id=f"c{position:02d}", met=bool(met))
            )
    session.commit()
    return engine


def _admin(session):
    from db.access.users import get_user

    return get_user(session, username="boss")


def test_a_sample_is_drawn_once_assigned_to_both_groups_and_audited(calibration_db):
    with session_scope(calibration_db) as session:
        draw = draw_calibration_sample(session, actor=_admin(session), model=MODEL, n=12, seed=1)
    assert len(draw.response_ids) == 12 == len(set(draw.response_ids))
    assert "CC-0016" not in draw.case_ids  # its rubric is not approved
    with session_scope(calibration_db, read_only=True) as session:
        rows = session.exec(select(CalibrationSample)).all()
        assert sorted(row.response_id for row in rows) == draw.response_ids
        assert {(row.model, row.seed, row.drawn_by) for row in rows} == {(MODEL, 1, "boss")}
        models = session.exec(select(Response.model).where(Response.id.in_(draw.response_ids))).all()
        assert set(models) == {MODEL}
        assigned = session.exec(
            select(Assignment.response_id, Assignment.group_no).where(Assignment.kind == AssignmentKind.label)
        ).all()
        assert sorted(assigned) == sorted((r, g) for r in draw.response_ids for g in (1, 2))
        entry = session.exec(select(AuditLog).where(AuditLog.entity == "calibration_sample")).one()
        assert entry.entity_key == MODEL and entry.after["seed"] == 1 and len(entry.after["responses"]) == 12
    # the same seed draws the same sample; a second draw for the model is refused and changes nothing
    with session_scope(calibration_db) as session, pytest.raises(ValidationFailed, match="already has"):
        draw_calibration_sample(session, actor=_admin(session), model=MODEL, n=5, seed=2)
    with session_scope(calibration_db, read_only=True) as session:
        assert session.exec(select(func.count()).select_from(CalibrationSample)).one() == 12
        assert session.exec(select(func.count()).select_from(Assignment)).one() == 24


def test_only_an_admin_draws_and_bad_sizes_are_refused(calibration_db):
    with session_scope(calibration_db) as session:
        from db.access.users import get_user

        with pytest.raises(PermissionDenied):
            draw_calibration_sample(session, actor=get_user(session, username="g1a1"), model=MODEL, n=3)
        with pytest.raises(ValidationFailed, match="fewer than"):
            draw_calibration_sample(session, actor=_admin(session), model=MODEL, n=16)
        with pytest.raises(ValidationFailed):
            draw_calibration_sample(session, actor=_admin(session), model=MODEL, n=0)
    with session_scope(calibration_db, read_only=True) as session:
        assert session.exec(select(func.count()).select_from(CalibrationSample)).one() == 0
        assert session.exec(select(func.count()).select_from(AuditLog)).one() == 0


def _label_sample(engine, response_ids: list[int], leave_pending: int) -> None:
    """Both groups label the sampled responses as the plan's gold and both groups' checkers confirm them (final
    gold: the only gold a calibrated score reads), except the last `leave_pending`."""
    with session_scope(engine) as session:
        from db.access.users import get_user

        g1, g2 = get_user(session, username="g1a1"), get_user(session, username="g2a1")
        checkers = [
            get_user(session, username=f"chk{g}") or make_user(session, f"chk{g}", "checker", g) for g in (1, 2)
        ]
        responses = {r.id: r for r in session.exec(select(Response).where(Response.id.in_(response_ids))).all()}
        case_number = {r.id: int(r.text.removeprefix("回答")) for r in responses.values()}
        for response_id in response_ids[: len(response_ids) - leave_pending]:
            for position, met in enumerate(_plan(case_number[response_id])[0], start=1):
                for user in (g1, g2):
                    make_label(session, responses[response_id], f"c{position:02d}", bool(met), user)
                for checker in checkers:
                    make_label(
                        session, responses[response_id], f"c{position:02d}", bool(met), checker, stage=Stage.check
                    )


def _cacs(mets: list[int]) -> float:
    s = sum(mets)
    return (s - K + 1) / (N - K + 1) if s >= K else 0.0


def test_report_gives_the_ppi_estimate_of_the_sampled_model(calibration_db):
    with session_scope(calibration_db) as session:
        draw = draw_calibration_sample(session, actor=_admin(session), model=MODEL, n=12, seed=1)
    _label_sample(calibration_db, draw.response_ids, leave_pending=1)
    document = report_json(build_report(load_frames(calibration_db), k=K, resamples=0, insights=False))
    assert document["calibration_samples"] == {MODEL: sorted(draw.case_ids)}  # case order is CC-0001, …
    entry = document["calibrated"]["jx"][MODEL]
    # L: 11 labeled and judged; U: the 3 judged responses outside the sample (their gold is not needed;
    # CC-0016 has no approved rubric, so no decision on it counts); 1 sampled response still pending
    assert (entry["n_labeled"], entry["n_unlabeled"], entry["n_pending"]) == (11, 3, 1)
    numbers = {int(case_id[3:]) for case_id in draw.case_ids}
    with session_scope(calibration_db, read_only=True) as session:
        texts = dict(session.exec(select(Response.id, Response.text).where(Response.model == MODEL)).all())
    labeled = [int(texts[r].removeprefix("回答")) for r in draw.response_ids[:11]]
    unlabeled = [number for number in range(1, 16) if number not in numbers]
    for metric, score in (("cacs_at_k", _cacs), ("rubric_accuracy", lambda mets: sum(mets) / N)):
        y = np.array([score(_plan(c)[0]) for c in labeled])
        yhat = np.array([score(_plan(c)[1]) for c in labeled])
        yhat_u = np.array([score(_plan(c)[1]) for c in unlabeled])
        estimate = float(np.clip(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u), 0, 1)[0])
        low, high = (float(np.clip(v, 0, 1)[0]) for v in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05))
        c_low, c_high = (float(np.clip(v, 0, 1)[0]) for v in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=0))
        values = entry[metric]
        assert values["estimate"] == pytest.approx(estimate, abs=1e-9)
        assert (values["ci_low"], values["ci_high"]) == pytest.approx((low, high), abs=1e-9)
        assert (values["classical_low"], values["classical_high"]) == pytest.approx((c_low, c_high), abs=1e-9)
        assert values["judge_only"] == pytest.approx(np.mean(np.r_[yhat, yhat_u]), abs=1e-12)
    # held out: only the old model's responses, which have no sample
    held = report_json(
        build_report(load_frames(calibration_db), k=K, resamples=0, insights=False, heldout_models=["old-model"])
    )
    assert held["heldout_models"] == ["old-model"] and held["calibrated"] == {"jx": {}}
    assert held["judges"]["jx"]["n_decisions"] == 0


def test_sft_export_leaves_the_calibration_sample_out_unless_asked(calibration_db, tmp_path):
    with session_scope(calibration_db) as session:
        draw = draw_calibration_sample(session, actor=_admin(session), model=MODEL, n=12, seed=1)
    _label_sample(calibration_db, draw.response_ids, leave_pending=0)
    export_sft(calibration_db, tmp_path / "out", dev_fraction=0.0)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["options"]["include_calibration"] is False
    assert manifest["counts"]["calibration_sample_rows"] == {"found": 36, "included": False}
    assert manifest["counts"]["rows"]["train.jsonl"] == 0  # every gold decision is on a sampled response
    export_sft(calibration_db, tmp_path / "all", dev_fraction=0.0, include_calibration=True)
    manifest = json.loads((tmp_path / "all" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["options"]["include_calibration"] is True and manifest["counts"]["rows"]["train.jsonl"] == 36


def test_command_line_draws_once_and_refuses_a_second_draw_in_one_line(
    calibration_db, database_url, monkeypatch, capsys
):
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()
    try:
        assert main(["assign", "calibration", "--model", MODEL, "--n", "6", "--seed", "3"]) == 0
        assert "calibration sample of new-model: 6 responses (seed 3)" in capsys.readouterr().out
        assert main(["assign", "calibration", "--model", MODEL, "--n", "6"]) == 1
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1 and "already has a calibration sample" in error
        assert main(["assign", "calibration", "--model", "unknown", "--n", "6"]) == 1
        assert "no responses" in capsys.readouterr().err
    finally:
        get_engine.cache_clear()
    with session_scope(calibration_db, read_only=True) as session:
        assert session.exec(select(func.count()).select_from(CalibrationSample)).one() == 6
        assert session.exec(select(AuditLog.actor).where(AuditLog.entity == "calibration_sample")).all() == ["@cli"]
