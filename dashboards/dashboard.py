"""The analysis dashboard (admins only): the report's tables and figures, filtered, each downloadable.

The decision grid of the whole database is built once per data version (a cheap fingerprint read
from the database, so every server process agrees) in a background thread and shared with the
analysis-depth pages (`ui.shared_grid`); from it the default view's report and every figure,
in every language, are built in the background too, so a visit draws no figure: it shows the newest
view built so far at once and refreshes itself when the new one is in. Only the chosen section is
drawn, and choosing another reruns that section alone. Filters select rows of the grid, so
changing a filter recomputes only the metrics, never re-reads the database; a filtered view's
figures are kept per (data version, filters, language). Aggregates show model names: annotators
and checkers never reach this page.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis import (
    comparisons,
    figures as figure_builders,
    metrics,
    score_figures,
    score_tables,
)
from analysis.background import BackgroundValue
from analysis.bootstrap import DEFAULT_SEED
from analysis.exports.csv_cells import csv_bytes
from analysis.frames import JUDGE_PREFIX
from analysis.grid import DecisionGrid
from analysis.reliability.insights import build_insights
from analysis.report import Report, build_report, json_bytes, report_json, tables
from db.access.policies import StatisticsPolicy, authorize
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError
from db.rules.gold import PROVISIONAL, default_basis
from db.store.models import User
from i18n import DEFAULT_LANGUAGE
from ui import gold_basis, provenance_view, shared_grid, shell, table_view, validity_page
from ui.text import plain
from ui.widgets import reason_text

DASHBOARD_RESAMPLES = 300
SHOWN_ROWS = 500  # long tables (per criterion, per case) show their head; the download has every row

#: The page's sections, in order; only the chosen one is drawn. Each names its figures.
SECTIONS = ("models", "scores", "agreement", "judges", "slices", "rubric_quality", "diagnostics", "drafts")


def _slice_bars(dimension: str) -> Callable[[Report, Callable[..., str]], go.Figure]:
    return lambda report, t: figure_builders.slice_bars(report, t, dimension)


FIGURES: dict[str, Callable[[Report, Callable[..., str]], go.Figure]] = {
    "accuracy_vs_cacs": figure_builders.accuracy_vs_cacs,
    "case_accuracy": figure_builders.case_accuracy_threshold,
    "threshold": figure_builders.threshold_sensitivity,
    "pooled_mf1": lambda report, t: table_view.titled(
        figure_builders.pooled_mf1(report, t), t, x="analysis.axis.model"
    ),
    "case_mf1": figure_builders.case_mf1_distribution,
    "judge_fidelity": lambda report, t: table_view.titled(
        figure_builders.judge_fidelity(report, t), t, x="analysis.axis.judge"
    ),
    "rank_shifts": figure_builders.rank_shifts,
    "slice_difficulty": _slice_bars("difficulty"),
    "slice_macro_category": _slice_bars("macro_category"),
    "slice_register": _slice_bars("register"),
    "family_heatmap": figure_builders.family_heatmap,
    "length": figure_builders.length_diagnostics,
    **score_figures.SCORE_FIGURES,
}


#: The figures of the section a visit opens on (models), drawn with the default view in the background build.
FIRST_SCREEN_FIGURES = ("accuracy_vs_cacs", "case_accuracy", "threshold")


@dataclass(frozen=True)
class Kept:
    """What the page needs of one data version, built in the background: nothing of it is drawn per visit."""

    grid: DecisionGrid
    default: Report | None  # the default view's report (None: the page shows why when it builds it)
    judges: list[str]  # judges by number of decisions, most first
    fidelity: dict[str, float]  # each judge's pooled macro-F1 against gold (NaN: no decision has gold)
    options: dict[str, list[str]]  # the filters' choices
    figures: dict[tuple[str, str], go.Figure]  # the default view's figures, by (language, name)


def _build(grid: DecisionGrid) -> Kept:
    judges = _judges_by_decisions(grid)
    k = min(metrics.DEFAULT_K, grid.rubric_size) if grid.rubric_size else metrics.DEFAULT_K
    try:
        default = build_report(
            None,
            k,
            metrics.GOLD,
            grid=grid,
            resamples=DASHBOARD_RESAMPLES,
            insights=False,  # the page shows none of it; a download adds it (`_complete`)
        )
    except ClinConsensusError:
        default = None
    figures = {}
    if default is not None and len(default.grid.responses):
        # Only what the first screen shows, in the default language: drawing every section's figures in both
        # languages would keep a first visit after new data waiting. The others are drawn when their section
        # is opened, once per data version (`_view_figure`).
        t = figure_builders.translator(DEFAULT_LANGUAGE)
        figures.update({(DEFAULT_LANGUAGE, name): FIGURES[name](default, t) for name in FIRST_SCREEN_FIGURES})
    pooled = metrics.judge_fidelity(grid)["mf1_gold"].astype(float) if judges else pd.Series(dtype=float)
    fidelity = {str(judge): float(mf1) for judge, mf1 in pooled.items()}
    return Kept(grid, default, judges, fidelity, _options(grid), figures)


def _complete(report: Report) -> Report:
    """The report as `clinconsensus report` writes it, its analysis depth included: built when a download is
    clicked, since the page shows none of it and a first visit should not wait for it."""
    if report.insights is not None:
        return report
    return dataclasses.replace(
        report, insights=build_insights(report.grid, resamples=DASHBOARD_RESAMPLES, seed=DEFAULT_SEED)
    )


@st.cache_resource(show_spinner=False)
def _kept_grid() -> BackgroundValue[Kept]:
    """The default view (report and figures, in every language) and the filters' choices, per data version,
    built in the background from the grid every analysis page shares (one per process)."""
    return shared_grid.derived(_build, name="dashboard-view")


@st.cache_resource(show_spinner=False, max_entries=16)
def _report(
    version: Hashable,
    filters: tuple,
    k: int,
    source: str,
    judge_scored: str | None,
    gold_basis: str,
    _grid: DecisionGrid,
) -> Report:
    selected = _grid.subset(_selection(_grid, dict(filters)))
    # The analysis depth (criteria, judges by model and slice, physicians) has pages of its own
    # (dashboards.insight_pages); leaving it out here keeps a filter change within the dashboard's time.
    return build_report(
        None,
        k,
        source,
        grid=selected,
        resamples=DASHBOARD_RESAMPLES,
        judge_scored=judge_scored,
        insights=False,
        gold_basis=gold_basis,
    )


@st.cache_resource(show_spinner=False, max_entries=256)
def _view_figure(version: Hashable, view: tuple, language: str, name: str, _report: Report) -> go.Figure:
    """A figure of a filtered view, drawn once per (data version, view, language)."""
    return FIGURES[name](_report, figure_builders.translator(language))


def _judges_by_decisions(grid: DecisionGrid) -> list[str]:
    return sorted(grid.judge_rows, key=lambda name: (-int(grid.judge_rows[name][0].sum()), name))


def _fidelity_text(fidelity: dict[str, float], judge: str) -> str:
    value = fidelity.get(judge, float("nan"))
    return "—" if not np.isfinite(value) else f"{value:.3f}"


def _scoring_judge(judges: list[str], fidelity: dict[str, float], t: shell.Translator) -> str | None:
    """The judge the admin picks to score models without physician labels; none by default, since a
    judge's scores are only as good as its agreement with gold, shown beside each choice."""
    if not judges:
        return None
    with st.sidebar:
        return st.selectbox(
            t("judge.dashboard.scored_by"),
            [None, *judges],
            format_func=lambda name: (
                t("judge.dashboard.none")
                if name is None
                else t("analysis.judge_choice", name=name, mf1=_fidelity_text(fidelity, name))
            ),
            help=t("judge.dashboard.scored_by.help"),
            key="analysis_judge_scored",
        )


