"""Which pages each role sees, built from one small contribution per area.

How an area adds its pages (annotate/, review/, analysis/dashboard.py, admin/pages/):

1. Give the area a function `pages(user) -> list[tuple[str, st.Page]]` returning
   `(section catalog key, page)` pairs for the pages `user`'s role may see, and nothing for the
   other roles. Section keys: `nav.section.work`, `nav.section.review`, `nav.section.analysis`,
   `nav.section.admin`. Page titles come from the catalog (`shell.t`; inside a page use
   `t = shell.translator()`, which stays bound to the user's language in format_func callbacks); give every page a unique
   `url_path` starting with the area's name (`annotate-rubrics`, `review-adjudication`, …).
2. Add ONE line for it to `_areas()` below (imported there, not at module top, so a page module
   may import `admin.shell` freely).
3. Each page function still starts with `shell.require_user(<its roles>)`: navigation only hides,
   the page and the db/ functions refuse.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from admin import shell
from db.assignments import my_queue
from db.models import AssignmentKind, Role, User
from db.status import counts

Area = Callable[[User], list[tuple[str, "st.Page"]]]


def _areas() -> list[Area]:
    from admin.pages import pages as admin_pages
    from analysis.dashboard import pages as analysis_pages
    from annotate import pages as annotate_pages
    from review import pages as review_pages

    return [
        home_pages,
        annotate_pages,
        review_pages,
        analysis_pages,
        admin_pages,
    ]


def home() -> None:
    """Everyone's landing page: who they are and what waits for them."""
    from admin.widgets import plain

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
        columns = st.columns(2)
        columns[0].metric(t("home.rubrics_open"), sum(not item["done"] for item in rubrics),
                          help=t("home.of_assigned", total=len(rubrics)))
        columns[1].metric(t("home.labels_open"), sum(not item["done"] for item in labels),
                          help=t("home.of_assigned", total=len(labels)))
    # The user's own progress (or open disagreements) is in the sidebar on every page.
    st.caption(t("home.hint"))


def home_pages(user: User) -> list[tuple[str, st.Page]]:
    return [("nav.section.work", st.Page(home, title=shell.t("home.title"), icon=":material/home:",
                                         url_path="home", default=True))]


def pages_for(user: User) -> dict[str, list[st.Page]]:
    """The navigation of `user`: section title → pages, in the order the areas contribute them."""
    sections: dict[str, list[st.Page]] = {}
    for area in _areas():
        for section_key, page in area(user):
            sections.setdefault(shell.t(section_key), []).append(page)
    return sections

