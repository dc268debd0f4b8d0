"""The checker's pages: rubric audit, label check within the group, cross-group adjudication.

Each page module has a `render()` that starts with `shell.require_user(Role.checker)`; the rules
themselves live in db/review/.
"""

from __future__ import annotations

import streamlit as st

from db.rules.enums import Role
from db.store.models import User
from review import adjudication, label_check, rubric_audit
from ui import shell


def pages(user: User) -> list[tuple[str, st.Page]]:
    """The review area's navigation entries (none for other roles)."""
    if user.role != Role.checker:
        return []

    t = shell.t
    section = "nav.section.review"
    return [
        (
            section,
            st.Page(
                rubric_audit.render,
                title=t("review.audit.title"),
                icon=":material/fact_check:",
                url_path="review-rubrics",
            ),
        ),
        (
            section,
            st.Page(
                label_check.render, title=t("review.check.title"), icon=":material/rule:", url_path="review-labels"
            ),
        ),
        (
            section,
            st.Page(
                adjudication.render,
                title=t("review.adjudication.title"),
                icon=":material/gavel:",
                url_path="review-adjudication",
            ),
        ),
    ]