def _selection(grid: DecisionGrid, filters: dict) -> np.ndarray:
    """Boolean mask of the grid's responses that pass every filter (an empty filter passes everything)."""
    cases = grid.cases
    keep_case = np.ones(len(cases), dtype=bool)
    if filters.get("difficulty"):
        keep_case &= cases["difficulty"].isin(filters["difficulty"]).to_numpy()
    if filters.get("register"):
        keep_case &= cases["register"].isin(filters["register"]).to_numpy()
    if filters.get("task_theme"):
        themes = metrics.case_slice_values(cases, "task_theme")
        wanted = themes.loc[themes["value"].isin(filters["task_theme"]), "case_row"].to_numpy()
        keep_case &= np.isin(np.arange(len(cases)), wanted)
    if filters.get("specialty"):
        specialties = set(filters["specialty"])
        keep_case &= np.array([bool(specialties & set(labels or [])) for labels in cases["subject_labels"]], dtype=bool)
    keep = keep_case[grid.case_rows] if len(grid.case_rows) else np.zeros(0, dtype=bool)
    if filters.get("models"):
        keep &= grid.responses["model"].isin(filters["models"]).to_numpy()
    return keep


def _options(grid: DecisionGrid) -> dict[str, list[str]]:
    cases = grid.cases
    return {
        "models": list(grid.models),
        "difficulty": sorted(cases["difficulty"].dropna().astype(str).unique()),
        "register": sorted(cases["register"].dropna().astype(str).unique()),
        "task_theme": sorted(metrics.case_slice_values(cases, "task_theme")["value"].unique()),
        "specialty": sorted({label for labels in cases["subject_labels"] for label in labels or []}),
    }


