"""Upload cases, responses, labels or judge decisions through the command line's importer.

The upload is written under its own file name to a private temporary folder and handed to
`db.importers.import_file`, so the page and `clinconsensus import` accept and refuse exactly
the same files, with the same messages (file, line, field) and the same one-transaction rule.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from admin import shell, widgets
from db.models import Role
from db.status import counts

KINDS = ("cases", "responses", "labels", "judge")
JUDGE_FORMATS = ("auto", "decisions", "local-judge", "official")
#: Uploads are read in pieces of this size, so a large file never sits in memory twice.
CHUNK_BYTES = 4 * 1024 * 1024


def _counts_table() -> dict:
    with shell.db_session(read_only=True) as session:
        current = counts(session)
    t = shell.t
    return {
        t("admin.import.count.cases"): current["cases"],
        t("admin.import.count.responses"): current["responses"],
        t("admin.import.count.labels"): current["labels"]["total"],
        t("admin.import.count.judge"): current["judge_decisions"],
    }


def run_import(engine, kind: str, name: str, upload, *, fmt: str | None, actor: str, progress) -> tuple[bool, list[str]]:
    """Import one uploaded file; (ok, message lines). On failure nothing is changed."""
    from db.importers import ImportFailed, import_file

    with tempfile.TemporaryDirectory(prefix="cc-upload-") as folder:
        # Only the base name: an uploaded name never chooses where the file lands.
        path = Path(folder) / (Path(name).name or "upload.jsonl")
        with path.open("wb") as out:
            while chunk := upload.read(CHUNK_BYTES):
                out.write(chunk)
        try:
            summary = import_file(engine, kind, path, fmt=fmt, actor=actor, progress=progress)
        except ImportFailed as failure:
            return False, [line.replace(folder + "/", "") for line in failure.errors]
        return True, [line.replace(folder + "/", "") for line in summary.lines()]


def render() -> None:
    user = shell.require_user(Role.admin)
    t = shell.t
    st.title(t("admin.import.title"))
    st.caption(t("admin.import.intro"))

    with st.form("import_form", clear_on_submit=False):
        left, right = st.columns([2, 1])
        with left:
            kind = st.selectbox(t("admin.import.kind"), KINDS, format_func=lambda k: t(f"admin.import.kind.{k}"),
                                key="import_kind")
        with right:
            fmt = st.selectbox(t("admin.import.format"), JUDGE_FORMATS,
                               format_func=lambda f: t(f"admin.import.format.{f}"), key="import_format",
                               help=t("admin.import.format.help"))
        upload = st.file_uploader(t("admin.import.file"), type=["jsonl", "json", "ndjson"], key="import_file")
        submitted = st.form_submit_button(t("admin.import.submit"), type="primary", icon=":material/upload:")

    if submitted:
        if upload is None:
            st.warning(t("admin.import.no_file"))
        else:
            bar = st.progress(0.0, text=t("admin.import.running"))

            def progress(done: int, total: int | None = None, note: str = "") -> None:
                share = min(done / total, 1.0) if total else 0.0
                bar.progress(share, text=t("admin.import.progress", done=f"{done:,}",
                                          total=f"{total:,}" if total else "?"))

            judge_format = None if kind != "judge" or fmt == "auto" else fmt
            ok, lines = run_import(shell.engine(), kind, upload.name, upload, fmt=judge_format,
                                   actor=user.username, progress=progress)
            bar.empty()
            if ok:
                st.success(t("admin.import.done", file=widgets.plain(upload.name)))
            else:
                st.error(t("admin.import.failed", file=widgets.plain(upload.name)))
            box = st.container(border=True)
            with box:
                st.caption(t("admin.import.messages"))
                for line in lines:
                    if ok:
                        widgets.show_text(line)
                    else:
                        st.error(widgets.plain(line))

    st.subheader(t("admin.import.counts"))
    st.dataframe([{t("admin.import.count.what"): k, t("admin.import.count.rows"): v} for k, v in _counts_table().items()],
                 hide_index=True, width="content")
