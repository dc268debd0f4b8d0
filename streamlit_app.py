"""ClinConsensus Studio: the browser app. `streamlit run streamlit_app.py` (or `clinconsensus serve`).

Navigation is built here, from one `pages(user)` contribution per page room, so no lower room
imports a page room. Each `pages(user)` returns `(section catalog key, st.Page)` pairs for the
pages `user`'s role may see, and nothing for other roles; every page checks the role again itself
(`shell.require_user`), and the db/ functions refuse whatever the navigation hides.
"""

import streamlit as st

import admin
import annotate
import dashboards
import review
from db.rules.errors import DiskFull
from ui import home, process, shell

process.freeze_imports_once()  # every module above is in: the collector stops walking them

PAGE_ROOMS = (home.pages, annotate.pages, review.pages, dashboards.pages, admin.pages)


def pages_for(user) -> dict[str, list[st.Page]]:
    """The navigation of `user`: section title → pages, in the order the rooms contribute them."""
    sections: dict[str, list[st.Page]] = {}
    for room_pages in PAGE_ROOMS:
        for section_key, page in room_pages(user):
            sections.setdefault(shell.t(section_key), []).append(page)
    return sections


st.set_page_config(page_title="ClinConsensus Studio", page_icon="🩺", layout="wide")

try:
    user = shell.current_user()
    if user is None:
        navigation = st.navigation([st.Page(shell.login_page, title=shell.t("login.title"), url_path="login")])
    else:
        shell.sidebar(user)
        # Every page in view: an admin has more than the ten a collapsed menu shows.
        navigation = st.navigation(pages_for(user), expanded=True)
    navigation.run()
except DiskFull:
    # A write that ran out of disk on a page without its own message: one line, never a traceback.
    st.error(shell.t("errors.disk_full"))
