"""The dashboard's background build holds only what its first screen shows (DESIGN §6: the first visit after new
data under 1 s); its downloads still carry the whole report, analysis depth included."""

from __future__ import annotations

from analysis import metrics
from analysis.grid import prepare
from analysis.loader import load_frames
from analysis.report import build_report, report_json
from dashboards import dashboard
from db.store.engine import get_engine
from tests.analysis.test_report import small_database  # noqa: F401  (fixture)


def test_the_build_draws_the_first_screen_and_a_download_has_the_whole_report(small_database):  # noqa: F811
    grid = prepare(load_frames(get_engine()))
    kept = dashboard._build(grid)
    assert sorted(kept.figures) == sorted(("zh", name) for name in dashboard.FIRST_SCREEN_FIGURES)
    assert kept.default is not None and kept.default.insights is None
    downloaded = report_json(dashboard._complete(kept.default))
    k = min(metrics.DEFAULT_K, grid.rubric_size)
    straight = report_json(build_report(None, k, metrics.GOLD, grid=grid, resamples=dashboard.DASHBOARD_RESAMPLES))
    assert downloaded.keys() == straight.keys()
    assert "human_ceiling" in straight and "human_ceiling" not in report_json(kept.default)
    assert downloaded["human_ceiling"] == straight["human_ceiling"]
    complete = dashboard._complete(kept.default)
    assert dashboard._complete(complete) is complete  # built once
