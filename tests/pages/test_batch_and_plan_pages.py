"""The batch files on the judge runs page and the calibration plan on the new-model page, through AppTest.

The batch export is checked against the files it wrote and the run it recorded; the plan's figures against
`analysis.calibration_plan` on the grid of the same database (its formula is checked against scipy in
tests/analysis/test_calibration_plan.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import select

from analysis import calibration_plan
from analysis.grid import prepare
from analysis.loader import load_frames
from analysis.metrics import DEFAULT_K
from db.store.engine import session_scope
from db.store.models import JudgeRun
from demo import generator as demo
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in, texts
from tests.support.factories import make_case, make_response, make_user


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


@pytest.fixture
def studio(app_database):
    with session_scope(app_database) as session:
        make_user(session, "boss", "admin")
        for n in (1, 2, 3):
            case = make_case(session, f"CC-{n:04d}", n=4)
            make_response(session, case, model="model-a", text=f"回答 {n}")
            make_response(session, case, model="model-b", text=f"另一个回答 {n}")
    return app_database


def test_an_admin_exports_a_judge_batch_and_can_download_it(studio):
    app = open_page(signed_in(studio, "boss"), "admin-judge-runs")
    assert not app.exception and t("batch.page.none") in texts(app)
    app.text_input(key="batch_model").set_value("judge-8b")
    app.text_input(key="batch_name").set_value("offline-judge")
    app = button(app, t("batch.page.export")).click().run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    with session_scope(studio, read_only=True) as session:
        run = session.exec(select(JudgeRun)).one()
        run_id, params, status = run.id, dict(run.params), run.status
    assert status == "pending" and params["batch"]["requests"] == 3 * 4 * 2
    assert t("batch.page.exported", id=run_id, n=24, reasks=0) in texts(app)
    folder = Path(params["batch"]["dir"])
    lines = (folder / "requests.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 24 and json.loads(lines[0])["body"]["model"] == "judge-8b"
    assert json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["run"] == run_id
    # The batch is listed with its download; it is not followed as a live run (nothing to cancel or resume).
    app = open_page(signed_in(studio, "boss"), "admin-judge-runs")
    assert not app.exception
    assert t("judge.live.none") in texts(app)
    assert list(app.get("download_button")), "requests.jsonl can be downloaded"
    # Without a model name: refused in one line, nothing recorded.
    app.text_input(key="batch_model").set_value("")
    app = button(app, t("batch.page.export")).click().run()
    assert app.error and t("judge.message.no_model") in app.error[0].value
    with session_scope(studio, read_only=True) as session:
        assert len(session.exec(select(JudgeRun)).all()) == 1


@pytest.fixture
def demo_database(app_database, monkeypatch):
    monkeypatch.setenv(demo.PASSWORD_ENV, "demo-Test-pass-42")
    demo.build_demo(app_database, scale="small", seed=7)
    return app_database


def test_the_new_model_page_shows_the_calibration_plan(demo_database):
    grid = prepare(load_frames(demo_database))
    app = open_page(signed_in(demo_database, "admin"), "admin-new-model")
    app.selectbox(key="new_model_pick").set_value("model-gamma").run()
    app.number_input(key="new_model_plan_half_width").set_value(0.2).run()
    assert not app.exception, [e.value for e in app.exception]
    judge = app.selectbox(key="new_model_plan_judge").value
    expected = calibration_plan.plan(grid, judge, "model-gamma", DEFAULT_K, 0.2)
    metrics = {m.label: m.value for m in app.metric}
    assert metrics[t("plan.page.n")] == str(expected.n)
    assert metrics[t("plan.page.ppi")] == f"±{expected.half_width:.1%}"
    assert metrics[t("plan.page.classical")] == f"±{expected.classical_half_width:.1%}"
    assert metrics[t("plan.page.decisions")] == f"{expected.n * 30 * 2:,}"
    assert expected.reached and f"{expected.n} × 30" in texts(app)
