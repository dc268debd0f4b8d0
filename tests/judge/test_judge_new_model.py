"""Evaluating a new model without physicians: responses imported, a judge run, judge-scored CACS beside the others.

The expected scores are counted by hand from the loopback server's fixed verdicts; the physician
scores of the other models from their labels.
"""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session, select

from analysis.loader import load_frames
from analysis.report import build_report, report_json, tables
from db.importers import import_file
from db.store.engine import session_scope
from db.store.models import Criterion, Response
from i18n import translate
from judge.runner import RunOptions, run_judge
from tests.support.apptest_helpers import open_page, signed_in, texts
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_label, make_response, make_user
from tools.llm_server import LLMServer, expected_met

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")

NEW = "新模型-v1"
N, K = 5, 2


def build_world(session: Session) -> None:
    """Two physician-scored models on three cases (both groups agree on every decision)."""
    g1, g2 = make_user(session, "a1", group_no=1), make_user(session, "a2", group_no=2)
    for c in range(1, 4):
        case = make_case(session, f"CC-{c:04d}", n=N)
        for model in ("model-a", "model-b"):
            response = make_response(session, case, model, text=f"{model} 的回答 {c}")
            for i in range(1, N + 1):
                met = (c + i + len(model)) % 3 != 0
                make_label(session, response, f"c{i:02d}", met, g1)
                make_label(session, response, f"c{i:02d}", met, g2)
    session.commit()


def import_new_model(engine, tmp_path) -> None:
    path = tmp_path / "new_responses.jsonl"
    rows = [{"case_id": f"CC-{c:04d}", "model": NEW, "response": f"新模型对病例 {c} 的回答。"} for c in range(1, 4)]
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    import_file(engine, "responses", path)


def expected_new_model(engine) -> dict[str, float]:
    with Session(engine) as session:
        responses = session.exec(select(Response).where(Response.model == NEW)).all()
        criteria = session.exec(select(Criterion)).all()
        values = []
        for response in responses:
            case_id = f"CC-{response.case_pk:04d}"
            texts_of = [c.text for c in criteria if c.text.startswith(case_id)]
            s = sum(expected_met(text, response.text) for text in texts_of)
            values.append((s / N, float(s >= K), sum(s >= level for level in range(K, N + 1)) / (N - K + 1)))
    return {
        "n_responses": len(values),
        "rubric_accuracy": sum(v[0] for v in values) / len(values),
        "pass_at_k": sum(v[1] for v in values) / len(values),
        "cacs_at_k": sum(v[2] for v in values) / len(values),
    }


@pytest.fixture
def evaluated(sqlite_engine, tmp_path):
    with Session(sqlite_engine) as session:
        build_world(session)
    import_new_model(sqlite_engine, tmp_path)
    with LLMServer() as server:
        summary = run_judge(
            sqlite_engine, RunOptions(base_url=server.url, model="judge-8b", judge="loopback", models=[NEW], timeout=10)
        )
        assert summary["items"] == summary["done"] == 3 * N and server.requests == 3 * N
    return sqlite_engine


def test_a_new_model_gets_judge_scored_figures_beside_the_physician_scored_ones(evaluated):
    expected = expected_new_model(evaluated)
    report = build_report(load_frames(evaluated), k=K, resamples=0, judge_scored="loopback")
    assert report.models.loc[NEW, "n_responses"] == 0  # no gold: physicians never saw it
    row = report.judge_scored.loc[NEW]
    assert row["scored_by"] == "judge:loopback"
    for key, value in expected.items():
        assert row[key] == pytest.approx(value, abs=1e-12), key
    models = tables(report)["models"].set_index("model")
    assert models.loc[NEW, "scored_by"] == "judge:loopback"
    assert models.loc["model-a", "scored_by"] == models.loc["model-b", "scored_by"] == "gold"
    assert models.loc[NEW, "cacs_at_k"] == pytest.approx(expected["cacs_at_k"], abs=1e-12)
    assert report_json(report)["judge_scored_models"][NEW]["cacs_at_k"] == pytest.approx(expected["cacs_at_k"])
    # physician-scored models are never replaced by the judge
    assert set(report.judge_scored.index) == {NEW}


def test_the_command_line_reports_the_judge_scored_model(evaluated, sqlite_url, monkeypatch, capsys, tmp_path):
    from cli.main import main

    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    assert main(["report", "--k", str(K), "--judge-scored", "loopback", "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "Models scored by judge:loopback (judge-scored, not physician-scored" in out and NEW in out
    saved = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert saved["judge_scored_models"][NEW]["scored_by"] == "judge:loopback"
    assert main(["report", "--k", str(K), "--judge-scored", "nobody"]) == 1
    assert "no judge decisions named 'nobody'" in capsys.readouterr().err


def test_the_dashboard_shows_the_new_model_marked_as_judge_scored(app_database, tmp_path):
    with Session(app_database) as session:
        build_world(session)
        make_user(session, "boss", "admin")
        session.commit()
    import_new_model(app_database, tmp_path)
    with LLMServer() as server:
        run_judge(app_database, RunOptions(base_url=server.url, model="judge-8b", judge="loopback", timeout=10))
    app = open_page(signed_in(app_database, "boss"), "analysis-dashboard")
    assert not app.exception, [e.value for e in app.exception]
    app.number_input(key="analysis_k").set_value(K).run()
    # No judge scores anything until the admin picks one, seeing its fidelity against gold beside it.
    assert app.selectbox(key="analysis_judge_scored").value is None
    unscored = app.dataframe[0].value.set_index("model")
    assert set(unscored["scored_by"]) == {"gold"} and unscored.loc[NEW, "n_responses"] == 0
    # Beside it, every (judge, model) pair that exists: the judge graded the new model, so it is listed there.
    pairs = [frame.value for frame in app.dataframe if "coverage" in frame.value.columns]
    assert len(pairs) == 1
    pairs = pairs[0]
    assert NEW in set(pairs[pairs.columns[1]]) and set(pairs[pairs.columns[0]]) == {"loopback"}
    choice = app.selectbox(key="analysis_judge_scored")
    assert any("loopback" in option and "金标准的宏 F1" in option for option in choice.options)
    choice.set_value("loopback").run()
    # the models tables (the thresholds' columns stand apart, in their own table)
    physicians, judged = [
        frame.value.set_index("model") for frame in app.dataframe if "scored_by" in frame.value.columns
    ]
    assert set(physicians.index) == {"model-a", "model-b"} and set(physicians["scored_by"]) == {"gold"}
    assert judged.index.tolist() == [NEW] and judged.loc[NEW, "scored_by"] == "judge:loopback"
    assert judged.loc[NEW, "cacs_at_k"] == pytest.approx(expected_new_model(app_database)["cacs_at_k"], abs=5e-4)
    assert not judged.isna().any().any()  # no column the judge leaves empty ("—" under CACS@1…)
    assert translate("analysis.table.models_judge_scored", "zh") in texts(app)
    # the judges section: the judge's fidelity against both groups (its decisions on model-a/b, which have labels)
    app.segmented_control(key="analysis_section").set_value("judges").run()
    judges = [frame.value for frame in app.dataframe if "mf1_group1" in frame.value.columns][0].set_index("judge")
    assert judges.loc["loopback", "n_decisions"] == 3 * 3 * N
    assert 0 <= judges.loc["loopback", "mf1_group1"] <= 1
    with session_scope(app_database, read_only=True) as session:
        assert session.exec(select(Response).where(Response.model == NEW)).all()
