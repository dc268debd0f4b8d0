"""Where the work stands: overall, per expert group and per annotator, and open disagreements."""

from __future__ import annotations

import streamlit as st

from db.labeling import drafts as label_drafts
from db.rules.enums import Role
from db.store.models import User
from db.work import progress as progress_queries
from ui import shell, widgets


def _share(done: int, total: int) -> float:
    return done / total if total else 0.0


def _time_on_task(admin: User, t: shell.Translator) -> None:
    """Active time per saved response, per annotator; very fast saves stand out."""
    st.subheader(t("workbench.time.title"))
    with shell.db_session(read_only=True) as session:
        rows = label_drafts.time_on_task(session, actor=admin)
    if not rows:
        st.info(t("workbench.time.empty"))
        return
    st.caption(t("workbench.time.caption"))
    st.dataframe(
        [
            {
                t("workbench.time.col.user"): row.username,
                t("workbench.time.col.group"): t("group.name", group=row.group_no) if row.group_no else "—",
                t("workbench.time.col.saves"): row.saves,
                t("workbench.time.col.median"): f"{row.median_seconds:.1f}",
                t("workbench.time.col.per_criterion"): f"{row.median_ms_per_criterion / 1000:.1f}",
                t("workbench.time.col.fast"): row.fast_saves,
                t("workbench.time.col.fast_share"): f"{row.fast_share:.1%}",
            }
            for row in rows
        ],
        hide_index=True,
        width="stretch",
    )


def render() -> None:
    admin = shell.require_user(Role.admin)
    t = shell.translator()
    st.title(t("admin.progress.title"))
    with shell.db_session(read_only=True) as session:
        state = progress_queries.progress(session, actor=admin)
    overall = state.overall

    columns = st.columns(4)
    columns[0].metric(t("admin.progress.cases"), f"{overall['cases']:,}")
    # Cases beside cases: approved rubrics over all cases, never over authoring tasks (rubrics are also imported).
    columns[1].metric(t("admin.progress.approved"), f"{overall['cases_with_approved_rubric']:,} / {overall['cases']:,}")
    columns[2].metric(t("admin.progress.responses"), f"{overall['responses']:,}")
    columns[3].metric(t("admin.progress.unresolved"), f"{overall['unresolved_disagreements']:,}")
    st.caption(t("admin.progress.cases_caption"))

    st.subheader(t("admin.progress.overall"))
    st.caption(t("admin.progress.tasks_caption"))
    widgets.progress_bar(overall["rubric_done"], overall["rubric_assigned"], label_key="admin.progress.rubric_bar")
    widgets.progress_bar(overall["label_done"], overall["label_assigned"], label_key="admin.progress.label_bar")

    st.subheader(t("admin.progress.by_group"))
    st.dataframe(
        [
            {
                t("admin.progress.col.group"): t("group.name", group=g["group"]),
                t("admin.progress.col.rubric"): f"{g['rubric_done']:,} / {g['rubric_assigned']:,}",
                t("admin.progress.col.label"): f"{g['label_done']:,} / {g['label_assigned']:,}",
                t("admin.progress.col.share"): 100 * _share(g["label_done"], g["label_assigned"]),
            }
            for g in state.groups
        ],
        hide_index=True,
        width="stretch",
        column_config={
            t("admin.progress.col.share"): st.column_config.ProgressColumn(
                t("admin.progress.col.share"), min_value=0.0, max_value=100.0, format="%.1f%%"
            )
        },
    )

    _time_on_task(admin, t)

    st.subheader(t("admin.progress.by_person"))
    if not state.people:
        st.info(t("admin.progress.nobody"))
        return
    st.dataframe(
        [
            {
                t("admin.progress.col.user"): p["username"],
                t("admin.progress.col.name"): p["display_name"] or "—",
                t("admin.progress.col.group"): t("group.name", group=p["group"]) if p["group"] else "",
                t("admin.progress.col.rubric"): f"{p['rubric_done']:,} / {p['rubric_assigned']:,}",
                t("admin.progress.col.label"): f"{p['label_done']:,} / {p['label_assigned']:,}",
                t("admin.progress.col.share"): 100 * _share(p["label_done"], p["label_assigned"]),
                t("admin.progress.col.active"): p["active"],
            }
            for p in state.people
        ],
        hide_index=True,
        width="stretch",
        column_config={
            t("admin.progress.col.share"): st.column_config.ProgressColumn(
                t("admin.progress.col.share"), min_value=0.0, max_value=100.0, format="%.1f%%"
            )
        },
    )
