"""The dashboard's section on drafted criteria (docs/REFERENCE.md §4.3): acceptance and edit rates of LLM
drafts by generator, author and macro-category, and the criteria authors added that drafts missed."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis import provenance
from db.rubrics.provenance import provenance_rows
from ui import shell

FIGURES = ("n_cases", "offered", "drafted", "edited", "written", "deleted", "acceptance_rate", "median_edit_distance")


def _table(t: shell.Translator, section: dict, by: str) -> None:
    rows = [{"value": value, **figures} for value, figures in section[f"by_{by}"].items()]
    frame = pd.DataFrame(rows, columns=["value", *FIGURES])
    headers = {"value": t(f"drafts.dashboard.by.{by}"), **{name: t(f"drafts.dashboard.col.{name}") for name in FIGURES}}
    st.subheader(t(f"drafts.dashboard.table.{by}"))
    st.dataframe(
        frame.rename(columns=headers),
        hide_index=True,
        width="stretch",
        column_config={
            headers["acceptance_rate"]: st.column_config.NumberColumn(format="percent"),
            headers["median_edit_distance"]: st.column_config.NumberColumn(format="%.1f"),
        },
    )


def render(t: shell.Translator) -> None:
    """The section: what authors did with drafts, for an admin (the dashboard's reader)."""
    user = shell.current_user()
    if user is None or user.role != "admin":
        return
    with shell.db_session(read_only=True) as session:
        frame = provenance.frame_of(provenance_rows(session))
    if frame.empty:
        st.info(t("drafts.dashboard.none"))
        return
    section = provenance.section_json(frame)
    overall = section["overall"]
    rate = overall["acceptance_rate"]
    st.caption(
        t(
            "drafts.dashboard.overall",
            cases=overall["n_cases"],
            offered=overall["offered"],
            rate=f"{rate:.1%}" if rate is not None else "—",
            written=overall["written"],
        )
    )
    for by in ("generator", "author", "macro_category"):
        _table(t, section, by)
    missed = provenance.written_missed(frame)
    st.subheader(t("drafts.dashboard.table.missed"))
    st.dataframe(
        missed.rename(
            columns={
                "macro_category": t("drafts.dashboard.by.macro_category"),
                "n_cases": t("drafts.dashboard.col.n_cases"),
                "written": t("drafts.dashboard.col.written"),
                "written_per_case": t("drafts.dashboard.col.written_per_case"),
            }
        ),
        hide_index=True,
        width="stretch",
    )
