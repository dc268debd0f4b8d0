"""The dashboard's rubric quality section (docs/REFERENCE.md §4.2): cases whose reference answer does not reach k,
flagged criteria by macro-category, and the paper's Figure 6 for a chosen case."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis.report import Report
from analysis.rubric_quality import cases_below_k, flag_counts
from analysis.validity_figure import case_points, figure6
from analysis.validity_section import load_validity
from db.rules.taxonomy import get_taxonomy
from ui import shell


def render_section(t: shell.Translator, report: Report, language: str) -> None:
    grid = report.grid
    validity = load_validity(shell.engine(), grid, report.k)
    if not validity:
        st.info(t("rubric_quality.dashboard.none"))
    taxonomy = get_taxonomy()
    macro = dict(zip(grid.cases["case_id"], grid.cases["macro_category"]))

    st.subheader(t("rubric_quality.dashboard.below_k", k=report.k))
    below = cases_below_k(validity, report.k)
    if below:
        frame = pd.DataFrame(below, columns=[t("rubric_quality.column.case"), t("rubric_quality.column.reference_s")])
        st.dataframe(frame, hide_index=True, key="quality_below_k")
    else:
        st.caption(t("rubric_quality.dashboard.none_below"))

    st.subheader(t("rubric_quality.dashboard.flags"))
    counts = flag_counts(validity, macro)
    if len(counts):
        shown = pd.DataFrame(
            {
                t("rubric_quality.column.macro"): [
                    taxonomy.name("macro_categories", value, language) for value in counts["macro_category"]
                ],
                t("rubric_quality.column.flag"): [t(f"rubric_quality.flag.{flag}") for flag in counts["flag"]],
                t("rubric_quality.column.n_criteria"): counts["n_criteria"].astype(int),
                t("rubric_quality.column.n_cases"): counts["n_cases"].astype(int),
            }
        )
        st.dataframe(shown, hide_index=True, key="quality_flags")
    else:
        st.caption(t("rubric_quality.dashboard.no_flags"))

    st.subheader(t("rubric_quality.figure.title"))
    case_ids = grid.cases["case_id"].tolist()
    preferred = [case_id for case_id in case_ids if case_id in validity] or case_ids
    if not preferred:
        return
    chosen = st.selectbox(t("rubric_quality.pick_case"), preferred, key="quality_figure_case")
    entry = validity.get(chosen, {})
    figure = figure6(case_points(grid, chosen), report.k, report.n, entry.get("reference_s"), t)
    st.plotly_chart(figure, key="chart_quality_figure6", width="stretch")
