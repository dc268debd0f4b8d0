"""Downloads of every export (DESIGN §3.5), built by `analysis.exports` on demand.

An export is built only when the admin asks for it (it reads the whole database), then offered
as a download button until the page is left.
"""

from __future__ import annotations

import streamlit as st

from admin import shell, widgets
from db.errors import ClinConsensusError
from db.models import Role

EXPORTS = ("gold", "release", "judgements", "judge-items", "sft")
SOURCES = ("gold", "group1", "group2")


def _bundle(what: str, **options) -> tuple[str, bytes]:
    from analysis.exports import export_bundle

    return export_bundle(shell.engine(), what, **options)


def render() -> None:
    shell.require_user(Role.admin)
    t = shell.translator()
    st.title(t("admin.export.title"))
    st.caption(t("admin.export.intro"))
    built = st.session_state.setdefault("export_files", {})

    for what in EXPORTS:
        with st.container(border=True):
            st.markdown(f"**{t(f'admin.export.{what}')}**")
            st.caption(t(f"admin.export.{what}.help"))
            options: dict = {}
            if what == "judgements":
                options["source"] = st.selectbox(t("admin.export.source"), SOURCES, key="export_source",
                                                 format_func=lambda s: t(f"admin.export.source.{s}"))
            if what == "sft":
                left, right = st.columns(2)
                options["seed"] = int(left.number_input(t("admin.export.seed"), value=20260101, step=1, key="export_seed"))
                options["dev_fraction"] = float(right.number_input(t("admin.export.dev_fraction"), value=0.1, min_value=0.0,
                                                                   max_value=0.5, step=0.05, key="export_dev"))
            left, right = st.columns([1, 3])
            if left.button(t("admin.export.build"), key=f"build_{what}", icon=":material/build:"):
                with st.spinner(t("admin.export.building")):
                    try:
                        built[what] = _bundle(what, **options)
                    except ClinConsensusError as error:
                        widgets.show_error(error)
            if what in built:
                filename, data = built[what]
                right.download_button(t("admin.export.download", file=filename, size=f"{len(data) / 1024:,.1f}"),
                                      data=data, file_name=filename, key=f"download_{what}", type="primary",
                                      icon=":material/download:", on_click="ignore")
