"""The annotator's pages: rubric authoring, hit labeling, feedback after a round (navigation entries via `pages`)."""

from __future__ import annotations

import streamlit as st

from db.rules.enums import Role
from db.store.models import User
from ui import shell


def pages(user: User) -> list[tuple[str, st.Page]]:
    """The annotator's navigation entries (none for other roles)."""
    if user.role == Role.admin:
        from annotate import references

        return [
            (
                "nav.section.work",
                st.Page(
                    references.render,
                    title=shell.t("rubric_quality.admin_title"),
                    icon=":material/menu_book:",
                    url_path="annotate-rubrics",
                ),
            )
        ]
    if user.role != Role.annotator:
        return []
    from annotate import authoring, feedback, labeling

    t = shell.t
    section = "nav.section.work"
    return [
        (
            section,
            st.Page(
                labeling.render,
                title=t("annotate.labeling.title"),
                icon=":material/checklist:",
                url_path="annotate-labeling",
            ),
        ),
        (
            section,
            st.Page(
                authoring.render,
                title=t("annotate.authoring.title"),
                icon=":material/edit_note:",
                url_path="annotate-rubrics",
            ),
        ),
        (
            section,
            st.Page(
                feedback.render,
                title=t("annotate.feedback.title"),
                icon=":material/fact_check:",
                url_path="annotate-feedback",
            ),
        ),
    ]
