"""The admin's analysis pages: the dashboard (report tables and figures, filtered) and the analysis depth
(criterion reliability, judge errors, physicians), all read from the decision grid `ui.shared_grid` keeps
per data version (navigation entries via `pages`)."""

from __future__ import annotations

import streamlit as st

from dashboards import dashboard, insight_pages
from db.store.models import User


def pages(user: User) -> list[tuple[str, st.Page]]:
    """The analysis pages' navigation entries (none for roles other than admin)."""
    return [*dashboard.pages(user), *insight_pages.pages(user)]
