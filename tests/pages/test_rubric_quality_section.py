"""The dashboard's rubric quality section and Figure 6 (docs/REFERENCE.md §4.2) through AppTest, on the small demo.

The flag counts shown are compared with report.json's `rubric_validity` built straight from the database."""

from __future__ import annotations

import pytest

from analysis.grid import prepare
from analysis.loader import load_frames
from analysis.rubric_quality import cases_below_k
from analysis.validity_section import load_validity
from demo import generator as demo
from i18n import translate
from tests.support.apptest_helpers import open_page, signed_in, texts

PAGE = "analysis-dashboard"


@pytest.fixture
def demo_database(app_database):
    demo.build_demo(app_database, scale="small", seed=7)
    return app_database


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_section_lists_cases_below_k_flags_and_draws_figure6(demo_database, lang):
    grid = prepare(load_frames(demo_database))
    validity = load_validity(demo_database, grid, 10)
    below = cases_below_k(validity, 10)
    assert below
    app = open_page(signed_in(demo_database, "admin", lang=lang), PAGE)
    assert not app.exception
    app.segmented_control(key="analysis_section").set_value("rubric_quality").run()
    assert not app.exception, app.exception
    shown = texts(app)
    assert translate("rubric_quality.dashboard.below_k", lang, k=10) in shown
    tables = [frame.value for frame in app.dataframe]
    listed = tables[0][translate("rubric_quality.column.case", lang)].tolist()
    assert listed == [case_id for case_id, _s in below]
    flags = tables[1]
    n_flagged = sum(len(marks) for entry in validity.values() for marks in entry["flags"].values())
    assert int(flags[translate("rubric_quality.column.n_criteria", lang)].sum()) == n_flagged
    assert len(app.get("plotly_chart")) == 1
