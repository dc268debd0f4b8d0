"""The analysis dashboard (admins only): the report's tables and figures, filtered, each downloadable.

The decision grid of the whole database (and its default report) is built once per data version
(a cheap fingerprint read from the database, so every server process agrees) in a background thread
shared by every session; a page shows the newest grid built so far at once and refreshes itself
when the new one is in. Filters select rows of that grid, so changing a filter recomputes only the
metrics, never re-reads the database. Aggregates show model names: annotators and
checkers never reach this page.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

from analysis import figures as figure_builders, metrics
from analysis.background import BackgroundValue
from analysis.loader import data_version, load_frames
from analysis.report import Report, build_report, report_json, tables
from db.errors import ClinConsensusError
from db.models import Role
from db.policies import require_may_see_group_statistics
from db.taxonomy import get_taxonomy
from ui import shell

DASHBOARD_RESAMPLES = 300
QUICK_BUILD_LABELS = 200_000
QUICK_BUILD_WAIT_SECONDS = 60.0
POLL_SECONDS = 2  # how often a page showing an earlier data version looks for the new one
SHOWN_ROWS = 500  # long tables (per criterion, per case) show their head; the download has every row


@st.cache_resource(show_spinner=False)
def _kept_grid() -> BackgroundValue:
    """The decision grid and the default view's report, built per data version in the background (one per process)."""
    engine = shell.engine()

    def build(_version: tuple) -> tuple[metrics.DecisionGrid, Report | None]:
        grid = metrics.prepare(load_frames(engine))
        k = min(metrics.DEFAULT_K, grid.rubric_size) if grid.rubric_size else metrics.DEFAULT_K
        try:
            default = build_report(
                None,
                k,
                metrics.GOLD,
                grid=grid,
                resamples=DASHBOARD_RESAMPLES,
                judge_scored=_default_scoring_judge(grid),
            )
        except ClinConsensusError:
            default = None  # the page shows the reason when it builds this view itself
        return grid, default

    return BackgroundValue(build, name="dashboard-grid")


@st.cache_resource(show_spinner=False, max_entries=16)
def _report(
    version: tuple, filters: tuple, k: int, source: str, judge_scored: str | None, _grid: metrics.DecisionGrid
) -> Report:
    selected = _grid.subset(_selection(_grid, dict(filters)))
    # The analysis depth (criteria, judges by model and slice, physicians) has pages of its own
    # (analysis.insights); leaving it out here keeps a filter change within the dashboard's time.
    return build_report(
        None, k, source, grid=selected, resamples=DASHBOARD_RESAMPLES, judge_scored=judge_scored, insights=False
    )


@st.fragment(run_every=POLL_SECONDS)
def _reload_when_built(version: tuple) -> None:
    """Reruns the page once the background build of `version` is in (or failed)."""
    snapshot = _kept_grid().get(version)
    if snapshot.current or snapshot.error is not None:
        st.rerun()


def _judges_by_decisions(grid: metrics.DecisionGrid) -> list[str]:
    return sorted(grid.judge_rows, key=lambda name: (-int(grid.judge_rows[name][0].sum()), name))


def _default_scoring_judge(grid: metrics.DecisionGrid) -> str | None:
    judges = _judges_by_decisions(grid)
    return judges[0] if judges else None


def _scoring_judge(grid: metrics.DecisionGrid, t) -> str | None:
    """The judge that scores models without physician labels (default: the judge with most decisions)."""
    judges = _judges_by_decisions(grid)
    if not judges:
        return None
    with st.sidebar:
        return st.selectbox(
            t("judge.dashboard.scored_by"),
            [*judges, None],
            format_func=lambda name: t("judge.dashboard.none") if name is None else name,
            help=t("judge.dashboard.scored_by.help"),
            key="analysis_judge_scored",
        )


def _selection(grid: metrics.DecisionGrid, filters: dict) -> np.ndarray:
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
        wanted = set(filters["specialty"])
        keep_case &= np.array([bool(wanted & set(labels or [])) for labels in cases["subject_labels"]], dtype=bool)
    keep = keep_case[grid.case_rows] if len(grid.case_rows) else np.zeros(0, dtype=bool)
    if filters.get("models"):
        keep &= grid.responses["model"].isin(filters["models"]).to_numpy()
    return keep


