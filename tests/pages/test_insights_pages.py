"""The criterion-reliability and judge-error pages through Streamlit's AppTest: admins only, flagged criteria
worst first with their text, sending criteria back, and the judge's errors with its explanation."""

from __future__ import annotations

import pytest
from sklearn.metrics import f1_score
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest

from db.access.export_records import record_export
from db.rules.enums import RubricStatus
from db.store.engine import session_scope
from db.store.models import Criterion, JudgeDecision, RubricVersion
from i18n import translate
from tests.support.apptest_helpers import open_page, sign_in_token, signed_in, texts
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_label, make_response, make_user

# Nobody checks these labels: the pages' figures are read on the provisional basis (§4 as written); the final
# basis on these pages has tests of its own (tests/pages/test_insights_basis_pages.py).
pytestmark = pytest.mark.usefixtures("provisional_basis")

# 11 models on one case of 4 criteria: c01 the groups read differently (4 of 11 differ), c03 nobody meets.
COLUMNS = {
    "c01": ([1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0]),
    "c02": ([1, 0] * 5 + [1], [1, 0] * 5 + [1]),
    "c03": ([0] * 11, [0] * 11),
    "c04": ([1] * 6 + [0] * 5, [1] * 6 + [0] * 5),
}


@pytest.fixture
def insight_data(app_database):
    with Session(app_database, expire_on_commit=False) as session:
        g1, g2 = make_user(session, "ann-1", group_no=1), make_user(session, "ann-2", group_no=2)
        make_user(session, "boss", role="admin")
        make_user(session, "chk-1", role="checker", group_no=1)
        make_user(session, "author", group_no=1)
        case = make_case(session, "CC-0001", n=4)
        make_case(session, "CC-0002", n=4)
        for i in range(11):
            response = make_response(session, case, f"model-{i:02d}", f"第 {i} 个回答")
            for criterion, (first, second) in COLUMNS.items():
                make_label(session, response, criterion, bool(first[i]), g1)
                make_label(session, response, criterion, bool(second[i]), g2)
                said = bool(first[i]) if criterion != "c04" else not first[i]  # the judge inverts c04
                session.add(
                    JudgeDecision(
                        judge="jx",
                        response_id=response.id,
                        criterion_id=criterion,
                        met=said,
                        extra={"explanation": f"判定理由 {i}-{criterion}"},
                    )
                )
        session.commit()
    return app_database


def test_criteria_page_lists_flagged_criteria_worst_first(insight_data):
    app = open_page(signed_in(insight_data, "boss", lang="en"), "analysis-criteria")
    assert not app.exception
    assert app.title[0].value == translate("insights.criteria.title", "en")
    flagged = app.dataframe[0].value
    assert flagged["criterion_id"].tolist() == ["c01", "c03"]
    assert flagged["text"].tolist() == ["CC-0001 的第 1 条评分标准", "CC-0001 的第 3 条评分标准"]
    assert flagged["flag_name"].tolist() == [translate("insights.flag.unreliable", "en"), "Never met"]
    assert [m.value for m in app.metric][:4] == ["4", "1", "1", "0"]
    assert len(app.get("plotly_chart")) == 1
    # the suggested comments carry the numbers
    comment = app.text_area(key="insights_comment_CC-0001_c01").value
    assert "4 of 11" in comment and "κ = 0.27" in comment


def test_sending_criteria_back_from_the_page(insight_data):
    app = open_page(signed_in(insight_data, "boss", lang="zh"), "analysis-criteria")
    assert app.title[0].value == translate("insights.criteria.title", "zh")
    app.text_area(key="insights_comment_CC-0001_c03").set_value("")  # keep c03 as it is
    app.text_input(key="insights_author_CC-0001").set_value("author")
    app.button[0].click().run()  # the form's submit button
    assert not app.exception
    assert any("第 2 版已交给 author" in s.value for s in app.success), texts(app)
    with Session(insight_data) as session:
        returned = session.exec(select(RubricVersion).where(RubricVersion.status == RubricStatus.returned)).one()
        comments = {
            c.criterion_id: c.review_comment
            for c in session.exec(select(Criterion).where(Criterion.rubric_version_id == returned.id))
        }
    assert comments["c01"].startswith("两组专家对本条的理解不一致") and comments["c03"] is None
    app.run()
    assert translate("insights.send_back.open", "zh", version=2, status="returned") in texts(app)


