"""Widgets shared by the annotator's, the checker's and the admin's pages.

User-supplied text (cases, responses, criteria, notes, even case ids and model names from an
imported file) is shown ONLY through this module:

- `show_text(text)` for running text: `st.text`, which never parses Markdown or HTML, keeps line
  breaks and wraps long lines (Chinese included) in the app's normal, readable font.
- `plain(text)` for user text inside a label that Streamlit renders as Markdown (expander titles,
  tab names, radio options, captions): every Markdown/HTML character is backslash-escaped, so
  `<img …>`, `![x](url)`, `[link](url)`, `:red[…]` and `$…$` all show as typed and fetch nothing.

`case_card(case)` and `progress_bar(done, total)` are the common blocks of the work pages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from db.rules.errors import DatabaseBusy, DiskFull
from db.rules.limits import MAX_UPLOAD_MB
from db.rules.taxonomy import get_taxonomy
from i18n import catalog
from ui.shell import lang, t
from ui.text import WORD_JOINER, plain  # noqa: F401  (re-exported for pages)

#: Streamlit's own "Drag and drop … 200MB per file" line is English whatever the page; `file_upload`
#: says the limit in the page's language instead.
_HIDE_STREAMLIT_LIMIT = "<style>[data-testid='stFileUploaderDropzoneInstructions'] { display: none; }</style>"

#: Fields of a case, in the order a physician reads them, with their catalog labels.
CASE_META_FIELDS = ("difficulty", "task", "subject", "user_role")
CASE_TEXT_FIELDS = ("clinical_context", "user_request")


def show_text(text: Any, *, empty: str | None = None) -> None:
    """Render user-supplied text as plain text (no Markdown, no HTML), keeping its line breaks."""
    value = "" if text is None else str(text)
    if not value.strip():
        st.caption(empty if empty is not None else t("widgets.empty_text"))
        return
    st.text(value, width="stretch", wrap=True)


def _field(case: Any, name: str) -> Any:
    if isinstance(case, Mapping):
        return case.get(name)
    return getattr(case, name, None)


def subject_text(subject: str | None) -> str:
    """A case's specialty as written in the case; on an English page with the English name of its
    category beside it ("神经内科 (Neurology and psychiatry)"): the case's own words stay the data."""
    if not subject:
        return "—"
    taxonomy = get_taxonomy()
    category = taxonomy.macro_category([subject])
    if lang() == "zh" or category == "other":
        return subject
    return f"{subject} ({taxonomy.name('macro_categories', category, lang())})"


def asker_text(user_role: str | None) -> str:
    """Who asked, as written in the case; on an English page with its register beside it
    ("患者家属 (Lay-facing)")."""
    if not user_role:
        return "—"
    if lang() == "zh":
        return user_role
    taxonomy = get_taxonomy()
    return f"{user_role} ({taxonomy.name('register', taxonomy.register(user_role), lang())})"


def case_card(case: Any, *, expanded_text: bool = True) -> None:
    """A bordered card with a case's id, difficulty, task, subject, asker and its two texts.

    `case` is a mapping or an object with the `Case` field names (`case_id`, `difficulty`, `task`,
    `subject`, `user_role`, `clinical_context`, `user_request`); missing fields are left out.
    """
    with st.container(border=True):
        # Bold rather than a heading: headings get anchor links, a case id needs none.
        st.markdown(f"**{t('widgets.case')} {plain(_field(case, 'case_id'))}**")
        present = [name for name in CASE_META_FIELDS if _field(case, name)]
        if present:
            # Each field as wide as its words, wrapping to the next line in a narrow pane: equal columns
            # squeezed a two-character header into one character a line.
            with st.container(horizontal=True, gap="medium"):
                for name in present:
                    with st.container(width="content", gap=None):
                        st.caption(t(f"widgets.case.{name}"))
                        value = _field(case, name)
                        # Difficulty is stored as an id (low/medium/high); show its name in the user's language.
                        if name == "difficulty":
                            value = get_taxonomy().name("difficulties", value, lang())
                        elif name == "subject":
                            value = subject_text(value)
                        elif name == "user_role":
                            value = asker_text(value)
                        show_text(value)
        for name in CASE_TEXT_FIELDS:
            if _field(case, name) is None:
                continue
            if expanded_text:
                st.caption(t(f"widgets.case.{name}"))
                show_text(_field(case, name))
            else:
                with st.expander(t(f"widgets.case.{name}")):
                    show_text(_field(case, name))


