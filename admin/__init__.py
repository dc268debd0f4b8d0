"""The admin's pages: imports, accounts and groups, assignments, progress, exports, judge runs.

Each page module has a `render()` that starts with `shell.require_user(Role.admin)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import streamlit as st

from db.rules.enums import Role
from db.store.models import User
from ui import shell


class AdminPage(NamedTuple):
    """One entry of the admin area's menu."""

    render: Callable[[], None]
    title_key: str  # catalog key of the menu title
    icon: str
    url_path: str


def pages(user: User) -> list[tuple[str, st.Page]]:
    """The admin area's navigation entries (none for other roles)."""
    if user.role != Role.admin:
        return []
    t = shell.translator()
    return [
        ("nav.section.admin", st.Page(page.render, title=t(page.title_key), icon=page.icon, url_path=page.url_path))
        for page in _admin_pages()
    ]


def _admin_pages() -> list[AdminPage]:
    """The admin's pages in menu order."""
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

    return [
        AdminPage(progress.render, "admin.progress.title", ":material/monitoring:", "admin-progress"),
        AdminPage(imports.render, "admin.import.title", ":material/upload_file:", "admin-import"),
        AdminPage(users.render, "admin.users.title", ":material/group:", "admin-users"),
        AdminPage(assignments.render, "admin.assign.title", ":material/assignment_ind:", "admin-assignments"),
        AdminPage(feedback.render, "admin.feedback.title", ":material/rate_review:", "admin-feedback"),
        AdminPage(exports.render, "admin.export.title", ":material/download:", "admin-exports"),
        AdminPage(judge_runs.render, "judge.nav", ":material/gavel:", "admin-judge-runs"),
        AdminPage(leaderboard.render, "leaderboard.nav", ":material/leaderboard:", "admin-leaderboard"),
        AdminPage(new_model.render, "new_model.nav", ":material/new_releases:", "admin-new-model"),
        AdminPage(audit_log.render, "review.audit_log.title", ":material/history:", "admin-audit-log"),
    ]