def test_judge_error_page_shows_the_errors_and_the_explanation(insight_data):
    app = open_page(signed_in(insight_data, "boss", lang="en"), "analysis-judge-errors")
    assert not app.exception
    assert app.title[0].value == translate("insights.judges.title", "en")
    assert "Human ceiling" in texts(app)
    errors = app.dataframe[2].value  # after the ranking table and the per-model table
    # c04 inverted: the judge says met where gold says not met on models 06..10 (false positives)
    assert set(errors["criterion_id"]) == {"c04"} and len(errors) == 5
    assert errors["model"].tolist() == [f"model-{i:02d}" for i in range(6, 11)]
    assert "判定理由 6-c04" in texts(app)
    app.radio(key="insights_kind").set_value("false_negative").run()
    assert len(app.dataframe[2].value) == 6
    app.selectbox(key="insights_error_row").set_value(2).run()
    assert "判定理由 2-c04" in texts(app) and "第 2 个回答" in texts(app)


def test_judge_ranking_defaults_to_the_newest_sft_exports_heldout_models(insight_data):
    with session_scope(insight_data) as session:
        record_export(session, actor="boss", kind="sft", details={"holdout_models": ["model-01"]})
        record_export(session, actor="boss", kind="sft", details={"holdout_models": ["model-02", "model-09", "gone"]})
    app = open_page(signed_in(insight_data, "boss", lang="zh"), "analysis-judge-errors")
    assert not app.exception
    assert app.multiselect(key="insights_heldout").value == ["model-02", "model-09"]
    assert translate("insights.ranking.from_sft", "zh", models="model-02, model-09") in texts(app)
    ranking = app.dataframe[0].value
    # the judge on the held-out models (gold complete: 4 of the 11 lack gold on c01), the physicians on all
    assert ranking["n_models"].tolist() == [2, 11]
    assert ranking["judge"].tolist() == ["jx", translate("insights.ranking.ceiling", "zh")]
    app.multiselect(key="insights_heldout").set_value([]).run()
    assert app.dataframe[0].value["n_models"].tolist() == [7, 11]


def test_physician_page_shows_each_annotator_and_the_slices(insight_data):
    app = open_page(signed_in(insight_data, "boss", lang="en"), "analysis-physicians")
    assert not app.exception
    assert app.title[0].value == translate("insights.physicians.title", "en")
    annotators = app.dataframe[0].value.set_index("username")
    # each annotator against the other group: group 1 differs from group 2 on 4 decisions of c01
    g1 = [v for c in COLUMNS.values() for v in c[0]]
    g2 = [v for c in COLUMNS.values() for v in c[1]]
    assert annotators.loc["ann-1", "pooled_mf1"] == pytest.approx(f1_score(g2, g1, average="macro"))
    assert annotators.loc["ann-1", "n_decisions"] == 44
    app.selectbox(key="insights_agreement_dimension").set_value("difficulty").run()
    slices = app.dataframe[1].value
    assert slices["value"].tolist() == ["medium"] and slices["n_aligned"].tolist() == [11]
    assert len(app.get("plotly_chart")) == 3


PAGES = {
    "analysis-criteria": "render_criteria",
    "analysis-judge-errors": "render_judge_errors",
    "analysis-physicians": "render_physicians",
}


@pytest.mark.parametrize("page", list(PAGES))
def test_pages_refuse_everyone_but_admins(insight_data, page):
    function = PAGES[page]
    for username in ("chk-1", "ann-1", None):
        app = AppTest.from_string(
            f"from dashboards.insight_pages import {function}\n{function}()\n", default_timeout=60
        )
        if username:
            app.session_state["token"] = sign_in_token(insight_data, username)
        app.run()
        assert [e.value for e in app.error] == [translate("error.permission", "zh")]
        assert not app.dataframe and not app.title


def test_pages_are_in_the_navigation_of_admins_only(insight_data):
    from dashboards.insight_pages import pages
    from db.access import users

    with Session(insight_data) as session:
        roles = {name: users.get_user(session, username=name) for name in ("boss", "chk-1", "ann-1")}
    assert [section for section, _ in pages(roles["boss"])] == ["nav.section.analysis"] * 3
    assert pages(roles["chk-1"]) == [] and pages(roles["ann-1"]) == []
