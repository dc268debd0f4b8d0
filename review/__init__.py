"""The checker's pages: rubric audit, label check within the group, cross-group adjudication.

Each page module has a `render()` that starts with `shell.require_user(Role.checker)`; the rules
themselves live in db/review.py.
"""

from __future__ import annotations

import streamlit as st

from db.models import Role, User


def pages(user: User) -> list[tuple[str, st.Page]]:
    """The review area's navigation entries (none for other roles)."""
    if user.role != Role.checker:
        return []
    from admin import shell
    from review import adjudication, label_check, rubric_audit

    t = shell.t
    section = "nav.section.review"
    return [
        (section, st.Page(rubric_audit.render, title=t("review.audit.title"), icon=":material/fact_check:",
                          url_path="review-rubrics")),
        (section, st.Page(label_check.render, title=t("review.check.title"), icon=":material/rule:",
                          url_path="review-labels")),
        (section, st.Page(adjudication.render, title=t("review.adjudication.title"), icon=":material/gavel:",
                          url_path="review-adjudication")),
    ]


def met_text(met: bool) -> str:
    from admin.shell import t

    return t("review.met") if met else t("review.not_met")


def met_names() -> dict[bool, str]:
    """Met / not met in the user's language, as a plain lookup: widgets call format_func after the run too."""
    return {True: met_text(True), False: met_text(False)}


def page_start(title_key: str, flash_key: str) -> None:
    """The page title, then the message a save left for the run after it (saves end with st.rerun)."""
    from admin.shell import t

    st.title(t(title_key))
    message = st.session_state.pop(flash_key, None)
    if message:
        st.success(message)


#: A response longer than this scrolls in a box of RESPONSE_BOX_HEIGHT pixels, keeping the criteria close.
LONG_RESPONSE_CHARS, LONG_RESPONSE_LINES, RESPONSE_BOX_HEIGHT = 600, 12, 360


def response_box(text: str) -> None:
    from admin.widgets import show_text

    long = len(text or "") > LONG_RESPONSE_CHARS or (text or "").count("\n") > LONG_RESPONSE_LINES
    with st.container(height=RESPONSE_BOX_HEIGHT if long else "content", border=True):
        show_text(text)