def _source_label(t: shell.Translator, source: str) -> str:
    if source.startswith(JUDGE_PREFIX):
        return t("analysis.source.judge", name=source[len(JUDGE_PREFIX) :])
    return t(f"analysis.source.{source}")


def _filters(grid: DecisionGrid, options: dict[str, list[str]], t: shell.Translator) -> tuple[dict, int, str, bool]:
    with st.sidebar:
        st.header(t("analysis.filters"))
        st.caption(t("analysis.filter.all"))
        language = shell.lang()

        def named(dimension: str) -> Callable[[str], str]:
            return lambda value: table_view.value_names(dimension, [value], language, t)[0]

        chosen = {
            "models": st.multiselect(t("analysis.filter.models"), options["models"], key="analysis_models"),
            "difficulty": st.multiselect(
                t("analysis.filter.difficulty"),
                options["difficulty"],
                format_func=named("difficulty"),
                key="analysis_difficulty",
            ),
            "register": st.multiselect(
                t("analysis.filter.register"),
                options["register"],
                format_func=named("register"),
                key="analysis_register",
            ),
            "task_theme": st.multiselect(
                t("analysis.filter.task_theme"),
                options["task_theme"],
                format_func=named("task_theme"),
                key="analysis_theme",
            ),
            "specialty": st.multiselect(t("analysis.filter.specialty"), options["specialty"], key="analysis_specialty"),
        }
        sources = [
            metrics.GOLD,
            metrics.GROUP1,
            metrics.GROUP2,
            *(JUDGE_PREFIX + name for name in sorted(grid.judges)),
        ]
        source = st.selectbox(
            t("analysis.filter.source"),
            sources,
            format_func=lambda value: _source_label(t, value),
            key="analysis_source",
        )
        n = grid.rubric_size
        k = int(
            st.number_input(
                t("analysis.filter.k"),
                min_value=1,
                max_value=n,
                value=min(metrics.DEFAULT_K, n),
                step=1,
                key="analysis_k",
            )
        )
        provisional = gold_basis.basis_toggle(t, "analysis_provisional") == PROVISIONAL
    return chosen, k, source, provisional


def _table(t: shell.Translator, name: str, frame: pd.DataFrame, key: str, **options) -> None:
    st.subheader(t(f"analysis.table.{name}"))
    table_view.show(t, frame.head(SHOWN_ROWS), key=f"table_{key}", **options)
    if len(frame) > SHOWN_ROWS:
        st.caption(t("analysis.rows_shown", shown=SHOWN_ROWS, total=f"{len(frame):,}"))
    st.download_button(
        t("analysis.download_csv"),
        data=lambda: csv_bytes(frame),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"csv_{key}",
        on_click="ignore",
    )


def _figure(t: shell.Translator, name: str, figure: go.Figure, key: str) -> None:
    st.plotly_chart(figure, key=f"chart_{key}", width="stretch")
    st.download_button(
        t("analysis.download_html"),
        data=lambda: figure_builders.figure_html(figure).encode("utf-8"),
        file_name=f"{name}.html",
        mime="text/html",
        key=f"html_{key}",
        on_click="ignore",
    )


