"""Figures of the analysis depth (`analysis.reliability`): the groups' κ per criterion, the judges against
the physicians' ceiling, by model and by slice, the groups' agreement by slice, and each annotator's agreement
and corrections.

Builders take the report's `insights` and a translator and return plotly figures; `analysis.figures` gathers
them (`insight_figures`) for the HTML report and the figure files.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis.columns import value_names
from analysis.figure_style import PERCENT, Translator, layout
from analysis.reliability.thresholds_and_counts import KAPPA_THRESHOLD, MIN_ALIGNED


def kappa_distribution(insights, t: Translator) -> go.Figure:
    """Cohen's κ between the groups per criterion, with the flag threshold."""
    frame = insights.criteria
    evaluated = frame[frame["n_aligned"] >= MIN_ALIGNED]
    figure = go.Figure(
        go.Histogram(x=evaluated["kappa"].dropna(), xbins=dict(start=-1, end=1.0001, size=0.05), name="κ")
    )
    figure.add_vline(x=KAPPA_THRESHOLD, line_dash="dash", annotation_text=f"κ = {KAPPA_THRESHOLD:.2f}")
    counts = frame["flag"].value_counts()
    binned = np.histogram(evaluated["kappa"].dropna(), bins=np.arange(-1, 1.0501, 0.05))[0]
    # A count axis has whole ticks: with few criteria plotly would mark 0.5 of one.
    figure.update_yaxes(tick0=0, dtick=1 if binned.max(initial=0) <= 10 else None, tickformat=",d", rangemode="tozero")
    return layout(
        figure,
        t(
            "insights.fig.kappa",
            unreliable=int(counts.get("unreliable", 0)),
            never=int(counts.get("never_met", 0)),
            always=int(counts.get("always_met", 0)),
            n=len(evaluated),
        ),
        xaxis_title=t("insights.axis.kappa"),
        yaxis_title=t("insights.axis.criteria"),
    )


#: The physicians' ceiling of each group: (group, dash, colour), told apart by both.
CEILING_LINES = ((1, "dot", "#1f4e99"), (2, "dash", "#b3541e"))


def judges_against_ceiling(insights, judges: pd.DataFrame, t: Translator) -> go.Figure:
    """Each judge's pooled macro-F1 against each group (`metrics.judge_fidelity`), beside what the physicians
    reach against the other group."""
    ceiling = insights.human_ceiling
    figure = go.Figure()
    for group in (1, 2):
        figure.add_trace(
            go.Bar(
                x=list(judges.index), y=judges[f"mf1_group{group}"], name=t("insights.fig.judge_vs_group", group=group)
            )
        )
    # Two lines that may lie 0.003 apart: each in its group's own colour and dash, with its value written at
    # its end (the first above its line, the second below), so neither hides the other.
    for (group, dash, color), position in zip(CEILING_LINES, ("top right", "bottom right"), strict=True):
        value = ceiling["by_group"].get(group, {}).get("pooled_mf1")
        if value is not None and not np.isnan(value):
            figure.add_hline(
                y=value,
                line_dash=dash,
                line_color=color,
                line_width=2,
                annotation_text=f"{value:.3f}",
                annotation_position=position,
                annotation_font_color=color,
            )
            figure.add_trace(
                go.Scatter(
                    x=[None],
                    y=[None],
                    mode="lines",
                    line=dict(dash=dash, color=color, width=2),
                    name=t("insights.fig.ceiling_group", group=group, value=f"{value:.3f}"),
                )
            )
    figure.update_layout(barmode="group")
    return layout(
        figure,
        t("insights.fig.ceiling", value=f"{ceiling['pooled_mf1']:.3f}" if not np.isnan(ceiling["pooled_mf1"]) else "—"),
        yaxis_title=t("analysis.axis.pooled_mf1"),
        yaxis_range=[0, 1.05],
        xaxis_title=t("analysis.axis.judge"),
    )


def judges_by_model_heatmap(insights, t: Translator, models: list[str] | None = None) -> go.Figure:
    """Each judge's macro-F1 against gold on each model's responses, models in `models`' order when given."""
    frame = insights.judges_by_model
    table = frame.pivot(index="judge", columns="model", values="mf1_gold") if len(frame) else pd.DataFrame()
    if models is not None:  # the model order of every other chart
        table = table.reindex(columns=[model for model in models if model in table.columns])
    values = table.to_numpy(dtype=float)
    shown = [["—" if not np.isfinite(value) else f"{value:.3f}" for value in row] for row in values]
    figure = go.Figure(
        go.Heatmap(
            z=values,
            x=list(table.columns),
            y=list(table.index),
            colorscale="Viridis",
            # Macro-F1 runs from 0 to 1; a scale fitted to the values would make small differences look large.
            zmin=0,
            zmax=1,
            text=shown,
            texttemplate="%{text}",
            hovertemplate="%{y} · %{x}: %{text}<extra></extra>",
            colorbar=dict(title=t("insights.axis.mf1_gold")),
        )
    )
    return layout(figure, t("insights.fig.judges_by_model"), xaxis_title=t("analysis.axis.model"))


