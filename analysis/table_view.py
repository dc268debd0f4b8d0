"""How the analysis pages show a table: headers from the catalog, rates as percentages with one decimal,
scores with three, counts whole, an empty cell as "—" (never `None`), stored ids named; and every
figure's axes named from the catalog.

The frame itself keeps its column names and numbers (the CSV download and the tests read those);
only what the browser draws changes, through Streamlit's column configuration.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.agreement import ALL
from analysis.figures import NAMED_KINDS
from analysis.reliability import NO_TAG
from db.taxonomy import get_taxonomy

RATE, SCORE, COUNT, LENGTH, POINTS, TEXT = "rate", "score", "count", "length", "points", "text"
EMPTY = "—"

#: Every column an analysis table shows, by kind; its header is the catalog entry `analysis.column.<name>`.
COLUMNS: dict[str, str] = {
    "model": TEXT,
    "n_responses": COUNT,
    "rubric_accuracy": RATE,
    "pass_at_k": RATE,
    "cacs_at_k": RATE,
    "mean_length": LENGTH,
    "scored_by": TEXT,
    "scored_by_name": TEXT,
    "pooled_mf1": SCORE,
    "case_mf1_mean": SCORE,
    "case_mf1_median": SCORE,
    "n_aligned": COUNT,
    "annotators_g1": COUNT,
    "annotators_g2": COUNT,
    "checkers_g1": COUNT,
    "checkers_g2": COUNT,
    "observed": RATE,
    "kappa": SCORE,
    "pabak": SCORE,
    "ac1": SCORE,
    "n_decisions": COUNT,
    "judge": TEXT,
    "mf1_group1": SCORE,
    "mf1_group2": SCORE,
    "mf1_mean": SCORE,
    "mf1_gold": SCORE,
    "n_group1": COUNT,
    "n_group2": COUNT,
    "n_gold": COUNT,
    "k2": COUNT,
    "spearman": SCORE,
    "kendall_tau_b": SCORE,
    "top3": RATE,
    "top5": RATE,
    "pearson_cacs": SCORE,
    "spearman_cacs": SCORE,
    "pearson_accuracy": SCORE,
    "spearman_accuracy": SCORE,
    "partial_cacs": SCORE,
    "judge_a": TEXT,
    "judge_b": TEXT,
    "mean_abs_diff_pp": POINTS,
    "n_models": COUNT,
    "dimension": TEXT,
    "name": TEXT,
    "value": TEXT,
    "unresolved_disagreements": COUNT,
    "incomplete_responses": COUNT,
    "case_id": TEXT,
    "criterion_id": TEXT,
    "agreement": RATE,
    "met_rate_group1": RATE,
    "met_rate_group2": RATE,
    "mean_case_mf1": SCORE,
    "min_case_mf1": SCORE,
    "mf1": SCORE,
    "a": COUNT,
    "b": COUNT,
    "c": COUNT,
    "d": COUNT,
    # analysis depth
    "text": TEXT,
    "flag_name": TEXT,
    "n_disagree": COUNT,
    "prevalence_g1": RATE,
    "prevalence_g2": RATE,
    "gold_met_rate": RATE,
    "n_flagged": COUNT,
    "unreliable": COUNT,
    "never_met": COUNT,
    "always_met": COUNT,
    "min_kappa": SCORE,
    "username": TEXT,
    "group": COUNT,
    "n_labels": COUNT,
    "n_checked": COUNT,
    "n_corrected": COUNT,
    "correction_rate": RATE,
    "group1": TEXT,
    "group2": TEXT,
    "gold": TEXT,
}
CACS_AT = re.compile(r"^cacs@(\d+)$")
JUDGE_MF1 = re.compile(r"^judge_mf1:(.+)$")
BOUND = re.compile(r"^(.+)_(low|high)$")


def _header_and_kind(t, column: str) -> tuple[str, str]:
    if column in COLUMNS:
        return t(f"analysis.column.{column}"), COLUMNS[column]
    if match := CACS_AT.match(column):
        return t("analysis.column.cacs_at", k=int(match.group(1))), RATE
    if match := JUDGE_MF1.match(column):
        return t("analysis.column.judge_mf1", judge=match.group(1)), SCORE
    if (match := BOUND.match(column)) and match.group(1) in COLUMNS:
        base, bound = match.groups()
        return t(f"analysis.column.{bound}", name=t(f"analysis.column.{base}")), COLUMNS[base]
    return column, TEXT


def _config(header: str, kind: str):
    if kind == RATE:
        return st.column_config.NumberColumn(header, format="percent", step=0.001)
    if kind == SCORE:
        return st.column_config.NumberColumn(header, format="%.3f")
    if kind == POINTS:
        return st.column_config.NumberColumn(header, format="%.1f")
    if kind in (COUNT, LENGTH):
        return st.column_config.NumberColumn(header, format="localized", step=1)
    return st.column_config.Column(header)


def column_config(t, columns: Iterable[str], rates: Iterable[str] = ()) -> dict:
    """Streamlit's configuration of `columns`: each header from the catalog; `rates` are columns named by
    data (a judge's name) that hold rates."""
    rates = set(rates)
    config = {}
    for column in columns:
        header, kind = (column, RATE) if column in rates else _header_and_kind(t, str(column))
        config[column] = _config(header, kind)
    return config


def show(
    t,
    frame: pd.DataFrame,
    *,
    rates: Iterable[str] = (),
    hidden: Iterable[str] = (),
    key: str | None = None,
    **options,
) -> None:
    """`frame` as a table in the reader's language; `hidden` columns stay in the frame but are not drawn."""
    hidden = set(hidden)
    shown = [column for column in frame.columns if column not in hidden]
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_order=shown,
        column_config={**column_config(t, shown, rates), **options.pop("column_config", {})},
        placeholder=EMPTY,
        key=key,
        **options,
    )


def value_names(dimension: str, values: Iterable, language: str, t: Callable[..., str]) -> list[str]:
    """Slice values by their names in `language` (specialties and models are shown as stored)."""
    kind = NAMED_KINDS.get(dimension, "capability_families" if dimension == "capability_family" else None)
    values = [str(value) for value in values]
    if kind is None:
        return values
    taxonomy = get_taxonomy()
    return [t("insights.no_tag") if value == NO_TAG else taxonomy.name(kind, value, language) for value in values]


def dimension_name(t, dimension: str) -> str:
    return t(f"insights.dimension.{dimension}")


def model_name(t, model: str) -> str:
    """A model's name; the agreement table's pooled row reads "all models"."""
    return t("analysis.all_models") if model == ALL else model


def titled(figure: go.Figure, t, x: str | None = None, y: str | None = None) -> go.Figure:
    """Axis titles (catalog keys) where a figure builder leaves an axis unnamed."""
    if x and not figure.layout.xaxis.title.text:
        figure.update_layout(xaxis_title=t(x))
    if y and not figure.layout.yaxis.title.text:
        figure.update_layout(yaxis_title=t(y))
    return figure
