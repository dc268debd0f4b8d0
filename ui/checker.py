"""Blocks the checker's pages share: met / not met names, the page title with its flash message, the response box."""

from __future__ import annotations

import streamlit as st

from ui.shell import t
from ui.times import local_time
from ui.widgets import show_text


def met_text(met: bool) -> str:
    return t("review.met") if met else t("review.not_met")


def met_names() -> dict[bool, str]:
    """Met / not met in the user's language, as a plain lookup: widgets call format_func after the run too."""
    return {True: met_text(True), False: met_text(False)}


def draft_note(draft, unsaved: bool) -> str | None:
    """The line a reopened response shows about its restored draft (db/review/drafts.py), or None."""
    if draft is None:
        return None
    parts = []
    if unsaved:
        parts.append(t("workbench.draft_restored", when=local_time(draft.at)))
    if draft.dropped:
        parts.append(t("workbench.draft_dropped", n=draft.dropped))
    return " ".join(parts) or None


def page_start(title_key: str, flash_key: str) -> None:
    """The page title, then the message a save left for the run after it (saves end with st.rerun)."""
    st.title(t(title_key))
    message = st.session_state.pop(flash_key, None)
    if message:
        st.success(message)
        st.toast(message, icon=":material/check_circle:")  # also where the reader is looking (the save button)


#: A response longer than this scrolls in a box of RESPONSE_BOX_HEIGHT pixels, keeping the criteria close.
LONG_RESPONSE_CHARS, LONG_RESPONSE_LINES, RESPONSE_BOX_HEIGHT = 600, 12, 360


def response_box(text: str) -> None:
    long = len(text or "") > LONG_RESPONSE_CHARS or (text or "").count("\n") > LONG_RESPONSE_LINES
    with st.container(height=RESPONSE_BOX_HEIGHT if long else "content", border=True):
        show_text(text)
