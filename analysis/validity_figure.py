"""The paper's Figure 6 for one case (docs/REFERENCE.md §4.2): each complete response's s against k, the
reference answer beside them. Pure: grid and numbers in, a plotly figure out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis.columns import Translator
from analysis.figure_style import layout
from analysis.grid import MET, DecisionGrid
from analysis.rubric_quality import complete_rows


def case_points(grid: DecisionGrid, case_id: str) -> pd.DataFrame:
    """model, s (gold criteria met) of the case's complete responses, highest first."""
    case_rows = np.flatnonzero(grid.cases["case_id"].to_numpy() == case_id)
    if not len(case_rows):
        return pd.DataFrame(columns=["model", "s"])
    rows = complete_rows(grid) & (grid.case_rows == case_rows[0])
    s = ((grid.gold[rows] == MET) & grid.valid[rows]).sum(axis=1)
    frame = pd.DataFrame({"model": grid.responses["model"].to_numpy()[rows], "s": s.astype(int)})
    return frame.sort_values(["s", "model"], ascending=[False, True], ignore_index=True)


def figure6(points: pd.DataFrame, k: int, n: int, reference_s: int | None, t: Translator) -> go.Figure:
    """Horizontal bars: each response's s, the reference's beside them (its own colour), a line at k."""
    names = [str(model) for model in points["model"]]
    values = [int(value) for value in points["s"]]
    colours = ["#2a6f97" if value >= k else "#c0c0c0" for value in values]
    if reference_s is not None:
        names.append(t("rubric_quality.figure.reference"))
        values.append(int(reference_s))
        colours.append("#d1495b")
    figure = go.Figure(go.Bar(x=values, y=names, orientation="h", marker_color=colours, hovertemplate="%{y}: %{x}"))
    figure.add_vline(x=k, line_dash="dash", annotation_text=f"k = {k}")
    return layout(
        figure,
        t("rubric_quality.figure.title"),
        xaxis=dict(title=t("rubric_quality.figure.x", n=n), range=[0, n]),
        yaxis=dict(autorange="reversed"),
        showlegend=False,
    )