def render() -> None:
    with shell.db_session(read_only=True) as session:
        authorize(session, shell.require_user(Role.admin), StatisticsPolicy.see_group_figures())
    t = shell.translator()
    language = shell.lang()
    st.title(t("analysis.nav"))
    snapshot = shared_grid.newest(_kept_grid(), t)
    if snapshot is None:
        return
    kept = snapshot.value
    grid = kept.grid
    chosen, k, source, provisional = _filters(grid, kept.options, t)
    judge_scored = _scoring_judge(kept.judges, kept.fidelity, t)
    filters = tuple((name, tuple(values)) for name, values in chosen.items())
    # Provisional figures only when asked for; the default is the setting (final unless an admin changed it).
    basis = PROVISIONAL if provisional else default_basis()
    view = (filters, k, source, judge_scored, basis)
    default_view = not any(values for _, values in filters) and (k, source, judge_scored) == (
        min(metrics.DEFAULT_K, grid.rubric_size),
        metrics.GOLD,
        None,
    )
    default_view = default_view and kept.default is not None and kept.default.gold_basis == basis
    try:
        if default_view and kept.default is not None:
            report = kept.default
        else:
            report = _report(snapshot.version, filters, k, source, judge_scored, basis, grid)
    except ClinConsensusError as error:
        st.error(t("analysis.error", reason=reason_text(error)))
        return
    if not len(report.grid.responses):
        st.info(t("analysis.empty"))
        return

    def figure_of(name: str) -> go.Figure:
        kept_figure = kept.figures.get((language, name)) if report is kept.default else None
        return kept_figure or _view_figure(snapshot.version, view, language, name, report)

    _summary(t, report, source, language)
    _sections(t, report, figure_of, (judge_scored, kept.fidelity), language)


def _summary(t: shell.Translator, report: Report, source: str, language: str) -> None:
    st.caption(t("analysis.summary", source=_source_label(t, source), k=report.k, n=report.n))
    st.caption(score_tables.basis_caption(t, report.gold_basis, report.min_responses))
    columns = st.columns(5)
    overall = report.agreement.overall_mf1
    columns[0].metric(
        t("analysis.metric.responses"),
        f"{int(report.scores.complete.sum()):,}",
        help=t("analysis.metric.responses_help"),
    )
    columns[1].metric(
        t("analysis.metric.aligned"), f"{report.agreement.n_aligned:,}", help=t("analysis.metric.aligned_help")
    )
    columns[2].metric(t("analysis.metric.overall_mf1"), "—" if np.isnan(overall) else f"{overall:.3f}")
    columns[3].metric(t("analysis.metric.unresolved"), f"{report.pending['unresolved_disagreements']:,}")
    columns[4].metric(t("analysis.metric.incomplete"), f"{report.pending['incomplete_responses']:,}")

    downloads = st.columns(2)
    downloads[0].download_button(
        t("analysis.download_report"),
        key="download_report",
        mime="text/html",
        file_name="report.html",
        on_click="ignore",
        data=lambda: figure_builders.html_report(_complete(report), tables(report), lang=language).encode("utf-8"),
    )
    downloads[1].download_button(
        t("analysis.download_json"),
        key="download_json",
        mime="application/json",
        file_name="report.json",
        on_click="ignore",
        data=lambda: json_bytes(report_json(_complete(report))),
    )


