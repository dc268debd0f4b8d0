"""Blocks the checker's pages share: met / not met in words, a restored draft's note, the page title and flash."""

from __future__ import annotations

import streamlit as st

from ui.shell import t
from ui.times import local_time


def met_text(met: bool) -> str:
    return t("review.met") if met else t("review.not_met")


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