def progress_bar(done: int, total: int, *, label_key: str = "widgets.progress") -> None:
    """A progress bar with "done / total (share)" in the user's language; an empty queue shows 0."""
    share = done / total if total else 0.0
    st.progress(
        min(max(share, 0.0), 1.0), text=t(label_key, done=f"{done:,}", total=f"{total:,}", share=f"{share:.1%}")
    )


#: Parameters of a refusal that are vocabulary codes, and the catalog entries that name them.
_NAMED_PARAMS = {"role": "role.{}", "status": "review.status.{}", "field": "errors.field.{}"}


def _param_text(name: str, value: Any, markdown: bool) -> Any:
    """One parameter of a message as the reader sees it: sentences and codes in their language, a field
    of a file as code, user text escaped."""
    if getattr(value, "key", None):
        return said(value, markdown=markdown)
    if name in _NAMED_PARAMS:
        key = _NAMED_PARAMS[name].format(str(value).replace(" ", "_"))
        if key in catalog():
            return t(key)
    if name in ("field", "choices") and isinstance(value, str):
        # Field names and values of the file format, as typed in the file (a code span shows its text literally).
        parts = [" ".join(part.replace("`", "'").split()) for part in value.split(" / ")]
        return " / ".join(f"`{part}`" if markdown else f"“{part}”" for part in parts)
    if isinstance(value, str):
        return plain(value) if markdown else value
    return value


def said(text: Any, *, markdown: bool = True) -> str:
    """A sentence of the data layer (db.rules.errors.Said: an import problem, a summary line) in the reader's
    language; a plain string is shown as it is (escaped when it goes through Markdown)."""
    key = getattr(text, "key", None)
    if key and key in catalog():
        params = getattr(text, "params", {})
        return t(key, **{name: _param_text(name, value, markdown) for name, value in params.items()})
    return plain(text) if markdown else str(text)


def reason_text(error: Exception, *, markdown: bool = True) -> str:
    """Why the data layer refused, in the reader's words: the catalog entry `key` of the error filled with
    its `params` (db.rules.errors; user text in them escaped when the text goes through Markdown, as is for
    plain-text widgets). An error without a key shows its message."""
    key = getattr(error, "key", None)
    if key and key in catalog():
        params = {name: _param_text(name, value, markdown) for name, value in getattr(error, "params", {}).items()}
        return t(key, **params)
    return plain(error) if markdown else str(error)


def error_text(error: Exception, *, markdown: bool = True) -> str:
    """A data-layer error in the reader's words: "busy, try again" for a save that waited behind an import,
    else "nothing was changed" and the refusal's reason (`reason_text`)."""
    if isinstance(error, DatabaseBusy):
        return t("security.busy")
    if isinstance(error, DiskFull):
        return t("errors.disk_full")
    return t("error.generic", reason=reason_text(error, markdown=markdown))


def show_error(error: Exception) -> None:
    """A data-layer error for the person who caused it, in red; its message is shown as text."""
    st.error(error_text(error))


def person_label(username: str, display_name: str | None) -> str:
    """A person as pickers show them: "王晓（anno1a）", or the username alone when it is their only name.

    Returned as plain text (for format_func and table cells), not markdown.
    """
    if not display_name or display_name == username:
        return username
    return t("widgets.person", name=display_name, username=username)


def file_upload(label: str, *, key: str, help: str | None = None) -> Any:
    """A file uploader with the upload limit said in the page's language under it."""
    upload = st.file_uploader(label, key=key, max_upload_size=MAX_UPLOAD_MB, help=help)
    st.caption(t("language.upload_limit", mb=MAX_UPLOAD_MB))
    st.html(_HIDE_STREAMLIT_LIMIT)
    return upload
