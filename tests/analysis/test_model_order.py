"""One model order in every chart: the leaderboard's (CACS@k, highest first), read from each figure's
model axis and compared with an independent ranking of the report's scores."""

from __future__ import annotations

import pytest

from analysis import figures, score_figures
from analysis.figures import translator
from analysis.report import build_report
from db.rules.gold import PROVISIONAL
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.demo_frames import build_demo_frames

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")


@pytest.fixture(scope="module")
def report(sqlite_template, tmp_path_factory):
    frames = build_demo_frames(sqlite_template, tmp_path_factory)
    return build_report(frames, k=10, resamples=50, insights=True, gold_basis=PROVISIONAL, min_responses=1)


def _leaderboard(report) -> list[str]:
    scores = report.models["cacs_at_k"].dropna()
    table = scores.rename("cacs").reset_index().rename(columns={"index": "model"})
    table.columns = ["model", "cacs"]
    return table.sort_values(["cacs", "model"], ascending=[False, True])["model"].tolist()


def _axis_order(figure, axis: str = "x") -> list[str]:
    """The categories of a figure's model axis as plotly lays them out: the axis's own array when it has
    one, else the order in which the traces first name each category."""
    layout_axis = figure.layout.xaxis if axis == "x" else figure.layout.yaxis
    if layout_axis.categoryorder == "array":
        return list(layout_axis.categoryarray)
    seen: list[str] = []
    for trace in figure.data:
        for value in getattr(trace, axis) or [trace.name]:
            if value not in seen:
                seen.append(value)
    return seen


def test_the_demo_models_do_not_rank_in_name_order(report):
    # Otherwise the order below could hold by accident of the names.
    assert _leaderboard(report) != sorted(_leaderboard(report)) and len(_leaderboard(report)) >= 3


def test_every_chart_with_a_model_axis_lists_the_models_in_the_leaderboard_order(report):
    t = translator("zh")
    expected = _leaderboard(report)
    built = dict(figures.figures(report, t))

    def shown(models: list[str]) -> list[str]:
        return [model for model in models if model in expected]

    assert shown(_axis_order(built["case_mf1"])) == expected
    assert shown(_axis_order(built["pooled_mf1"])) == expected
    assert shown(_axis_order(built["case_accuracy"])) == expected
    assert shown(_axis_order(built["slice_difficulty"])) == expected
    assert shown(list(built["family_heatmap"].data[0].x)) == expected
    assert shown(list(built["judges_by_model"].data[0].x)) == [
        m for m in expected if m in built["judges_by_model"].data[0].x
    ]
    assert shown([trace.name for trace in built["threshold"].data]) == expected
    assert shown([trace.name for trace in built["rank_shifts"].data]) == expected
    matrix = dict(score_figures.score_figures(report, t))["pairwise"].data[0]
    assert shown(list(matrix.x)) == [m for m in expected if m in matrix.x]
    assert list(matrix.y) == list(matrix.x)
