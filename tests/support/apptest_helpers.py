"""Running the real app (streamlit_app.py) headless with Streamlit's AppTest on a test database.

`app_database` points DATABASE_URL at a fresh migrated SQLite file and clears the process's
cached engines; `signed_in(app, user)` opens a login session the way the login form does, so
tests that are not about the login form skip the password hashing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from db.access import users
from db.store.engine import get_engine, make_engine, session_scope

ENTRY_FILE = str(Path(__file__).resolve().parents[2] / "streamlit_app.py")
TIMEOUT = 60


def _clear_caches() -> None:
    get_engine.cache_clear()
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture
def app_database(sqlite_url, monkeypatch):
    """A fresh database the app under test uses; yields an engine on it for arranging and checking."""
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    _clear_caches()
    engine = make_engine(sqlite_url)
    yield engine
    engine.dispose()
    get_engine(sqlite_url).dispose()  # the app's shared engine on this database
    _clear_caches()


def new_app() -> AppTest:
    return AppTest.from_file(ENTRY_FILE, default_timeout=TIMEOUT)


def sign_in_token(engine, username: str) -> str:
    with session_scope(engine) as session:
        return users.open_session(session, user=users.get_user(session, username=username))


def signed_in(engine, username: str, *, lang: str | None = None) -> AppTest:
    """The app, already run once, for `username` signed in (optionally in `lang`)."""
    app = new_app()
    app.session_state["token"] = sign_in_token(engine, username)
    if lang:
        app.session_state["lang"] = lang
    return app.run()


def open_page(app: AppTest, url_path: str) -> AppTest:
    """Go to the navigation page with `url_path`, as a browser opening /<url_path> would."""
    app._page_hash = calc_hash(url_path)  # st.Page identifies a page by the hash of its url_path
    return app.run()


def texts(app: AppTest) -> str:
    """Everything the page shows as text, in one string, for `in` checks."""
    parts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "text", "error", "warning", "success", "info"):
        parts += [str(element.value) for element in getattr(app, kind)]
    return "\n".join(parts)


def button(app: AppTest, label: str):
    matches = [b for b in app.button if b.label == label]
    assert matches, f"no button {label!r} among {[b.label for b in app.button]}"
    return matches[0]


def widget_key_of(app: AppTest, prefix: str, *parts) -> str:
    """The per-session key `ui.keys.widget_key(prefix, *parts)` gave a widget in this app's session."""
    table = app.session_state["_opaque_widget_keys"]
    return f"{prefix}_{table[(prefix, *map(str, parts))]}"