def judge_slice_bars(insights, t: Translator, dimension: str, max_values: int = 30) -> go.Figure:
    """Each judge's macro-F1 against gold by value of a slice dimension (the first `max_values` values)."""
    frame = insights.judge_slices[insights.judge_slices["dimension"] == dimension]
    figure = go.Figure()
    values = sorted(frame["value"].astype(str).unique())[:max_values]
    for judge, part in frame.groupby("judge", sort=True):
        part = part.assign(value=part["value"].astype(str)).set_index("value").reindex(values)
        figure.add_trace(
            go.Bar(
                x=value_names(dimension, values, t),
                y=part["mf1_gold"],
                name=str(judge),
                customdata=part["n_decisions"],
                hovertemplate="%{x}: %{y:.3f} (n = %{customdata})<extra></extra>",
            )
        )
    figure.update_layout(barmode="group")
    return layout(
        figure,
        t("insights.fig.judge_slice", dimension=t(f"insights.dimension.{dimension}")),
        yaxis_title=t("insights.axis.mf1_gold"),
        yaxis_range=[0, 1.05],
    )


def _error_bars(frame: pd.DataFrame) -> dict:
    """Asymmetric error bars from the pooled macro-F1 to its interval's bounds (none where undefined)."""
    return dict(
        type="data",
        symmetric=False,
        array=(frame["pooled_mf1_high"] - frame["pooled_mf1"]).clip(lower=0).fillna(0),
        arrayminus=(frame["pooled_mf1"] - frame["pooled_mf1_low"]).clip(lower=0).fillna(0),
    )


def agreement_slice_bars(insights, t: Translator, dimension: str, max_values: int = 30) -> go.Figure:
    """The groups' pooled macro-F1 by value of a slice dimension, with its interval."""
    frame = insights.agreement_slices[insights.agreement_slices["dimension"] == dimension].head(max_values)
    figure = go.Figure(
        go.Bar(
            x=value_names(dimension, frame["value"], t),
            y=frame["pooled_mf1"],
            error_y=_error_bars(frame),
            customdata=frame["n_aligned"],
            hovertemplate="%{x}: %{y:.3f} (%{customdata} pairs)<extra></extra>",
        )
    )
    return layout(
        figure,
        t("insights.fig.agreement_slice", dimension=t(f"insights.dimension.{dimension}")),
        yaxis_title=t("analysis.axis.pooled_mf1"),
        yaxis_range=[0, 1.05],
    )


def annotator_agreement(insights, t: Translator) -> go.Figure:
    """Each annotator's pooled macro-F1 against the other group, with its interval and the physicians' line."""
    frame = insights.annotators
    figure = go.Figure()
    for group, part in frame.groupby("group", sort=True):
        figure.add_trace(
            go.Bar(
                x=part["username"],
                y=part["pooled_mf1"],
                error_y=_error_bars(part),
                name=t("insights.fig.group", group=int(group)),
            )
        )
    value = insights.human_ceiling["pooled_mf1"]
    if not np.isnan(value):
        figure.add_hline(y=value, line_dash="dash", annotation_text=t("insights.fig.all_physicians"))
    return layout(
        figure,
        t("insights.fig.annotators"),
        yaxis_title=t("insights.axis.mf1_other_group"),
        yaxis_range=[0, 1.05],
    )


def correction_rates(insights, t: Translator) -> go.Figure:
    """The share of each annotator's checked labels that a checker corrected."""
    frame = insights.annotators
    figure = go.Figure()
    for group, part in frame.groupby("group", sort=True):
        figure.add_trace(
            go.Bar(
                x=part["username"],
                y=part["correction_rate"],
                customdata=np.stack([part["n_corrected"], part["n_checked"]], axis=-1),
                hovertemplate="%{x}: %{y:.1%} (%{customdata[0]}/%{customdata[1]})<extra></extra>",
                name=t("insights.fig.group", group=int(group)),
            )
        )
    return layout(
        figure, t("insights.fig.corrections"), yaxis_title=t("insights.axis.correction_rate"), yaxis_tickformat=PERCENT
    )
