"""Who may send the server a file: only a browser session signed in as an admin.

Streamlit accepts `PUT /_stcore/upload_file/<session_id>/<file_id>` for any connected session, and
asks `Runtime.is_active_session(session_id)` before it reads a byte of the body (its only use of
that question). The gate wraps it: the session must also be one the shell saw signed in as an
admin on its last run, the request must carry that same sign-in in its cookie (a Streamlit session id
alone, read off a websocket, opens nothing), and that sign-in must still be live in the database
(`db.access.users.may_upload`), so a signed-out visitor's upload is refused before it costs the server
any memory. Streamlit hands the question no request: the gate reads the cookie from the upload handler's
own `request` (its caller's frame), and refuses when it finds none.
"""

from __future__ import annotations

import secrets
import sys
import threading

from db.access import users
from db.store.engine import get_engine, session_scope
from db.store.models import User

_lock = threading.Lock()
#: Streamlit session id → the sign-in token of the admin using it.
_admin_sessions: dict[str, str] = {}
_installed = False


def install() -> bool:
    """Puts the gate in front of Streamlit's upload endpoint (once per process); True when this call did."""
    global _installed
    from streamlit.runtime.runtime import Runtime

    with _lock:
        if _installed:
            return False
        streamlits_own = Runtime.is_active_session

        def is_active_session(runtime: Runtime, session_id: str) -> bool:
            cookie = _request_cookie(sys._getframe(1).f_locals.get("request"))
            return streamlits_own(runtime, session_id) and session_may_upload(session_id, cookie)

        # The gate replaces Streamlit's method on purpose, which mypy refuses for any method.
        Runtime.is_active_session = is_active_session  # type: ignore[method-assign, assignment]
        _installed = True
        return True


def _request_cookie(request: object) -> str | None:
    """The sign-in cookie of the upload's HTTP request (None: no request, or no such cookie)."""
    from ui.session_cookie import COOKIE_NAME

    cookies = getattr(request, "cookies", None)
    value = cookies.get(COOKIE_NAME) if isinstance(cookies, dict) else None
    return value if isinstance(value, str) and value else None


def session_may_upload(session_id: str, cookie: str | None) -> bool:
    """True when this Streamlit session belongs to a signed-in admin whose sign-in is still live, and the
    request's cookie carries that very sign-in."""
    with _lock:
        token = _admin_sessions.get(session_id)
    if token is None or cookie is None or not secrets.compare_digest(token, cookie):
        return False
    try:
        with session_scope(get_engine(), read_only=True) as session:
            return users.may_upload(session, token=token)
    except Exception:  # a database that cannot answer allows nothing
        return False


def note_sign_in(user: User | None, token: str | None) -> None:
    """Called on every run: this session may upload while it is signed in as an admin, and not otherwise."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    context = get_script_run_ctx(suppress_warning=True)
    if context is None:
        return
    with _lock:
        if user is not None and token and users.may_role_upload(user):
            _admin_sessions[context.session_id] = token
        else:
            _admin_sessions.pop(context.session_id, None)
