"""Upload cases, responses, labels or judge decisions through the command line's importer.

The upload goes to `db.importers.import_stream` under its own file name, so the page and
`clinconsensus import` accept and refuse exactly the same files, with the same messages (file,
line, field) and the same rule: one transaction per file, a bad file changes nothing.
"""

from __future__ import annotations

import streamlit as st

from db.importers import JUDGE_FORMATS, KINDS, ImportFailed, import_stream
from db.rules.enums import Role
from db.rules.limits import MAX_UPLOAD_MB
from db.store.models import User
from db.work.status import judge_decision_count, overview
from ui import shell, widgets

AUTO_FORMAT = "auto"


def _counts_table() -> dict:
    with shell.db_session(read_only=True) as session:
        current = overview(session)
        judged = judge_decision_count(session)
    t = shell.translator()
    return {
        t("admin.import.count.cases"): current["cases"],
        t("admin.import.count.responses"): current["responses"],
        t("admin.import.count.labels"): current["labels"]["total"],
        t("admin.import.count.labels_older"): current["labels"]["on_older_rubric"],
        t("admin.import.count.judge"): judged,
    }


def run_import(
    kind: str,
    name: str,
    upload,
    *,
    fmt: str | None,
    judge: str | None,
    actor: str,
    progress,
    override_freeze: bool = False,
) -> tuple[bool, list[str]]:
    """Import one uploaded file; (ok, message lines). On failure nothing is changed."""
    try:
        summary = import_stream(
            shell.engine(),
            kind,
            name,
            upload,
            fmt=fmt,
            judge=judge,
            actor=actor,
            progress=progress,
            override_freeze=override_freeze,
        )
    except ImportFailed as failure:
        return False, failure.errors
    return True, summary.lines()


#: Streamlit's drop zone states the limit in its own words and units (512 MB reads "1GB per file"); the
#: page states ours, from the catalog, beside the uploader instead. Its "Drag and drop file here" and
#: "Browse files" words are Streamlit's own and cannot be translated by the page.
#: The file names the importer reads. The uploader itself accepts any file, so a wrong one is refused
#: here in the reader's language instead of by Streamlit's English "text/plain files are not allowed".
ACCEPTED_SUFFIXES = (".jsonl", ".json", ".ndjson")
#: Bumped after every import: a fresh uploader key empties the uploader, so the next click cannot
#: import the same file again.
_UPLOAD_ROUND = "import_upload_round"
_RESULT = "import_result"
_REFUSED = "import_refused_name"
#: Labels: change annotation labels made final by an opened feedback round (audited).
_OVERRIDE_FREEZE = "import_override_freeze"


def accepted_name(name: str) -> bool:
    return name.lower().endswith(ACCEPTED_SUFFIXES)


def _judge_options(t: shell.Translator) -> tuple[str | None, str | None]:
    """The judge file's format and judge name (asked only for judge decisions)."""
    left, right = st.columns(2)
    fmt = left.selectbox(
        t("admin.import.format"),
        (AUTO_FORMAT, *JUDGE_FORMATS),
        format_func=lambda f: t(f"admin.import.format.{f}"),
        key="import_format",
        help=t("admin.import.format.help"),
    )
    judge = right.text_input(t("admin.import.judge"), help=t("admin.import.judge.help"), key="import_judge")
    return (None if fmt == AUTO_FORMAT else fmt), (judge.strip() or None)


def _show_result(t: shell.Translator) -> None:
    result = st.session_state.get(_RESULT)
    if not result:
        return
    ok, file, lines = result
    if ok:
        st.success(t("admin.import.done", file=widgets.plain(file)))
    else:
        st.error(t("admin.import.failed", file=widgets.plain(file)))
    with st.container(border=True):
        st.caption(t("admin.import.messages"))
        for line in lines:
            if ok:
                widgets.show_text(widgets.said(line, markdown=False))
            else:
                st.error(widgets.said(line))


def _import_upload(t: shell.Translator, user: User, kind: str, upload, fmt: str | None, judge: str | None) -> None:
    """Run the import with a progress bar, keep its result for the next run and empty the uploader."""
    bar = st.progress(0.0, text=t("admin.import.running"))

    def progress(done: int, total: int | None = None, note: str = "") -> None:
        share = min(done / total, 1.0) if total else 0.0
        bar.progress(share, text=t("admin.import.progress", done=f"{done:,}", total=f"{total:,}" if total else "?"))

    override = kind == "labels" and bool(st.session_state.get(_OVERRIDE_FREEZE))
    ok, lines = run_import(
        kind,
        upload.name,
        upload,
        fmt=fmt,
        judge=judge,
        actor=user.username,
        progress=progress,
        override_freeze=override,
    )
    bar.empty()
    st.session_state[_RESULT] = (ok, upload.name, lines)
    st.session_state[_UPLOAD_ROUND] = st.session_state.get(_UPLOAD_ROUND, 0) + 1
    st.rerun()


def render() -> None:
    user = shell.require_user(Role.admin)
    t = shell.translator()
    st.title(t("admin.import.title"))
    st.caption(t("admin.import.intro"))

    with st.container(border=True):
        # Outside any form, so the judge's fields appear as soon as judge decisions are chosen.
        kind = st.selectbox(
            t("admin.import.kind"), KINDS, format_func=lambda k: t(f"admin.import.kind.{k}"), key="import_kind"
        )
        fmt, judge = _judge_options(t) if kind == "judge" else (None, None)
        if kind == "labels":
            st.checkbox(t("admin.import.override_freeze"), key=_OVERRIDE_FREEZE)
        upload = widgets.file_upload(
            t("admin.import.file"),
            key=f"import_file_{st.session_state.get(_UPLOAD_ROUND, 0)}",
            help=t("admin.import.file.help", mb=MAX_UPLOAD_MB),
        )
        submitted = st.button(t("admin.import.submit"), type="primary", icon=":material/upload:", key="import_submit")

    refused = st.session_state.pop(_REFUSED, None)
    if upload is not None and not accepted_name(upload.name):
        # Emptied at once, so the refused file can be neither imported nor left in the way of the next one.
        st.session_state[_REFUSED] = upload.name
        st.session_state.pop(_RESULT, None)
        st.session_state[_UPLOAD_ROUND] = st.session_state.get(_UPLOAD_ROUND, 0) + 1
        st.rerun()
    if refused:
        st.error(t("admin.import.wrong_type", file=widgets.plain(refused)))
    elif submitted and upload is None:
        st.warning(t("admin.import.no_file"))
    elif submitted:
        _import_upload(t, user, kind, upload, fmt, judge)
    _show_result(t)

    st.subheader(t("admin.import.counts"))
    st.dataframe(
        [{t("admin.import.count.what"): k, t("admin.import.count.rows"): v} for k, v in _counts_table().items()],
        column_config={t("admin.import.count.rows"): st.column_config.NumberColumn(format="localized")},
        hide_index=True,
        width="content",
    )
