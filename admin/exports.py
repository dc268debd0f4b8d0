"""Downloads of every export (docs/REFERENCE.md §3.5), built by `analysis.exports.bundle.export_bundle` on demand.

An export reads the whole database, so it is built only when the admin asks for it; the zip
(the export's files plus SUMMARY.txt) is then offered as a download until the page is left, below
what the export left out and why, in the reader's language.
"""

from __future__ import annotations

import streamlit as st

from analysis.exports.bundle import build_bundle
from analysis.exports.export_summary import DEFAULT_SEED, EXPORT_KINDS, LeftOut
from db.access.export_records import record_export
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError
from db.work import progress as progress_queries
from db.work.status import judge_names
from ui import shell, widgets

GROUP_SOURCES = ("gold", "group1", "group2")
SFT_FORMATS = ("instruction", "messages")


def _options(what: str, t: shell.Translator, judges: list[str], models: list[str]) -> dict:
    """The export's own settings, as widgets inside its card."""
    if what == "judgements":
        sources = [*GROUP_SOURCES, *(f"judge:{name}" for name in judges)]
        return {
            "source": st.selectbox(
                t("admin.export.source"),
                sources,
                key="export_source",
                format_func=lambda s: (
                    t(f"admin.export.source.{s}")
                    if s in GROUP_SOURCES
                    else t("admin.export.source.judge", name=s.split(":", 1)[1])
                ),
            ),
            # Only cases every chosen model completed go out (the official scorer needs one row per case).
            "models": st.multiselect(
                t("judge.export.models"),
                models,
                key="export_models",
                placeholder=t("judge.export.models.all"),
                help=t("judge.export.models.help"),
            ),
        }
    if what == "release":
        return {
            "difficulties": st.multiselect(
                t("judge.export.difficulty"),
                ["low", "medium", "high"],
                key="export_difficulty",
                format_func=lambda value: t(f"judge.export.difficulty.{value}"),
                placeholder=t("judge.export.difficulty.all"),
                help=t("judge.export.difficulty.help"),
            )
            or None
        }
    if what == "sft":
        left, right = st.columns(2)
        return {
            "seed": int(left.number_input(t("admin.export.seed"), value=DEFAULT_SEED, step=1, key="export_seed")),
            "dev_fraction": float(
                right.number_input(
                    t("admin.export.dev_fraction"), value=0.1, min_value=0.0, max_value=0.5, step=0.05, key="export_dev"
                )
            ),
            "fmt": left.selectbox(
                t("admin.export.format"),
                SFT_FORMATS,
                key="export_format",
                format_func=lambda f: t(f"admin.export.format.{f}"),
            ),
            "holdout_models": right.multiselect(
                t("admin.export.holdout"), models, key="export_holdout", placeholder=t("admin.export.holdout.none")
            ),
        }
    return {}


def _show_left_out(t: shell.Translator, left: list[LeftOut]) -> None:
    """What an export left out, by reason, before its download (the zip's SUMMARY.txt says it in English)."""
    if not left:
        st.caption(t("admin.export.left_out.none"))
        return
    lines = []
    for item in left:
        line = f"- {t(f'admin.export.left_out.{item.reason}', n=f'{item.count:,}')}"
        if item.items:
            more = item.count - len(item.items)
            named = t("admin.export.left_out.list_sep").join(widgets.plain(name) for name in item.items)
            line += t("admin.export.left_out.items", items=named)
            if more > 0:
                line += t("admin.export.left_out.more", n=f"{more:,}")
        lines.append(line)
    st.warning(t("admin.export.left_out.title") + "\n\n" + "\n".join(lines), icon=":material/filter_alt_off:")


def render() -> None:
    admin = shell.require_user(Role.admin)
    t = shell.translator()
    st.title(t("admin.export.title"))
    st.caption(t("admin.export.intro"))
    built = st.session_state.setdefault("export_files", {})
    left_out = st.session_state.setdefault("export_left_out", {})
    with shell.db_session(read_only=True) as session:
        judges = judge_names(session)
        models = progress_queries.model_names(session, actor=admin)

    columns = st.columns(2)
    for index, what in enumerate(EXPORT_KINDS):
        with columns[index % 2], st.container(border=True):
            st.markdown(f"**{t(f'admin.export.{what}')}**")
            st.caption(t(f"admin.export.{what}.help"))
            options = _options(what, t, judges, models)
            if st.button(t("admin.export.build"), key=f"build_{what}", icon=":material/build:"):
                bar = st.progress(0.0, text=t("admin.export.building"))

                def progress(done: int, total: int | None = None, note: str = "", bar=bar) -> None:
                    bar.progress(min(done / total, 1.0) if total else 0.0, text=t("admin.export.building"))

                try:
                    bundle = build_bundle(shell.engine(), what, progress=progress, **options)
                    built[what], left_out[what] = (bundle.filename, bundle.data), bundle.left_out
                    if what == "sft":  # the judge pages measure a judge on the models it was not trained on
                        with shell.db_session() as session:
                            details = {"holdout_models": sorted(options["holdout_models"]), "seed": options["seed"]}
                            record_export(session, actor=admin.username, kind="sft", details=details)
                except ClinConsensusError as error:
                    built.pop(what, None)
                    widgets.show_error(error)
                bar.empty()
            if what in built:
                _show_left_out(t, left_out.get(what, []))
                filename, data = built[what]
                st.download_button(
                    t("admin.export.download", file=filename, size=f"{len(data) / 1024:,.1f}"),
                    data=data,
                    file_name=filename,
                    mime="application/zip",
                    key=f"download_{what}",
                    type="primary",
                    icon=":material/download:",
                    on_click="ignore",
                )
