"""Figures of the defensible scores (analysis.score_section): the leaderboard with intervals and tiers,
the pairwise matrix, and calibrated against judge-only against gold scores; plus the sample-size table.

Builders take a Report and a translator and return plotly figures, as those of analysis.figures do.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis import calibrated as calibrated_scores
from analysis.figure_style import Translator, layout
from analysis.figures import model_order


def _points(value) -> float:
    return float("nan") if value is None else 100 * float(value)


def leaderboard_intervals(report, t: Translator) -> go.Figure:
    rows = report.scores_section.leaderboard if report.scores_section is not None else []
    figure = go.Figure()
    # Tiers best first; models without a tier (not ranked: n < M, or not comparable) last, named as such.
    for tier in sorted({row["tier"] for row in rows}, key=lambda value: (value is None, value or 0)):
        chosen = [row for row in rows if row["tier"] == tier]
        scores = [_points(row["cacs_at_k"]) for row in chosen]
        name = t("analysis.fig.tier", tier=tier) if tier is not None else t("gold_basis.fig.no_tier")
        figure.add_trace(
            go.Scatter(
                x=scores,
                y=[row["model"] for row in chosen],
                mode="markers",
                name=name,
                error_x=dict(
                    type="data",
                    symmetric=False,
                    array=[_points(row["ci_high"]) - score for row, score in zip(chosen, scores)],
                    arrayminus=[score - _points(row["ci_low"]) for row, score in zip(chosen, scores)],
                ),
            )
        )
    figure.update_yaxes(autorange="reversed")
    return layout(figure, t("analysis.fig.leaderboard", k=report.k), xaxis_title=t("analysis.axis.cacs_points"))


def pairwise_matrix(report, t: Translator) -> go.Figure:
    pairs = report.scores_section.comparisons["cacs_at_k"] if report.scores_section is not None else []
    compared = {model for entry in pairs for model in entry["models"]}
    models = [model for model in model_order(report) if model in compared]
    models += sorted(compared - set(models))  # judge-scored models, after the physician-scored ones
    index = {model: i for i, model in enumerate(models)}
    diff = np.full((len(models), len(models)), np.nan)
    text = np.full((len(models), len(models)), "", dtype=object)
    for entry in pairs:
        a, b = (index[model] for model in entry["models"])
        if entry["diff"] is None:
            continue
        p = "—" if entry["p_holm"] is None else f"{entry['p_holm']:.3f}"
        for row, column, sign in ((a, b, 1), (b, a, -1)):
            diff[row, column] = sign * 100 * entry["diff"]
            text[row, column] = f"{sign * 100 * entry['diff']:+.1f}<br>p={p}"
    figure = go.Figure(
        go.Heatmap(
            z=diff,
            x=models,
            y=models,
            text=text,
            texttemplate="%{text}",
            colorscale="RdBu",
            zmid=0,
            colorbar=dict(title=t("analysis.axis.diff_points")),
        )
    )
    # Plotly reports no click on a heatmap cell to Streamlit; an invisible marker on every cell carries the
    # click (row A, column B) and the cell's text, so the dashboard can list the cases behind it.
    cells = [(row, column) for row in range(len(models)) for column in range(len(models)) if row != column]
    figure.add_trace(
        go.Scatter(
            x=[models[column] for _, column in cells],
            y=[models[row] for row, _ in cells],
            text=[text[row, column] for row, column in cells],
            mode="markers",
            marker=dict(size=30, opacity=0, symbol="square"),
            hovertemplate="%{y} − %{x}<br>%{text}<extra></extra>",
            showlegend=False,
        )
    )
    figure.update_yaxes(autorange="reversed")
    return layout(figure, t("analysis.fig.pairwise", k=report.k))


def calibrated_against_gold(report, t: Translator) -> go.Figure:
    section = report.scores_section
    figure = go.Figure()
    if section is None:
        return layout(figure, t("analysis.fig.calibrated", k=report.k))
    labels, estimate, low, high, judge_only, gold = [], [], [], [], [], []
    for judge, models in section.calibrated.items():
        for model, entry in models.items():
            values = entry["cacs_at_k"]
            labels.append(f"{model} · {judge}")
            estimate.append(_points(values["estimate"]))
            low.append(_points(values["ci_low"]))
            high.append(_points(values["ci_high"]))
            judge_only.append(_points(values["judge_only"]))
            gold.append(_points(report.models["cacs_at_k"].get(model)) if model in report.models.index else np.nan)
    figure.add_trace(
        go.Bar(
            x=labels,
            y=estimate,
            name=t("analysis.fig.calibrated_estimate"),
            error_y=dict(
                type="data",
                symmetric=False,
                array=np.subtract(high, estimate),
                arrayminus=np.subtract(estimate, low),
            ),
        )
    )
    figure.add_trace(go.Bar(x=labels, y=judge_only, name=t("analysis.fig.judge_only")))
    figure.add_trace(go.Bar(x=labels, y=gold, name=t("analysis.fig.gold_all")))
    figure.update_layout(barmode="group")
    return layout(figure, t("analysis.fig.calibrated", k=report.k), yaxis_title=t("analysis.axis.cacs_points"))


def calibrated_columns(scored: pd.DataFrame, calibrated: dict, judge: str) -> pd.DataFrame:
    """The judge-scored table with the calibrated CACS and its interval first, where the model's calibration
    sample allows one (§4: PPI++ with the judge); the judge's raw CACS moves to `raw_cacs` beside it."""
    entries = calibrated.get(judge, {})

    def value(model: str, key: str) -> float:
        found = entries.get(model, {}).get("cacs_at_k", {}).get(key)
        return np.nan if found is None else float(found)

    models = scored["model"].tolist()
    if all(np.isnan(value(model, "estimate")) for model in models):
        return scored  # no sample allows a calibrated score yet: the judge's score is the only one
    table = scored.rename(columns={"cacs_at_k": "raw_cacs"})
    at = list(table.columns).index("model") + 1
    for offset, (column, key) in enumerate(
        (("calibrated_cacs", "estimate"), ("calibrated_cacs_low", "ci_low"), ("calibrated_cacs_high", "ci_high"))
    ):
        table.insert(at + offset, column, [value(model, key) for model in models])
    return table


def sample_size_table(report) -> pd.DataFrame:
    """The planner's table of the report's grid and calibration samples (empty without samples)."""
    samples = report.grid.calibration
    if samples is None or not len(samples):
        samples = calibrated_scores.empty_samples()
    return calibrated_scores.sample_size_plan(report.grid, samples, report.k)


SCORE_FIGURES = {
    "leaderboard": leaderboard_intervals,
    "pairwise": pairwise_matrix,
    "calibrated": calibrated_against_gold,
}


def score_figures(report, t: Translator) -> list[tuple[str, go.Figure]]:
    """Every figure of this module, with a file-safe name."""
    return [(name, build(report, t)) for name, build in SCORE_FIGURES.items()]
