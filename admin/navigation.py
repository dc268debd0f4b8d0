"""Which pages each role sees. Each area contributes its pages through its own `pages()` function."""

from __future__ import annotations

import streamlit as st

from admin import shell
from db.models import Role, User


def home() -> None:
    user = shell.require_user()
    st.title(shell.t("home.title"))
    st.write(shell.t("home.welcome", name=user.display_name or user.username))


def pages_for(user: User) -> dict[str, list]:
    t = shell.t
    sections: dict[str, list] = {t("nav.section.work"): [st.Page(home, title=t("home.title"), url_path="home", default=True)]}
    return sections
