"""The offline HTML report reads like the pages: catalog headers, rates as percentages with one
decimal, slice values by their taxonomy names (read here straight from the taxonomy file)."""

from __future__ import annotations

import json
import re

import pytest

from analysis import figures
from analysis.report import build_report, tables as report_tables
from db.rules.gold import PROVISIONAL
from db.rules.taxonomy import DEFAULT_TAXONOMY_FILE
from i18n import translate
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tools import metrics_reference as reference

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")

TAXONOMY = json.loads(DEFAULT_TAXONOMY_FILE.read_text(encoding="utf-8"))
KIND_OF_DIMENSION = {
    "difficulty": "difficulties",
    "macro_category": "macro_categories",
    "capability_family": "capability_families",
}


def _names(kind: str, lang: str) -> dict[str, str]:
    entries = TAXONOMY["register"]["values"] if kind == "register" else TAXONOMY[kind]
    names = {entry["id"]: entry[lang] for entry in entries}
    if kind == "macro_categories":
        names["other"] = TAXONOMY["other_macro_category"][lang]
    return names


@pytest.fixture(scope="module")
def report():
    frames = reference.synthetic_frames(20, 3, n=10, seed=4, adjudication_share=1.0)
    return build_report(frames, 4, resamples=50, gold_basis=PROVISIONAL, min_responses=1)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_slice_figures_name_their_values(report, lang):
    built = dict(figures.figures(report, figures.translator(lang)))
    for dimension in ("difficulty", "macro_category", "register"):
        kind = KIND_OF_DIMENSION.get(dimension, dimension)
        stored = sorted(report.slices.loc[report.slices["dimension"] == dimension, "value"].astype(str).unique())
        names = _names(kind, lang)
        shown = [trace.name for trace in built[f"slice_{dimension}"].data]
        assert shown == [names.get(value, value) for value in stored]
        assert any(value in names for value in stored)  # the synthetic data uses taxonomy ids
        assert built[f"slice_{dimension}"].layout.xaxis.title.text == translate("analysis.axis.model", lang)
    families = sorted(report.slices.loc[report.slices["dimension"] == "capability_family", "value"].unique())
    heatmap = built["family_heatmap"].data[0]
    assert list(heatmap.y) == [_names("capability_families", lang).get(v, v) for v in families]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_html_tables_read_in_the_readers_language(report, lang):
    page = figures.html_report(report, report_tables(report), lang=lang)
    headers = re.findall(r"<th>(.*?)</th>", page)
    assert headers, "the report has tables"
    raw = [header for header in headers if re.fullmatch(r"[a-z0-9_@:]+", header)]
    assert raw == [], f"stored column names shown as headers: {raw}"
    assert translate("analysis.column.rubric_accuracy", lang) in headers
    cells = re.findall(r"<td>(.*?)</td>", page)
    # Rubric accuracy of the first model, as a percentage with one decimal (computed here from the frame).
    accuracy = report.models["rubric_accuracy"].iloc[0]
    assert f"{accuracy * 100:.1f}%" in cells
    assert not any(re.fullmatch(r"-?0\.\d{4,}", cell) for cell in cells)
    assert "None" not in cells and "nan" not in cells
