"""Charts a reader can tell apart: the length chart names each model once in its legend (no labels printed
over each other) and calls its dots responses; the physicians' two ceiling lines differ in colour and dash
and each carries its value."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from analysis import figures, reliability_figures
from analysis.loader import load_frames
from db.store.engine import get_engine
from i18n import translate
from tests.analysis.test_report import small_database  # noqa: F401  (fixture)
from tests.support.basis import report_as_written


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


def test_the_length_chart_names_each_model_once_in_the_legend(small_database):  # noqa: F811
    # The small database carries no check labels: its figures on the provisional basis.
    report = report_as_written(load_frames(get_engine()), k=2, resamples=0, insights=False)
    figure = figures.length_diagnostics(report, t)
    dots, *models = figure.data
    assert dots.name == t("daily.fig.length.each_response")
    assert [trace.name for trace in models] == figures.model_order(report)
    # No text printed beside a marker: the legend names them; every model has a shape or colour of its own.
    assert all(trace.mode == "markers" and trace.text is None for trace in models)
    for trace in models:
        model = trace.name
        assert trace.x[0] == report.models.loc[model, "mean_length"]
        assert trace.y[0] == report.models.loc[model, "cacs_at_k"]
    assert len({trace.marker.symbol for trace in models}) == min(len(models), len(figures.MODEL_SYMBOLS))


def test_two_close_ceiling_lines_differ_in_colour_and_dash_and_say_their_values():
    insights = SimpleNamespace(
        human_ceiling={
            "pooled_mf1": 0.8645,
            "by_group": {1: {"pooled_mf1": 0.866}, 2: {"pooled_mf1": 0.863}},
        }
    )
    judges = pd.DataFrame({"mf1_group1": [0.8, 0.7], "mf1_group2": [0.79, 0.71]}, index=["j1", "j2"])
    figure = reliability_figures.judges_against_ceiling(insights, judges, t)
    lines = [shape for shape in figure.layout.shapes if shape.type == "line"]
    assert sorted(line.y0 for line in lines) == [0.863, 0.866]
    assert len({line.line.color for line in lines}) == 2 and len({line.line.dash for line in lines}) == 2
    values = sorted(annotation.text for annotation in figure.layout.annotations)
    assert values == ["0.863", "0.866"]
    # The values sit on opposite sides of their lines.
    by_value = {annotation.text: annotation.yanchor for annotation in figure.layout.annotations}
    assert by_value["0.866"] != by_value["0.863"]
    legend = [trace.name for trace in figure.data if trace.type == "scatter"]
    assert legend == [t("insights.fig.ceiling_group", group=g, value=v) for g, v in ((1, "0.866"), (2, "0.863"))]
    assert not np.isnan(insights.human_ceiling["pooled_mf1"])
