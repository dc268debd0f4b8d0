"""Plotly figure builders shared by the dashboard and the HTML report.

Every builder takes a `Report` and a translator `t(key) -> str` (the dashboard passes the page's
catalog lookup; the HTML report reads the same catalog file) and returns a `plotly.graph_objects.Figure`.
The figures of the analysis depth are built in `analysis.reliability_figures` and gathered here.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis import metrics, score_tables, time_section
from analysis.columns import cell_text, header_and_kind, value_names
from analysis.figure_style import PERCENT, Translator, layout, translator
from analysis.reliability.thresholds_and_counts import SLICE_DIMENSIONS
from analysis.reliability_figures import (
    agreement_slice_bars,
    annotator_agreement,
    correction_rates,
    judge_slice_bars,
    judges_against_ceiling,
    judges_by_model_heatmap,
    kappa_distribution,
)


def ranked_models(cacs: pd.Series, models) -> list[str]:
    """The one order of models in every chart: the leaderboard's (CACS@k, highest first; ties by name),
    then the models without a score, by name."""
    ranked = sorted(cacs.dropna().index, key=lambda model: (-float(cacs[model]), str(model)))
    return ranked + sorted(set(models) - set(ranked), key=str)


def model_order(report) -> list[str]:
    """`ranked_models` of a report."""
    cacs = report.models["cacs_at_k"] if "cacs_at_k" in report.models else pd.Series(dtype=float)
    return ranked_models(cacs, report.grid.models)


def _ordered(figure: go.Figure, order: list[str], axis: str = "x") -> go.Figure:
    """Categories of the model axis in `order` (models a chart lacks are skipped, extra ones follow)."""
    update = figure.update_xaxes if axis == "x" else figure.update_yaxes
    update(categoryorder="array", categoryarray=order)
    return figure


def case_mf1_distribution(report, t: Translator) -> go.Figure:
    pairs = report.agreement.pairs
    figure = go.Figure()
    order = model_order(report)
    for model in order:
        # float32 (about 7 digits, as the hover shows 3) halves what every visit sends: a value per response.
        values = pairs.loc[pairs["model"] == model, "mf1"].to_numpy(dtype=np.float32)
        figure.add_trace(go.Box(y=values, name=model, boxmean=True, showlegend=False))
    _ordered(figure, order)
    return layout(
        figure,
        t("analysis.fig.case_mf1"),
        yaxis_title=t("analysis.axis.case_mf1"),
        xaxis_title=t("analysis.axis.model"),
    )


def pooled_mf1(report, t: Translator) -> go.Figure:
    frame = report.agreement.per_model
    text = [
        t(
            "analysis.fig.raters",
            a1=int(r.annotators_g1),
            a2=int(r.annotators_g2),
            c1=int(r.checkers_g1),
            c2=int(r.checkers_g2),
        )
        for r in frame.itertuples()
    ]
    figure = go.Figure(
        go.Bar(
            x=list(frame.index),
            y=frame["pooled_mf1"],
            text=text,
            textposition="outside",
            hovertemplate="%{x}: %{y:.3f}<br>%{text}<extra></extra>",
        )
    )
    overall = report.agreement.overall_mf1
    if not np.isnan(overall):
        figure.add_hline(y=overall, line_dash="dash", annotation_text=t("analysis.fig.overall"))
    _ordered(figure, model_order(report))
    return layout(figure, t("analysis.fig.pooled_mf1"), yaxis_title=t("analysis.axis.pooled_mf1"), yaxis_range=[0, 1.1])


def accuracy_vs_cacs(report, t: Translator) -> go.Figure:
    frame = report.models
    figure = go.Figure(
        go.Scatter(
            x=frame["rubric_accuracy"],
            y=frame["cacs_at_k"],
            mode="markers+text",
            text=list(frame.index),
            textposition="top center",
        )
    )
    return layout(
        figure,
        t("analysis.fig.accuracy_vs_cacs", k=report.k),
        xaxis_title=t("analysis.axis.rubric_accuracy"),
        yaxis_title=t("analysis.axis.cacs", k=report.k),
        xaxis_tickformat=PERCENT,
        yaxis_tickformat=PERCENT,
    )


def case_accuracy_threshold(report, t: Translator) -> go.Figure:
    """Per-response rubric accuracy of each model as a violin (the paper's Figure 7).

    The band below (k − ½)/N holds the responses that pass no threshold (CACS 0); the diamond marks the
    mean accuracy of the responses at or above k, the part of the distribution CACS@k rewards.
    """
    scores = report.scores
    accuracy = scores.s / np.maximum(scores.n, 1)
    passing = scores.s >= report.k
    figure = go.Figure()
    models = list(report.grid.models)  # indexed by the scores' model codes
    order = model_order(report)
    for model in order:
        code = models.index(model)
        mine = scores.model_codes == code
        figure.add_trace(
            go.Violin(
                # The trace stands at its name's category: no model name per response, and the values as float32
                # (a typed array in the page's JSON). A list of names would grow the figure with every response.
                y=accuracy[mine].astype(np.float32),
                name=model,
                box_visible=True,
                meanline_visible=False,
                points=False,
                spanmode="hard",
                showlegend=False,
                hovertemplate="%{x}<br>%{y:.1%}<extra></extra>",
            )
        )
    reaching = [accuracy[(scores.model_codes == code) & passing] for code in range(len(models))]
    shown = [(model, float(values.mean())) for model, values in zip(models, reaching, strict=True) if len(values)]
    figure.add_trace(
        go.Scatter(
            x=[model for model, _ in shown],
            y=[value for _, value in shown],
            mode="markers",
            marker=dict(symbol="diamond", size=11, color="black"),
            name=t("analysis.fig.mean_above_threshold", k=report.k),
            hovertemplate="%{x}<br>%{y:.1%}<extra></extra>",
        )
    )
    _ordered(figure, order)
    figure.add_hrect(
        y0=0,
        y1=(report.k - 0.5) / max(report.n, 1),
        fillcolor="firebrick",
        opacity=0.12,
        line_width=0,
        annotation_text=t("analysis.fig.below_threshold", k=report.k),
        annotation_position="bottom left",
    )
    return layout(
        figure,
        t("analysis.fig.case_accuracy"),
        xaxis_title=t("analysis.axis.model"),
        yaxis_title=t("analysis.axis.rubric_accuracy"),
        yaxis_tickformat=PERCENT,
        yaxis_range=[0, 1],
    )


def slice_bars(report, t: Translator, dimension: str) -> go.Figure:
    frame = report.slices[report.slices["dimension"] == dimension]
    figure = go.Figure()
    for value, part in frame.groupby("value", sort=True):  # one trace per slice value, named, not its id
        name = value_names(dimension, [value], t)[0]
        figure.add_trace(go.Bar(x=part["model"], y=part["cacs_at_k"], name=name))
    figure.update_layout(barmode="group", legend_title_text=t(f"insights.dimension.{dimension}"))
    _ordered(figure, model_order(report))
    return layout(
        figure,
        t(f"analysis.fig.slice.{dimension}", k=report.k),
        xaxis_title=t("analysis.axis.model"),
        yaxis_title=t("analysis.axis.cacs", k=report.k),
        yaxis_tickformat=PERCENT,
    )


def _percent_text(value: float) -> str:
    return "—" if not np.isfinite(value) else f"{value * 100:.1f}%"


def family_heatmap(report, t: Translator) -> go.Figure:
    frame = report.slices[report.slices["dimension"] == "capability_family"]
    table = frame.pivot(index="value", columns="model", values="cacs_at_k").reindex(columns=model_order(report))
    deviation = table - report.models["cacs_at_k"].reindex(table.columns).to_numpy()[None, :]
    figure = go.Figure(
        go.Heatmap(
            z=deviation.to_numpy(),
            x=list(table.columns),
            y=value_names("capability_family", table.index, t),
            colorscale="RdBu",
            zmid=0,
            # The model's CACS in each family printed in its cell (the paper's Figure 8); colour is the deviation.
            text=[[_percent_text(value) for value in row] for row in table.to_numpy()],
            texttemplate="%{text}",
            hovertemplate="%{y} · %{x}<br>Δ %{z:.3f}<br>CACS %{text}<extra></extra>",
            colorbar=dict(title=t("analysis.axis.deviation")),
        )
    )
    return layout(
        figure,
        t("analysis.fig.family_heatmap", k=report.k),
        xaxis_title=t("analysis.axis.model"),
        yaxis_title=t("insights.dimension.capability_family"),
    )


def judge_fidelity(report, t: Translator) -> go.Figure:
    frame = report.judges
    figure = go.Figure()
    for column, key in (
        ("mf1_group1", "analysis.fig.vs_group1"),
        ("mf1_group2", "analysis.fig.vs_group2"),
        ("mf1_gold", "analysis.fig.vs_gold"),
    ):
        figure.add_trace(go.Bar(x=list(frame.index), y=frame[column], name=t(key)))
    overall = report.agreement.overall_mf1
    if not np.isnan(overall):
        figure.add_hline(y=overall, line_dash="dash", annotation_text=t("analysis.fig.human_human"))
    figure.update_layout(barmode="group")
    return layout(
        figure, t("analysis.fig.judge_fidelity"), yaxis_title=t("analysis.axis.pooled_mf1"), yaxis_range=[0, 1.05]
    )


def rank_shifts(report, t: Translator) -> go.Figure:
    rates = report.positive_rates
    figure = go.Figure()
    if len(rates.columns):
        ranks = rates.rank(ascending=False, method="min")
        order = model_order(report)
        for model in sorted(ranks.index, key=lambda name: order.index(name) if name in order else len(order)):
            figure.add_trace(
                go.Scatter(
                    x=list(ranks.columns),
                    y=ranks.loc[model],
                    mode="lines+markers",
                    name=model,
                    customdata=rates.loc[model],
                    hovertemplate=model + ": %{y} (%{customdata:.1%})<extra></extra>",
                )
            )
    figure.update_yaxes(autorange="reversed")
    return layout(
        figure, t("analysis.fig.rank_shifts"), xaxis_title=t("analysis.axis.judge"), yaxis_title=t("analysis.axis.rank")
    )


def threshold_sensitivity(report, t: Translator) -> go.Figure:
    figure = go.Figure()
    thresholds = list(range(1, report.n + 1))
    for model in model_order(report):
        if model not in report.models.index:
            continue
        row = report.models.loc[model]
        figure.add_trace(go.Scatter(x=thresholds, y=[row[f"cacs@{k}"] for k in thresholds], mode="lines", name=model))
    figure.add_vline(x=report.k, line_dash="dash", annotation_text=f"k = {report.k}")
    return layout(
        figure,
        t("analysis.fig.threshold"),
        xaxis_title=t("analysis.axis.k"),
        yaxis_title=t("analysis.axis.cacs_plain"),
        yaxis_tickformat=PERCENT,
    )


#: The length chart: every response a grey dot, each model's mean a marker of its own colour and shape.
RESPONSE_DOT_COLOR = "#9aa0a6"
MODEL_SYMBOLS = ("diamond", "square", "circle", "triangle-up", "cross", "star", "triangle-down", "pentagon", "x")


def length_diagnostics(report, t: Translator, max_points: int = 4000) -> go.Figure:
    scores = report.scores
    value = metrics.cacs(scores.s, scores.n, report.k)
    rng = np.random.default_rng(0)
    shown = (
        np.arange(len(value))
        if len(value) <= max_points
        else np.sort(rng.choice(len(value), max_points, replace=False))
    )
    figure = go.Figure(
        go.Scattergl(
            x=scores.length[shown],
            y=value[shown],
            mode="markers",
            opacity=0.35,
            marker=dict(color=RESPONSE_DOT_COLOR),
            name=t("daily.fig.length.each_response"),
            text=np.asarray(report.grid.models, dtype=object)[scores.model_codes[shown]]
            if len(report.grid.models)
            else None,
        )
    )
    # Each model's mean as its own legend entry (in the leaderboard's order), never a label beside its marker:
    # models of about the same length and score would print their names over each other.
    means = report.models
    for index, model in enumerate(model for model in model_order(report) if model in means.index):
        figure.add_trace(
            go.Scatter(
                x=[means.loc[model, "mean_length"]],
                y=[means.loc[model, "cacs_at_k"]],
                mode="markers",
                marker=dict(
                    size=13, symbol=MODEL_SYMBOLS[index % len(MODEL_SYMBOLS)], line=dict(width=1, color="white")
                ),
                name=str(model),
                legendgroup="models",
                legendgrouptitle_text=t("daily.fig.length.model_mean") if index == 0 else None,
            )
        )
    pearson = report.length.get("pearson_cacs")
    subtitle = "" if pearson is None or np.isnan(pearson) else f" (r = {pearson:.3f})"
    return layout(
        figure,
        t("analysis.fig.length", k=report.k) + subtitle,
        xaxis_title=t("analysis.axis.length"),
        yaxis_title=t("analysis.axis.cacs", k=report.k),
    )


def figures(report, t: Translator) -> list[tuple[str, go.Figure]]:
    """Every figure, with a file-safe name."""
    built = [
        ("case_mf1", case_mf1_distribution(report, t)),
        ("pooled_mf1", pooled_mf1(report, t)),
        ("accuracy_vs_cacs", accuracy_vs_cacs(report, t)),
        ("case_accuracy", case_accuracy_threshold(report, t)),
    ]
    built += [
        (f"slice_{dimension}", slice_bars(report, t, dimension))
        for dimension in ("difficulty", "macro_category", "register")
    ]
    built += [
        ("family_heatmap", family_heatmap(report, t)),
        ("judge_fidelity", judge_fidelity(report, t)),
        ("rank_shifts", rank_shifts(report, t)),
        ("threshold", threshold_sensitivity(report, t)),
        ("length", length_diagnostics(report, t)),
    ]
    return built + insight_figures(report, t)


def figure_html(figure: go.Figure) -> str:
    """One figure as a self-contained HTML page (plotly.js inline, works offline)."""
    return figure.to_html(include_plotlyjs=True, full_html=True)


def _table_html(frame: pd.DataFrame, t: Translator) -> str:
    """A table as the pages show it: catalog headers, rates as percentages with one decimal, "—" when empty."""
    shown = pd.DataFrame(index=frame.index)
    for column in frame.columns:
        header, kind = header_and_kind(t, str(column))
        shown[header] = [cell_text(value, kind) for value in frame[column]]
    return shown.to_html(index=False, escape=True, border=0, classes="table")


def html_report(report, frames: dict[str, pd.DataFrame], lang: str = "en", *, scores: bool = True) -> str:
    """The whole report in one offline HTML file.

    Summary tables first (`frames`, as `report.tables` gives them), then with `scores` the sections of
    `analysis.score_tables` (leaderboard, comparisons, calibrated, judge ranking), then every figure.
    """
    t = translator(lang)
    parts = [
        f"<h1>{html.escape(t('analysis.title'))}</h1>",
        f"<p>{html.escape(t('analysis.summary', source=report.source, k=report.k, n=report.n))}</p>",
    ]
    frames = dict(frames)
    # CACS at every threshold is drawn in the threshold figure; the table keeps the headline columns.
    frames["models"] = frames["models"].drop(columns=[c for c in frames["models"].columns if c.startswith("cacs@")])
    for name in (
        "models",
        "agreement",
        "agreement_extra",
        "judges",
        "threshold_sensitivity",
        "length",
        "cross_grader",
        "pending",
        "low_agreement_cases",
    ):
        parts.append(f"<h2>{html.escape(t(f'analysis.table.{name}'))}</h2>")
        parts.append(_table_html(frames[name], t))
    if scores and getattr(report, "scores_section", None) is not None:
        tables = score_tables.score_tables(report.scores_section)
        parts.append(score_tables.sections_html(tables, t, report.gold_basis, report.min_responses, _table_html))
    if getattr(report, "time", None) is not None:
        parts.append(time_section.section_html(report.time, t))
    for index, (_, figure) in enumerate(figures(report, t)):
        parts.append(figure.to_html(include_plotlyjs=index == 0, full_html=False))
    style = (
        "body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}"
        ".table{border-collapse:collapse;font-size:13px}.table td,.table th{padding:3px 8px;"
        "border-bottom:1px solid #ddd;text-align:right}"
    )
    return (
        f'<!DOCTYPE html><html lang="{html.escape(lang)}"><head><meta charset="utf-8">'
        f"<title>{html.escape(t('analysis.title'))}</title><style>{style}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>"
    )


def insight_figures(report, t: Translator) -> list[tuple[str, go.Figure]]:
    """The figures of `report.insights` (none when the report was built without them)."""
    insights = report.insights
    if insights is None:
        return []
    built = [
        ("criterion_kappa", kappa_distribution(insights, t)),
        ("judges_vs_ceiling", judges_against_ceiling(insights, report.judges, t)),
        ("judges_by_model", judges_by_model_heatmap(insights, t, model_order(report))),
    ]
    built += [(f"judge_slice_{dimension}", judge_slice_bars(insights, t, dimension)) for dimension in SLICE_DIMENSIONS]
    built += [
        ("annotator_agreement", annotator_agreement(insights, t)),
        ("check_corrections", correction_rates(insights, t)),
    ]
    built += [
        (f"agreement_slice_{dimension}", agreement_slice_bars(insights, t, dimension)) for dimension in SLICE_DIMENSIONS
    ]
    return built