def _options(grid: metrics.DecisionGrid) -> dict[str, list[str]]:
    cases = grid.cases
    return {
        "models": list(grid.models),
        "difficulty": sorted(cases["difficulty"].dropna().astype(str).unique()),
        "register": sorted(cases["register"].dropna().astype(str).unique()),
        "task_theme": sorted(metrics.case_slice_values(cases, "task_theme")["value"].unique()),
        "specialty": sorted({label for labels in cases["subject_labels"] for label in labels or []}),
    }


def _source_label(t, source: str) -> str:
    if source.startswith(metrics.JUDGE_PREFIX):
        return t("analysis.source.judge", name=source[len(metrics.JUDGE_PREFIX) :])
    return t(f"analysis.source.{source}")


def _filters(grid: metrics.DecisionGrid, t) -> tuple[dict, int, str]:
    options = _options(grid)
    with st.sidebar:
        st.header(t("analysis.filters"))
        st.caption(t("analysis.filter.all"))
        chosen = {
            "models": st.multiselect(t("analysis.filter.models"), options["models"], key="analysis_models"),
            "difficulty": st.multiselect(
                t("analysis.filter.difficulty"), options["difficulty"], key="analysis_difficulty"
            ),
            "register": st.multiselect(t("analysis.filter.register"), options["register"], key="analysis_register"),
            "task_theme": st.multiselect(t("analysis.filter.task_theme"), options["task_theme"], key="analysis_theme"),
            "specialty": st.multiselect(t("analysis.filter.specialty"), options["specialty"], key="analysis_specialty"),
        }
        sources = [
            metrics.GOLD,
            metrics.GROUP1,
            metrics.GROUP2,
            *(metrics.JUDGE_PREFIX + name for name in sorted(grid.judges)),
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
    return chosen, k, source


def _table(t, name: str, frame: pd.DataFrame, key: str) -> None:
    st.subheader(t(f"analysis.table.{name}"))
    st.dataframe(frame.head(SHOWN_ROWS), hide_index=True, width="stretch")
    if len(frame) > SHOWN_ROWS:
        st.caption(t("analysis.rows_shown", shown=SHOWN_ROWS, total=f"{len(frame):,}"))
    st.download_button(
        t("analysis.download_csv"),
        data=lambda: frame.to_csv(index=False).encode("utf-8"),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"csv_{key}",
        on_click="ignore",
    )


def _figure(t, name: str, figure, key: str) -> None:
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
    require_may_see_group_statistics(shell.require_user(Role.admin))
    t = shell.translator()
    language = shell.lang()
    st.title(t("analysis.nav"))
    version = data_version(shell.engine())
    # A small database is summarised in well under a second: wait for it, so the page is always current.
    # A large one never blocks the page: it shows the newest grid built so far and refreshes itself.
    wait = QUICK_BUILD_WAIT_SECONDS if version.approximate_labels < QUICK_BUILD_LABELS else 0.0
    snapshot = _kept_grid().wait(version, wait)
    if snapshot.error is not None:
        st.error(t("analysis.error", reason=str(snapshot.error)))
        return
    if snapshot.value is None:
        st.info(t("analysis.preparing"))
        _reload_when_built(snapshot.wanted)
        return
    if not snapshot.current:
        st.caption(t("analysis.updating"))
        _reload_when_built(snapshot.wanted)
    grid, default_report = snapshot.value
    chosen, k, source = _filters(grid, t)
    judge_scored = _scoring_judge(grid, t)
    filters = tuple((name, tuple(values)) for name, values in chosen.items())
    default_view = not any(values for _, values in filters) and (k, source, judge_scored) == (
        min(metrics.DEFAULT_K, grid.rubric_size),
        metrics.GOLD,
        _default_scoring_judge(grid),
    )
    try:
        if default_view and default_report is not None:
            report = default_report
        else:
            report = _report(snapshot.version, filters, k, source, judge_scored, grid)
    except ClinConsensusError as error:
        st.error(t("analysis.error", reason=str(error)))
        return
    if not len(report.grid.responses):
        st.info(t("analysis.empty"))
        return
    st.caption(t("analysis.summary", source=_source_label(t, source), k=report.k, n=report.n))
    columns = st.columns(5)
    overall = report.agreement.overall_mf1
    columns[0].metric(t("analysis.metric.responses"), f"{int(report.scores.complete.sum()):,}")
    columns[1].metric(t("analysis.metric.aligned"), f"{report.agreement.n_aligned:,}")
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
        data=lambda: figure_builders.html_report(report, tables(report), lang=language).encode("utf-8"),
    )
    downloads[1].download_button(
        t("analysis.download_json"),
        key="download_json",
        mime="application/json",
        file_name="report.json",
        on_click="ignore",
        data=lambda: json.dumps(report_json(report), ensure_ascii=False, indent=2, allow_nan=False).encode("utf-8"),
    )

    frames = tables(report)
    built = dict(figure_builders.figures(report, t))
    models_tab, agreement_tab, judges_tab, slices_tab, diagnostics_tab = st.tabs(
        [
            t("analysis.tab.models"),
            t("analysis.tab.agreement"),
            t("analysis.tab.judges"),
            t("analysis.tab.slices"),
            t("analysis.tab.diagnostics"),
        ]
    )
    with models_tab:
        if report.judge_scored is not None and len(report.judge_scored):
            st.caption(t("judge.dashboard.marked", judge=judge_scored, models=", ".join(report.judge_scored.index)))
        _table(t, "models", frames["models"], "models")
        for name in ("accuracy_vs_cacs", "case_accuracy", "threshold"):
            _figure(t, name, built[name], name)
    with agreement_tab:
        _table(t, "agreement", frames["agreement"], "agreement")
        _table(t, "agreement_extra", frames["agreement_extra"], "agreement_extra")
        for name in ("pooled_mf1", "case_mf1"):
            _figure(t, name, built[name], name)
        _table(t, "criterion_agreement", frames["criterion_agreement"], "criterion_agreement")
        _table(t, "low_agreement_cases", frames["low_agreement_cases"], "low_agreement_cases")
        _table(t, "case_mf1", frames["case_mf1"], "case_mf1")
    with judges_tab:
        if not report.grid.judges:
            st.info(t("analysis.no_judges"))
        _table(t, "judges", frames["judges"], "judges")
        _figure(t, "judge_fidelity", built["judge_fidelity"], "judge_fidelity")
        _table(t, "cross_grader", frames["cross_grader"], "cross_grader")
        _table(t, "positive_rates", frames["positive_rates"], "positive_rates")
        _figure(t, "rank_shifts", built["rank_shifts"], "rank_shifts")
    with slices_tab:
        for name in ("slice_difficulty", "slice_macro_category", "slice_register", "family_heatmap"):
            _figure(t, name, built[name], name)
        _table(t, "slices", _named_slices(frames["slices"], language), "slices")
    with diagnostics_tab:
        _table(t, "threshold_sensitivity", frames["threshold_sensitivity"], "threshold_sensitivity")
        _table(t, "length", frames["length"], "length")
        _figure(t, "length", built["length"], "length")
        _table(t, "pending", frames["pending"], "pending")


def _named_slices(frame: pd.DataFrame, language: str) -> pd.DataFrame:
    """Slice values with their display names (the stored ids stay in `value`)."""
    taxonomy = get_taxonomy()
    kinds = {
        "task_theme": "task_themes",
        "capability_family": "capability_families",
        "macro_category": "macro_categories",
        "register": "register",
        "difficulty": "difficulties",
    }
    names = [
        taxonomy.name(kinds.get(dimension, dimension), str(value), language)
        for dimension, value in zip(frame["dimension"], frame["value"])
    ]
    return frame.assign(name=names)[["dimension", "value", "name", "model", "cacs_at_k", "n_responses"]]


def pages(user) -> list[tuple[str, st.Page]]:
    """Navigation contribution: the dashboard, for admins only."""
    if user.role != Role.admin:
        return []
    return [
        (
            "nav.section.analysis",
            st.Page(render, title=shell.t("analysis.nav"), icon=":material/monitoring:", url_path="analysis-dashboard"),
        )
    ]
