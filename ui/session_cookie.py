"""The sign-in cookie: written by a small component of ours, read back with `st.context.cookies`.

The browser keeps its sign-in token in a cookie (SameSite=Strict, Secure over https), so a
refresh keeps the user signed in while no URL, history entry or referrer ever carries it.
JavaScript sets it (Streamlit cannot send Set-Cookie headers), hence not HttpOnly; the token is
random, stored server-side only as a hash, ends after 12 hours or when idle, and sign-out revokes it.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

COOKIE_NAME = "cc_session"
_JS = (Path(__file__).with_name("session_cookie.js")).read_text(encoding="utf-8")
_writer = st.components.v2.component("clinconsensus_session_cookie", js=_JS)


def token_from_cookie() -> str | None:
    """The token the browser sent with this session's connection, if any."""
    try:
        value = st.context.cookies.get(COOKIE_NAME)
    except Exception:  # no browser connection (a bare or headless test run)
        return None
    return value if isinstance(value, str) and value else None


def write_cookie(token: str | None, *, max_age_seconds: int) -> None:
    """Sets (token) or clears (None) the cookie in the browser; renders nothing visible."""
    _writer(data={"name": COOKIE_NAME, "token": token or "", "max_age": int(max_age_seconds)}, key="session_cookie")
