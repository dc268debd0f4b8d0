"""Who may send the server a file (db.access.users.may_upload): the live browser session of an active admin only.
The browser test tests/e2e/test_upload_gate.py drives the same rule through Streamlit's upload endpoint."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

from sqlmodel import select

from db.access import users
from db.store.engine import session_scope
from db.store.models import LoginSession, utcnow
from tests.support.factories import make_user


def tokens(engine) -> dict[str, str]:
    with session_scope(engine) as session:
        opened = {}
        for name, role in (("boss", "admin"), ("ann", "annotator"), ("chk", "checker")):
            opened[name] = users.open_session(session, user=make_user(session, name, role, 1))
        return opened


def may_upload(engine, token: str) -> bool:
    with session_scope(engine, read_only=True) as session:
        return users.may_upload(session, token=token)


def test_only_a_live_admin_session_may_upload(engine):
    opened = tokens(engine)
    assert [may_upload(engine, opened[name]) for name in ("boss", "ann", "chk")] == [True, False, False]
    assert may_upload(engine, opened["boss"] + "x") is False and may_upload(engine, "") is False


def test_an_idle_or_revoked_admin_session_may_not_upload(engine):
    opened = tokens(engine)
    with session_scope(engine) as session:
        boss_id = users.get_user(session, username="boss").id
        row = session.exec(select(LoginSession).where(LoginSession.user_id == boss_id)).one()
        row.last_seen_at = utcnow() - users.IDLE_TIMEOUT - timedelta(seconds=1)
    assert may_upload(engine, opened["boss"]) is False
    with session_scope(engine) as session:
        fresh = users.open_session(session, user=users.get_user(session, username="boss"))
    assert may_upload(engine, fresh) is True
    with session_scope(engine) as session:
        users.update_account(session, username="boss", role="checker", group_no=1, actor=users.SYSTEM_ACTOR)
    assert may_upload(engine, fresh) is False, "an admin demoted since signing in uploads nothing"


def test_the_gate_stands_in_front_of_streamlits_session_check(sqlite_url, monkeypatch):
    from streamlit.runtime.runtime import Runtime

    from ui import uploads
    from ui.session_cookie import COOKIE_NAME

    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    uploads.install()
    assert uploads.install() is False, "installed once per process"

    class Connected:
        """Streamlit's own answer: every session id given here is connected."""

        def is_active_session(self, session_id: str) -> bool:
            return True

    from db.store.engine import get_engine

    opened = tokens(get_engine())
    monkeypatch.setattr(uploads, "_admin_sessions", {"admin-tab": opened["boss"], "annotator-tab": opened["ann"]})
    runtime = object.__new__(Runtime)
    monkeypatch.setattr(runtime, "_session_mgr", Connected(), raising=False)

    def upload_handler(session_id: str, cookie: str | None) -> bool:
        """Asks as Streamlit's upload handler does, with its own HTTP request in a local named `request`."""
        request = SimpleNamespace(cookies={} if cookie is None else {COOKIE_NAME: cookie})  # noqa: F841
        return Runtime.is_active_session(runtime, session_id)

    assert upload_handler("admin-tab", opened["boss"]) is True
    assert upload_handler("admin-tab", None) is False  # the admin's tab id without the sign-in cookie
    assert upload_handler("admin-tab", opened["ann"]) is False  # another sign-in's cookie
    assert upload_handler("annotator-tab", opened["ann"]) is False
    assert upload_handler("signed-out-tab", None) is False
