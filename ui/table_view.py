"""How the analysis pages show a table: headers from the catalog, rates as percentages with one decimal,
scores with three, counts whole, an empty cell as "—" (never `None`), stored ids named; and every
figure's axes named from the catalog.

The frame itself keeps its column names and numbers (the CSV download reads those); only what the
browser draws changes, through Streamlit's column configuration, and rates are sent rounded to a
tenth of a percent: the browser's number column cuts a value at its step instead of rounding it
(2/3 would read 66.6%).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.agreement import ALL
from analysis.columns import (
    COUNT,
    EMPTY,
    LENGTH,
    POINTS,
    RATE,
    SCORE,
    header_and_kind,
    value_names as named_values,
)
from ui.text import Translator


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


def column_config(t: Translator, columns: Iterable[str], rates: Iterable[str] = ()) -> dict:
    """Streamlit's configuration of `columns`: each header from the catalog; `rates` are columns named by
    data (a judge's name) that hold rates."""
    rates = set(rates)
    config = {}
    for column in columns:
        header, kind = (column, RATE) if column in rates else header_and_kind(t, str(column))
        config[column] = _config(header, kind)
    return config


GREY = "color: #9aa0a6"


def sent_frame(frame: pd.DataFrame, columns: Iterable[str], rates: Iterable[str] = ()) -> pd.DataFrame:
    """`frame` as sent to the browser: rate columns rounded half away from zero to 0.001 (66.7% for 2/3)."""
    rates = set(rates)
    rounded = {}
    for column in columns:
        kind = RATE if column in rates else header_and_kind(lambda key, **_: key, str(column))[1]
        if kind == RATE and pd.api.types.is_float_dtype(frame[column]):
            values = frame[column]
            rounded[column] = np.sign(values) * np.floor(values.abs() * 1000 + 0.5 + 1e-9) / 1000
    return frame.assign(**rounded) if rounded else frame


def show(
    t: Translator,
    frame: pd.DataFrame,
    *,
    rates: Iterable[str] = (),
    hidden: Iterable[str] = (),
    greyed: Iterable[str] = (),
    key: str | None = None,
    **options,
) -> None:
    """`frame` as a table in the reader's language; `hidden` columns stay in the frame but are not drawn;
    `greyed` columns are drawn in grey (figures shown beside the ones that count)."""
    hidden = set(hidden)
    shown = [column for column in frame.columns if column not in hidden]
    sent = sent_frame(frame, shown, rates)
    greyed_shown: list[Hashable] = [column for column in greyed if column in shown]
    st.dataframe(
        sent.style.map(lambda _: GREY, subset=greyed_shown) if greyed_shown else sent,
        hide_index=True,
        width="stretch",
        column_order=shown,
        column_config={**column_config(t, shown, rates), **options.pop("column_config", {})},
        placeholder=EMPTY,
        key=key,
        **options,
    )


def value_names(dimension: str, values: Iterable, language: str, t: Translator) -> list[str]:
    """Slice values by their names (`language` is the one `t` speaks; specialties and models as stored)."""
    return named_values(dimension, values, t)


def dimension_name(t: Translator, dimension: str) -> str:
    return t(f"insights.dimension.{dimension}")


def model_name(t: Translator, model: str) -> str:
    """A model's name; the agreement table's pooled row reads "all models"."""
    return t("analysis.all_models") if model == ALL else model


def titled(figure: go.Figure, t: Translator, x: str | None = None, y: str | None = None) -> go.Figure:
    """Axis titles (catalog keys) where a figure builder leaves an axis unnamed."""
    if x and not figure.layout.xaxis.title.text:
        figure.update_layout(xaxis_title=t(x))
    if y and not figure.layout.yaxis.title.text:
        figure.update_layout(yaxis_title=t(y))
    return figure
