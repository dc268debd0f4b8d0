"""The analysis dashboard through Streamlit's AppTest: who may open it, what it shows, filters."""

from __future__ import annotations

import pytest
from sqlmodel import Session
from streamlit.testing.v1 import AppTest

from i18n import translate
from tests.analysis.test_report import populate_small_database
from tests.support.apptest_helpers import open_page, sign_in_token, signed_in, texts
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_user

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")

PAGE = "analysis-dashboard"


@pytest.fixture
def dashboard_data(app_database):
    with Session(app_database, expire_on_commit=False) as session:
        populate_small_database(session)
        make_user(session, "boss", role="admin")
        make_user(session, "ann-9", group_no=1)
        session.commit()
    return app_database


def _models_table(app) -> list[str]:
    return app.dataframe[0].value["model"].tolist()


def test_dashboard_renders_for_admins(dashboard_data):
    app = open_page(signed_in(dashboard_data, "boss", lang="en"), PAGE)
    assert not app.exception
    assert app.title[0].value == translate("analysis.nav", "en")
    assert _models_table(app) == ["model-a", "model-b"]
    # one section at a time: the models section first, each of the others on choosing it
    charts = len(app.get("plotly_chart"))
    assert translate("analysis.table.agreement", "en") not in texts(app)
    for section in ("agreement", "judges", "slices", "diagnostics"):
        app.segmented_control(key="analysis_section").set_value(section).run()
        assert not app.exception
        charts += len(app.get("plotly_chart"))
        if section == "agreement":
            assert translate("analysis.table.agreement", "en") in texts(app)
    assert charts >= 10


def test_dashboard_filters_and_label_source(dashboard_data):
    app = open_page(signed_in(dashboard_data, "boss", lang="en"), PAGE)
    app.multiselect(key="analysis_models").set_value(["model-b"]).run()
    assert _models_table(app) == ["model-b"]
    app.number_input(key="analysis_k").set_value(1).run()
    models = app.dataframe[0].value
    assert models.loc[models["model"] == "model-b", "cacs_at_k"].item() == pytest.approx(1 / 6, abs=5e-4)
    app.multiselect(key="analysis_models").set_value([]).run()
    app.selectbox(key="analysis_source").set_value("judge:jx").run()
    models = app.dataframe[0].value.set_index("model")
    assert models.loc["model-b", "n_responses"] == 1 and models.loc["model-b", "rubric_accuracy"] == pytest.approx(
        1 / 3, abs=5e-4
    )
    app.multiselect(key="analysis_difficulty").set_value(["high"]).run()
    assert not app.exception
    assert _models_table(app) == ["model-a", "model-b"] and app.dataframe[0].value["n_responses"].sum() == 0


def test_dashboard_refuses_checkers_annotators_and_strangers(dashboard_data):
    # Model names, per-group sources and per-group statistics are for admins only (docs/REFERENCE.md §1).
    for username in ("chk-1", "ann-9", None):
        app = AppTest.from_string("from dashboards.dashboard import render\nrender()\n", default_timeout=60)
        if username:
            app.session_state["token"] = sign_in_token(dashboard_data, username)
        app.run()
        assert [e.value for e in app.error] == [translate("error.permission", "zh")]
        assert not app.dataframe and not app.title


def test_dashboard_is_in_the_navigation_of_admins_only(dashboard_data):
    from dashboards.dashboard import pages
    from db.access import users

    with Session(dashboard_data) as session:
        roles = {name: users.get_user(session, username=name) for name in ("boss", "chk-1", "ann-9")}
    assert [section for section, _ in pages(roles["boss"])] == ["nav.section.analysis"]
    assert pages(roles["chk-1"]) == []
    assert pages(roles["ann-9"]) == []


