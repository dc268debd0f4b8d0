"""The analysis pages read in the reader's language: every table header, axis title and legend entry comes
from the catalog, rates are percentages with one decimal, stored ids are named, nothing reads `None`.

Runs the dashboard (every section) and the three analysis-depth pages on the small demo through AppTest,
in Chinese and in English, and checks what the browser would be told to draw.
"""

from __future__ import annotations

import json
import re

import pytest
from sqlmodel import Session, select

import i18n
from db.store.models import JudgeDecision
from demo import generator
from tests.support.apptest_helpers import open_page, signed_in, texts

SECTIONS = ("models", "agreement", "judges", "slices", "diagnostics")
INSIGHT_PAGES = ("analysis-criteria", "analysis-judge-errors", "analysis-physicians")
#: A stored identifier: lower-case words joined by "_", "@" or ":" (pooled_mf1, cacs@1, unverifiable_reasoning).
IDENTIFIER = re.compile(r"^[a-z0-9]+(?:[_@:][a-z0-9]+)+$")
LONG_FLOAT = re.compile(r"\d\.\d{4,}")
STORED_DIFFICULTIES = {"low", "medium", "high"}


@pytest.fixture
def demo_database(app_database):
    generator.build_demo(app_database, scale="small", seed=7)
    with Session(app_database) as session:
        judges = set(session.exec(select(JudgeDecision.judge).distinct()).all())
    assert judges  # the positive-rate table has a column per judge: those headers are names, not catalog text
    return app_database, judges


def _catalog_patterns(lang: str) -> list[re.Pattern]:
    """Every catalog text of `lang` as a pattern (placeholders match anything)."""
    return [
        re.compile("^" + re.sub(r"\\\{\w+\\\}", ".+", re.escape(entry[lang])) + "$", re.DOTALL)
        for entry in i18n.catalog().values()
    ]


def _from_catalog(text: str, patterns: list[re.Pattern]) -> bool:
    return any(pattern.match(text) for pattern in patterns)


def _check_tables(app, lang: str, patterns, judges: set[str], where: str) -> int:
    checked = 0
    for element in app.dataframe:
        proto = element.proto
        config = json.loads(proto.columns or "{}")
        frame = element.value
        shown = list(proto.column_order) or [str(column) for column in frame.columns]
        assert proto.placeholder == "—", f"{where}: an empty cell would read None"
        for column in shown:
            label = config.get(column, {}).get("label", column)
            if column in judges:
                assert label == column, f"{where}: {column}"
            else:
                assert _from_catalog(label, patterns), f"{where}: header {label!r} of {column!r} is not {lang} text"
                assert label != column or not IDENTIFIER.match(column), f"{where}: raw header {column!r}"
            values = frame[column]
            number = config.get(column, {}).get("type_config", {})
            if values.dtype.kind == "f":
                # a rate as a percentage with one decimal (the step's 3 decimals less the 2 of "percent"),
                # a score with three, points with one, whole numbers whole: never a long float
                assert (number.get("format"), number.get("step")) in {
                    ("percent", 0.001),
                    ("%.3f", None),
                    ("%.1f", None),
                    ("localized", 1),
                }, f"{where}: {column} {number}"
            elif values.dtype.kind in "OSU" or str(values.dtype).startswith("str"):
                cells = [str(value) for value in values.dropna()]
                assert "None" not in cells, f"{where}: {column} shows None"
                raw = [cell for cell in cells if IDENTIFIER.match(cell)]
                assert not raw, f"{where}: {column} shows stored ids {raw[:3]}"
            checked += 1
    return checked


def _check_charts(app, lang: str, patterns, judges: set[str], where: str) -> int:
    charts = app.get("plotly_chart")
    for chart in charts:
        spec = json.loads(chart.proto.spec)
        layout = spec["layout"]
        title = layout.get("title", {}).get("text", "")
        assert _from_catalog(title, patterns), f"{where}: title {title!r}"
        for axis in ("xaxis", "yaxis"):
            text = layout.get(axis, {}).get("title", {}).get("text")
            assert text and _from_catalog(text, patterns), f"{where}: {title!r} {axis} title {text!r}"
        for trace in spec["data"]:
            name = trace.get("name")
            if name:
                assert not IDENTIFIER.match(str(name)), f"{where}: {title!r} legend {name!r}"
    return len(charts)


def _check_text(app, where: str) -> None:
    shown = texts(app) + "\n" + "\n".join(f"{m.label} {m.value}" for m in app.metric)
    assert "None" not in shown, where
    assert not LONG_FLOAT.search(shown), f"{where}: {LONG_FLOAT.search(shown).group()}"
    # the filters' choices are named too (a difficulty reads 高/High, not its stored id)
    for widget in [*app.multiselect, *app.selectbox]:
        options = [str(option) for option in widget.options]
        raw = [option for option in options if IDENTIFIER.match(option) or option in STORED_DIFFICULTIES]
        assert not raw, f"{where}: {widget.label} offers {raw[:3]}"


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_analysis_pages_speak_the_readers_language(demo_database, lang):
    database, judges = demo_database
    patterns = _catalog_patterns(lang)
    admin = generator.ADMIN.username
    app = open_page(signed_in(database, admin, lang=lang), "analysis-dashboard")
    columns = charts = 0
    for section in SECTIONS:
        app.segmented_control(key="analysis_section").set_value(section).run()
        where = f"dashboard/{section} ({lang})"
        assert not app.exception, [e.value for e in app.exception]
        columns += _check_tables(app, lang, patterns, judges, where)
        charts += _check_charts(app, lang, patterns, judges, where)
        _check_text(app, where)
    assert columns >= 100 and charts >= 12  # every table and figure of the dashboard was looked at

    for page in INSIGHT_PAGES:
        app = open_page(signed_in(database, admin, lang=lang), page)
        where = f"{page} ({lang})"
        assert not app.exception, [e.value for e in app.exception]
        assert app.dataframe or app.info, where
        _check_tables(app, lang, patterns, judges, where)
        _check_charts(app, lang, patterns, judges, where)
        _check_text(app, where)


def test_the_checks_catch_raw_identifiers_and_long_floats():
    assert IDENTIFIER.match("pooled_mf1") and IDENTIFIER.match("cacs@1") and IDENTIFIER.match("unverifiable_reasoning")
    assert not IDENTIFIER.match("model-a") and not IDENTIFIER.match("CC-0001") and not IDENTIFIER.match("c01")
    assert LONG_FLOAT.search("κ = 0.27315") and not LONG_FLOAT.search("κ = 0.273")
    patterns = _catalog_patterns("zh")
    assert _from_catalog(i18n.translate("analysis.column.cacs_at", "zh", k=7), patterns)
    assert not _from_catalog("pooled_mf1", patterns) and not _from_catalog("Pooled macro-F1", patterns)