@st.fragment
def _sections(
    t: shell.Translator, report: Report, figure_of: Callable[[str], go.Figure], judge: tuple, language: str
) -> None:
    """The chosen section only (a choice reruns this part alone); its figures come drawn already."""
    section = st.segmented_control(
        t("analysis.section"),
        SECTIONS,
        default=SECTIONS[0],
        required=True,
        format_func=lambda name: t(f"analysis.tab.{name}"),
        key="analysis_section",
        label_visibility="collapsed",
    )
    frames = _shown_tables(t, report, language)
    if section == "models":
        judged = [] if report.judge_scored is None else list(report.judge_scored.index)
        calibrated = report.scores_section.calibrated if report.scores_section is not None else {}
        _models_tables(t, frames["models"], judged, calibrated, *judge)
        _table(t, "judge_pairs", metrics.judge_pair_scores(report.grid, report.k), "judge_pairs")
        st.caption(t("gold_basis.judge_pairs_caption"))
        for name in ("accuracy_vs_cacs", "case_accuracy", "threshold"):
            _figure(t, name, figure_of(name), name)
    elif section == "scores":
        _scores_section(t, report, figure_of)
    elif section == "agreement":
        _table(t, "agreement", frames["agreement"], "agreement")
        _table(t, "agreement_extra", frames["agreement_extra"], "agreement_extra")
        for name in ("pooled_mf1", "case_mf1"):
            _figure(t, name, figure_of(name), name)
        _table(t, "criterion_agreement", frames["criterion_agreement"], "criterion_agreement")
        _table(t, "low_agreement_cases", frames["low_agreement_cases"], "low_agreement_cases")
        _table(t, "case_mf1", frames["case_mf1"], "case_mf1")
    elif section == "judges":
        if not report.grid.judges:
            st.info(t("analysis.no_judges"))
        _table(t, "judges", frames["judges"], "judges")
        _figure(t, "judge_fidelity", figure_of("judge_fidelity"), "judge_fidelity")
        _table(t, "cross_grader", frames["cross_grader"], "cross_grader")
        _table(t, "positive_rates", frames["positive_rates"], "positive_rates", rates=report.grid.judges)
        _figure(t, "rank_shifts", figure_of("rank_shifts"), "rank_shifts")
    elif section == "slices":
        for name in ("slice_difficulty", "slice_macro_category", "slice_register", "family_heatmap"):
            _figure(t, name, figure_of(name), name)
        _table(t, "slices", frames["slices"], "slices", hidden=["value"])
    elif section == "rubric_quality":
        validity_page.render_section(t, report, language)
    elif section == "drafts":
        provenance_view.render(t)  # what authors did with LLM drafts (docs/REFERENCE.md §4.3)
    else:
        _table(t, "threshold_sensitivity", frames["threshold_sensitivity"], "threshold_sensitivity")
        _table(t, "length", frames["length"], "length")
        _figure(t, "length", figure_of("length"), "length")
        _table(t, "pending", frames["pending"], "pending")


#: The model table's columns on the dashboard's first screen.
FIRST_SCREEN_MODEL_COLUMNS = ("model", "n_responses", "rubric_accuracy", "pass_at_k", "cacs_at_k", "mean_length")
#: The model column's width there: names up to about 16 characters whole.
MODEL_COLUMN_PX = 130


def _models_tables(
    t: shell.Translator,
    models: pd.DataFrame,
    judged: list[str],
    calibrated: dict,
    judge_scored: str | None,
    fidelity: dict[str, float],
) -> None:
    """Models scored by the chosen source in one table; models the picked judge scored stand apart, under
    that judge's fidelity, with the calibrated score first where a calibration sample allows one and the
    judge's raw score greyed beside it."""
    by_judge = models["model"].isin(judged).to_numpy()
    # The first screen holds what models are compared by, so it fits the page at 1024 px beside the sidebar; the
    # intervals, the source and CACS at every threshold (30 columns) are one click away (the CSV keeps them all).
    # Models without a response on the basis yet (all "—") follow the scored ones; a long model name is cut in its
    # column (the cell opens whole) rather than pushing the figures out of view.
    shown = models[~by_judge]
    shown = pd.concat([shown[shown["n_responses"] > 0], shown[~(shown["n_responses"] > 0)]], ignore_index=True)
    rest = [column for column in shown.columns if column not in FIRST_SCREEN_MODEL_COLUMNS and column != "scored_by"]
    model_column = st.column_config.Column(t("analysis.column.model"), width=MODEL_COLUMN_PX, pinned=True)
    _table(t, "models", shown, "models", hidden=["scored_by", *rest], column_config={"model": model_column})
    if rest:
        with st.expander(t("daily.dashboard.every_threshold")):
            table_view.show(t, shown[["model", *rest]], key="table_models_every_threshold")
    if judge_scored is None or not by_judge.any():
        return
    scored = models[by_judge].dropna(axis="columns", how="all").reset_index(drop=True)
    scored = score_figures.calibrated_columns(scored, calibrated, judge_scored)
    st.subheader(t("analysis.table.models_judge_scored"))
    table_view.show(t, scored, key="table_models_judge_scored", hidden=["scored_by"], greyed=["raw_cacs"])
    st.download_button(
        t("analysis.download_csv"),
        data=lambda: csv_bytes(scored),
        file_name="models_judge_scored.csv",
        mime="text/csv",
        key="csv_models_judge_scored",
        on_click="ignore",
    )
    st.caption(t("analysis.judge_scored_caption", name=plain(judge_scored), mf1=_fidelity_text(fidelity, judge_scored)))
    st.caption(t("analysis.calibrated_caption"))


