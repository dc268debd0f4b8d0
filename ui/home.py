"""Everyone's landing page: who they are and what waits for them."""

from __future__ import annotations

import streamlit as st

from db.rules.enums import Role
from db.store.models import User
from db.work.status import overview
from ui import shell
from ui.text import plain


def home() -> None:
    """Everyone's landing page: who they are and what waits for them."""
    user = shell.require_user()
    t = shell.translator()
    st.title(t("home.title"))
    st.markdown(t("home.welcome", name=plain(user.display_name or user.username)))
    if user.role == Role.admin:
        _database_figures(t)
    elif user.role == Role.annotator:
        _open_work(t, user)
    # The user's own progress (or open disagreements) is in the sidebar on every page.
    st.caption(t("home.hint"))


def _database_figures(t: shell.Translator) -> None:
    """The admin's view: how much the database holds."""
    with shell.db_session(read_only=True) as session:
        figures = overview(session)
    columns = st.columns(4)
    columns[0].metric(t("home.cases"), f"{figures['cases']:,}")
    columns[1].metric(t("home.responses"), f"{figures['responses']:,}")
    columns[2].metric(t("home.labels"), f"{figures['labels']['total']:,}")
    columns[3].metric(t("home.users"), f"{figures['users']:,}")


def _open_work(t: shell.Translator, user: User) -> None:
    """The annotator's view: rubrics and labels still open, and anything returned to them."""
    # The sidebar's own figures (the same queue states, kept per data version): read once per change.
    mine = shell.my_progress(user)
    if mine["returned"]:
        st.warning(t("workbench.returned_to_you", n=mine["returned"], comments=mine["returned_comments"]))
    columns = st.columns(2)
    columns[0].metric(
        t("home.rubrics_open"),
        mine["rubric_assigned"] - mine["rubric_done"],
        help=t("home.of_assigned", total=mine["rubric_assigned"]),
    )
    columns[1].metric(
        t("home.labels_open"),
        mine["label_assigned"] - mine["label_done"],
        help=t("home.of_assigned", total=mine["label_assigned"]),
    )


def pages(user: User) -> list[tuple[str, st.Page]]:
    return [
        (
            "nav.section.work",
            st.Page(home, title=shell.t("home.title"), icon=":material/home:", url_path="home", default=True),
        )
    ]
