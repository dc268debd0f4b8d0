"""Which pages each role sees, built from one small contribution per area.

How an area adds its pages (annotate/, review/, analysis/dashboard.py, admin/pages/):

1. Give the area a function `pages(user) -> list[tuple[str, st.Page]]` returning
   `(section catalog key, page)` pairs for the pages `user`'s role may see, and nothing for the
   other roles. Section keys: `nav.section.work`, `nav.section.review`, `nav.section.analysis`,
   `nav.section.admin`. Page titles come from the catalog (`shell.t`); give every page a unique
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
from db.models import User

Area = Callable[[User], list[tuple[str, "st.Page"]]]


def _areas() -> list[Area]:
    from admin.pages import pages as admin_pages
    from annotate import pages as annotate_pages
    from review import pages as review_pages

    return [
        home_pages,
        annotate_pages,
        review_pages,
        admin_pages,
    ]


def home() -> None:
    """Everyone's landing page: who they are and what waits for them."""
    user = shell.require_user()
    st.title(shell.t("home.title"))
    st.write(shell.t("home.welcome", name=user.display_name or user.username))
    shell.work_summary(user)


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

