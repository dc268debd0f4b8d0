"""What every figure builder shares: the translator type, the look of a figure and the percentage format."""

from __future__ import annotations

import plotly.graph_objects as go

from analysis.columns import Translator
from i18n import translate

#: Rates on an axis: percentages with one decimal, as the pages show them.
PERCENT = ".1%"


def translator(lang: str = "en") -> Translator:
    """Catalog lookup for output made outside a page (the HTML report)."""
    return lambda key, **values: translate(key, lang, **values)


def layout(figure: go.Figure, title: str, **axes) -> go.Figure:
    """The one look of every figure: its title, the white template, margins, the legend below."""
    figure.update_layout(
        title=title,
        template="plotly_white",
        margin=dict(l=60, r=20, t=60, b=60),
        legend=dict(orientation="h", y=-0.2),
        **axes,
    )
    return figure