def _scores_section(t: shell.Translator, report: Report, figure_of: Callable[[str], go.Figure]) -> None:
    _figure(t, "leaderboard", figure_of("leaderboard"), "leaderboard")
    _pairwise(t, report, figure_of("pairwise"))
    plan = score_figures.sample_size_table(report)
    if not len(plan):
        st.info(t("analysis.no_calibration"))
        return
    _figure(t, "calibrated", figure_of("calibrated"), "calibrated")
    _table(t, "sample_size", plan, "sample_size")


def _pairwise(t: shell.Translator, report: Report, figure: go.Figure) -> None:
    """The pairwise matrix; a click on a cell (or the two pickers below it) lists the cases whose paired
    differences make that comparison, largest first."""
    event = st.plotly_chart(figure, key="chart_pairwise", width="stretch", on_select="rerun", selection_mode="points")
    st.download_button(
        t("analysis.download_html"),
        data=lambda: figure_builders.figure_html(figure).encode("utf-8"),
        file_name="pairwise.html",
        mime="text/html",
        key="html_pairwise",
        on_click="ignore",
    )
    models = list(report.grid.models)
    if len(models) < 2:
        return
    points = event.selection.points if event is not None else []
    if points and points[0].get("x") in models and points[0].get("y") in models and points[0]["x"] != points[0]["y"]:
        # a clicked cell is row A against column B (the matrix shows A − B)
        st.session_state["pair_a"], st.session_state["pair_b"] = points[0]["y"], points[0]["x"]
    left, right = st.columns(2)
    a = left.selectbox(t("analysis.pair.a"), models, index=0, key="pair_a")
    b = right.selectbox(t("analysis.pair.b"), models, index=1, key="pair_b")
    if a == b:
        st.caption(t("analysis.pair.same"))
        return
    cases = comparisons.differing_cases(report.grid, report.scores, report.k, a, b)
    st.caption(t("analysis.pair.caption", a=plain(a), b=plain(b), k=report.k, n=len(cases)))
    table_view.show(t, cases.rename(columns={"model_a": a, "model_b": b}), rates=[a, b], key="table_pair_cases")


def _shown_tables(t: shell.Translator, report: Report, language: str) -> dict[str, pd.DataFrame]:
    """The report's tables with stored ids named in the reader's language (the numbers as they are)."""
    frames = tables(report)
    models = frames["models"]
    frames["models"] = models.assign(scored_by_name=[_source_label(t, source) for source in models["scored_by"]])
    for name in ("agreement", "agreement_extra"):
        frames[name] = frames[name].assign(model=[table_view.model_name(t, m) for m in frames[name]["model"]])
    slices = frames["slices"]
    names = pd.Series("", index=slices.index, dtype=object)
    for dimension, part in slices.groupby("dimension", sort=False):
        named = table_view.value_names(str(dimension), part["value"], language, t)
        names[part.index] = pd.Series(named, index=part.index, dtype=object)
    frames["slices"] = slices.assign(
        dimension=[table_view.dimension_name(t, str(d)) for d in slices["dimension"]], name=names
    )[["dimension", "value", "name", "model", "cacs_at_k", "n_responses"]]
    return frames


def pages(user: User) -> list[tuple[str, st.Page]]:
    """Navigation contribution: the dashboard, for admins only."""
    if user.role != Role.admin:
        return []
    return [
        (
            "nav.section.analysis",
            st.Page(render, title=shell.t("analysis.nav"), icon=":material/monitoring:", url_path="analysis-dashboard"),
        )
    ]