def test_dashboard_scores_section_shows_leaderboard_pairs_and_the_planner(dashboard_data):
    from db.access.users import get_user
    from db.work.calibration import draw_calibration_sample

    app = open_page(signed_in(dashboard_data, "boss", lang="zh"), PAGE)
    app.segmented_control(key="analysis_section").set_value("scores").run()
    assert not app.exception
    assert len(app.get("plotly_chart")) == 2  # leaderboard and pairwise matrix; no sample yet
    assert translate("analysis.no_calibration", "zh") in texts(app)
    with Session(dashboard_data) as session:  # audited, so the data version moves and the page redraws
        draw_calibration_sample(session, actor=get_user(session, username="boss"), model="model-b", n=2)
        session.commit()
    app = open_page(signed_in(dashboard_data, "boss", lang="zh"), PAGE)
    app.segmented_control(key="analysis_section").set_value("scores").run()
    assert not app.exception
    assert len(app.get("plotly_chart")) == 3
    assert translate("analysis.table.sample_size", "zh") in texts(app)


def test_rates_reach_the_browser_rounded_not_cut():
    # The browser's number column cuts at its step: 0.6666… was drawn as 66.6%.
    import pandas as pd

    from ui import table_view

    frame = pd.DataFrame({"model": ["a", "b"], "cacs_at_k": [2 / 3, 0.0005], "n_responses": [3, 7]})
    sent = table_view.sent_frame(frame, frame.columns)
    assert sent["cacs_at_k"].tolist() == [0.667, 0.001] and sent["n_responses"].tolist() == [3, 7]
    assert frame["cacs_at_k"][0] == 2 / 3  # the frame (and its CSV) keeps the exact value


def test_judges_by_model_heatmap_shows_a_dash_for_nothing_on_a_full_scale_in_the_model_order():
    from types import SimpleNamespace

    import pandas as pd

    from analysis import figures

    frame = pd.DataFrame(
        {"judge": ["j1", "j1", "j2"], "model": ["model-b", "model-a", "model-b"], "mf1_gold": [0.52, 0.55, 0.61]}
    )
    t = figures.translator("zh")
    heatmap = figures.judges_by_model_heatmap(SimpleNamespace(judges_by_model=frame), t, ["model-a", "model-b"]).data[0]
    assert list(heatmap.x) == ["model-a", "model-b"]
    cells = [cell for row in heatmap.text for cell in row]
    assert "—" in cells and not any("nan" in str(cell).lower() for cell in cells)
    assert (heatmap.zmin, heatmap.zmax) == (0, 1)
    assert "MF1" not in str(heatmap.colorbar.title.text)


def test_the_kappa_histogram_counts_criteria_in_whole_ticks():
    from types import SimpleNamespace

    import pandas as pd

    from analysis import figures

    criteria = pd.DataFrame({"kappa": [0.2, 0.5, 0.9], "n_aligned": [50, 50, 50], "flag": ["", "", ""]})
    figure = figures.kappa_distribution(SimpleNamespace(criteria=criteria), figures.translator("en"))
    assert figure.layout.yaxis.dtick == 1 and figure.layout.yaxis.tickformat == ",d"


def test_the_pairwise_matrix_lists_the_cases_behind_a_comparison(dashboard_data):
    from analysis.loader import load_frames
    from analysis.report import build_report

    app = open_page(signed_in(dashboard_data, "boss", lang="en"), PAGE)
    app.segmented_control(key="analysis_section").set_value("scores").run()
    assert not app.exception
    report = build_report(load_frames(dashboard_data), k=1, resamples=0, insights=False)
    models = report.grid.models
    assert app.selectbox(key="pair_a").value == models[0] and app.selectbox(key="pair_b").value == models[1]
    app.selectbox(key="pair_a").set_value(models[1]).run()
    app.selectbox(key="pair_b").set_value(models[0]).run()
    shown = app.dataframe[-1].value
    assert list(shown.columns) == ["case_id", models[1], models[0], "diff"]
    assert (shown[models[1]] - shown[models[0]]).tolist() == pytest.approx(shown["diff"].tolist(), abs=1e-3)
    assert shown["diff"].abs().is_monotonic_decreasing
    app.selectbox(key="pair_b").set_value(models[1]).run()
    assert translate("analysis.pair.same", "en") in texts(app)
