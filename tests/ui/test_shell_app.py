"""The app shell through Streamlit's AppTest: login, throttling, logout, refresh, language, role navigation."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from db.rules.security import token_digest
from db.store.engine import session_scope
from db.store.models import LoginSession, LoginThrottle, User  # noqa: F401
from i18n import translate
from tests.support.apptest_helpers import (
    button,
    new_app,
    open_page,
    sign_in_token,
    signed_in,
    texts,
)
from tests.support.factories import DEFAULT_PASSWORD, make_user

ADMIN_PAGES = ("admin-progress", "admin-import", "admin-users", "admin-assignments", "admin-exports")


@pytest.fixture
def people(app_database):
    with session_scope(app_database) as session:
        make_user(session, "boss", "admin")
        make_user(session, "ann1", "annotator", 1)
        make_user(session, "chk2", "checker", 2)
    return app_database


def _login(app: AppTest, username: str, password: str) -> AppTest:
    app.text_input(key="login_username").input(username)
    app.text_input(key="login_password").input(password)
    return button(app, translate("login.submit", "zh")).click().run()


def _registered_urls(app: AppTest) -> set[str]:
    return {info.get("url_pathname") for info in app._registered_pages.values()}


def test_login_shows_the_home_page_and_keeps_the_token(people):
    app = new_app().run()
    assert translate("login.title", "zh") in texts(app)
    app = _login(app, "ann1", DEFAULT_PASSWORD)
    assert not app.exception
    assert app.title[0].value == translate("home.title", "zh")
    assert translate("sidebar.signed_in_as", "zh", name="ann1") in texts(app)
    token = app.session_state["token"]
    # The sign-in never travels in the URL (the browser keeps it in a cookie; see the browser tests).
    assert all(token not in value for values in app.query_params.values() for value in values)
    assert "s" not in app.query_params
    with session_scope(people, read_only=True) as session:
        assert len(session.exec(select(LoginSession)).all()) == 1


@pytest.mark.parametrize("username,password", [("ann1", "wrong-password-1"), ("nobody", DEFAULT_PASSWORD)])
def test_wrong_password_and_unknown_user_get_the_same_generic_message(people, username, password):
    app = _login(new_app().run(), username, password)
    assert [e.value for e in app.error] == [translate("login.failed", "zh")]
    assert "token" not in app.session_state
    assert app.title[0].value != translate("home.title", "zh")


def test_five_failures_lock_the_account_even_for_the_right_password(people):
    app = new_app().run()
    for _ in range(4):
        app = _login(app, "ann1", "wrong-password-1")
        assert [e.value for e in app.error] == [translate("login.failed", "zh")]
    app = _login(app, "ann1", "wrong-password-1")
    with session_scope(people, read_only=True) as session:
        until = session.exec(select(LoginThrottle.locked_until).where(LoginThrottle.username_key == "ann1")).one()
    # The time is shown in the browser's zone (Asia/Shanghai when it sends none).
    expected = translate("login.throttled", "zh", time=until.astimezone(ZoneInfo("Asia/Shanghai")).strftime("%H:%M"))
    assert [e.value for e in app.error] == [expected]
    app = _login(app, "ann1", DEFAULT_PASSWORD)
    assert [e.value for e in app.error] == [expected]
    assert "token" not in app.session_state


def test_logout_ends_the_session_and_a_token_in_the_url_signs_nobody_in(people):
    token = sign_in_token(people, "ann1")
    url_only = new_app()
    url_only.query_params["s"] = token  # the old way of keeping a sign-in: no longer read
    url_only.run()
    assert translate("login.title", "zh") in texts(url_only)
    app = signed_in(people, "ann1")
    assert app.title[0].value == translate("home.title", "zh")
    tab_token = app.session_state["token"]
    app = button(app, translate("logout", "zh")).click().run()
    assert translate("login.title", "zh") in texts(app)
    with session_scope(people, read_only=True) as session:
        remaining = session.exec(select(LoginSession.token_hash)).all()
    assert remaining == [token_digest(token)]  # this tab's session ended; the other one is untouched
    assert token_digest(tab_token) not in remaining


def test_language_switch_to_english_and_back(people):
    app = signed_in(people, "ann1")
    assert app.title[0].value == "首页"
    app.radio(key="lang_choice").set_value("en").run()
    assert app.title[0].value == "Home"
    assert "Signed in as ann1" in texts(app)
    assert "en" in app.query_params["lang"]  # kept in the URL, so a refresh stays in English
    app.radio(key="lang_choice").set_value("zh").run()
    assert app.title[0].value == "首页"
    assert "lang" not in app.query_params


def test_a_refresh_keeps_the_chosen_language(people):
    app = new_app()
    app.session_state["token"] = sign_in_token(people, "ann1")
    app.query_params["lang"] = "en"
    app.run()
    assert app.title[0].value == "Home"
    login = new_app()
    login.query_params["lang"] = "en"
    login.run()
    assert "Sign in" in texts(login)


def test_annotator_navigation_has_no_admin_pages_and_admin_urls_fall_back(people):
    app = signed_in(people, "ann1")
    assert not set(ADMIN_PAGES) & _registered_urls(app)
    for url in ADMIN_PAGES:
        app = open_page(app, url)
        assert not app.exception
        assert app.title[0].value == translate("home.title", "zh")
        assert not app.dataframe


def test_checker_navigation_has_no_admin_pages_and_sees_disagreements(people):
    app = signed_in(people, "chk2")
    assert not set(ADMIN_PAGES) & _registered_urls(app)
    assert [m.label for m in app.metric] == [translate("sidebar.unresolved", "zh")] * len(app.metric)
    assert app.metric and app.metric[0].value == "0"


def test_admin_navigation_lists_every_admin_page(people):
    app = signed_in(people, "boss")
    assert set(ADMIN_PAGES) <= _registered_urls(app)


def test_deactivated_user_is_signed_out_on_the_next_click(people):
    app = signed_in(people, "ann1")
    assert app.title[0].value == translate("home.title", "zh")
    from db.access import users

    with session_scope(people) as session:
        users.set_active(session, username="ann1", active=False, actor=users.get_user(session, username="boss"))
    app.run()
    assert translate("login.title", "zh") in texts(app)


@pytest.mark.parametrize(
    "module", ["admin.users", "admin.imports", "admin.assignments", "admin.progress", "admin.exports"]
)
@pytest.mark.parametrize("username", ["ann1", "chk2", None])
def test_admin_page_functions_refuse_everyone_but_admins(people, module, username):
    app = AppTest.from_string(f"import importlib\nimportlib.import_module({module!r}).render()\n", default_timeout=60)
    if username:
        app.session_state["token"] = sign_in_token(people, username)
    app.run()
    assert [e.value for e in app.error] == [translate("error.permission", "zh")]
    assert not app.dataframe and not app.button and not app.title
