"""The admin's pages: imports, accounts and groups, assignments, progress, exports, judge runs.

Each page module has a `render()` that starts with `shell.require_user(Role.admin)`.
"""

from __future__ import annotations

import streamlit as st

from db.store.models import Role, User
from ui import shell


def pages(user: User) -> list[tuple[str, st.Page]]:
    """The admin area's navigation entries (none for other roles)."""
    if user.role != Role.admin:
        return []
    from admin import (
        assignments,
        audit_log,
        exports,
        feedback,
        imports,
        judge_runs,
        leaderboard,
        new_model,
        progress,
        users,
    )

    t = shell.translator()
    section = "nav.section.admin"
    return [
        (
            section,
            st.Page(
                progress.render,
                title=t("admin.progress.title"),
                icon=":material/monitoring:",
                url_path="admin-progress",
            ),
        ),
        (
            section,
            st.Page(
                imports.render, title=t("admin.import.title"), icon=":material/upload_file:", url_path="admin-import"
            ),
        ),
        (section, st.Page(users.render, title=t("admin.users.title"), icon=":material/group:", url_path="admin-users")),
        (
            section,
            st.Page(
                assignments.render,
                title=t("admin.assign.title"),
                icon=":material/assignment_ind:",
                url_path="admin-assignments",
            ),
        ),
        (
            section,
            st.Page(
                feedback.render,
                title=t("admin.feedback.title"),
                icon=":material/rate_review:",
                url_path="admin-feedback",
            ),
        ),
        (
            section,
            st.Page(
                exports.render, title=t("admin.export.title"), icon=":material/download:", url_path="admin-exports"
            ),
        ),
        (
            section,
            st.Page(
                judge_runs.render,
                title=t("judge.nav"),
                icon=":material/gavel:",
                url_path="admin-judge-runs",
            ),
        ),
        (
            section,
            st.Page(
                leaderboard.render,
                title=t("leaderboard.nav"),
                icon=":material/leaderboard:",
                url_path="admin-leaderboard",
            ),
        ),
        (
            section,
            st.Page(
                new_model.render,
                title=t("new_model.nav"),
                icon=":material/new_releases:",
                url_path="admin-new-model",
            ),
        ),
        (
            section,
            st.Page(
                audit_log.render,
                title=t("review.audit_log.title"),
                icon=":material/history:",
                url_path="admin-audit-log",
            ),
        ),
    ]
