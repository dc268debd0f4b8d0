"""Everyone's landing page: who they are and what waits for them."""

from __future__ import annotations

import streamlit as st

from db.assignments import my_queue
from db.models import AssignmentKind, Role, User
from db.rubrics import returned_to_author
from db.status import counts
from ui import shell
from ui.text import plain


def home() -> None:
    """Everyone's landing page: who they are and what waits for them."""
    user = shell.require_user()
    t = shell.translator()
    st.title(t("home.title"))
    st.markdown(t("home.welcome", name=plain(user.display_name or user.username)))
    if user.role == Role.admin:
        with shell.db_session(read_only=True) as session:
            figures = counts(session)
        columns = st.columns(4)
        columns[0].metric(t("home.cases"), f"{figures['cases']:,}")
        columns[1].metric(t("home.responses"), f"{figures['responses']:,}")
        columns[2].metric(t("home.labels"), f"{figures['labels']['total']:,}")
        columns[3].metric(t("home.users"), f"{figures['users']:,}")
    elif user.role == Role.annotator:
        with shell.db_session(read_only=True) as session:
            rubrics = my_queue(session, user, AssignmentKind.rubric)
            labels = my_queue(session, user, AssignmentKind.label)
            returned = returned_to_author(session, user)
        if returned.rubrics:
            st.warning(t("workbench.returned_to_you", n=returned.rubrics, comments=returned.comments))
        columns = st.columns(2)
        columns[0].metric(
            t("home.rubrics_open"),
            sum(not item["done"] for item in rubrics),
            help=t("home.of_assigned", total=len(rubrics)),
        )
        columns[1].metric(
            t("home.labels_open"),
            sum(not item["done"] for item in labels),
            help=t("home.of_assigned", total=len(labels)),
        )
    # The user's own progress (or open disagreements) is in the sidebar on every page.
    st.caption(t("home.hint"))


def pages(user: User) -> list[tuple[str, st.Page]]:
    return [
        (
            "nav.section.work",
            st.Page(home, title=shell.t("home.title"), icon=":material/home:", url_path="home", default=True),
        )
    ]
