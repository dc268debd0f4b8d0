"""Sign-in through a hospital's identity provider (Streamlit's st.login, OpenID Connect), end to end.

A real OpenID provider (oidc-provider-mock) runs beside the app; the app is configured for it in
its secrets. An identity an admin linked to a local account signs in as that account (with the
same cookie and session rules as a password sign-in); an unlinked identity is told so and gets nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import (
    ARTIFACTS,
    REPO_ROOT,
    _free_port,
    _stop,
    _wait_until_healthy,
    screenshot,
    text,
    wait_for_app_run,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def provider():
    from oidc_provider_mock import run_server_in_thread

    with run_server_in_thread(port=_free_port()) as server:
        base = f"http://127.0.0.1:{server.server_port}"
        with urllib.request.urlopen(f"{base}/.well-known/openid-configuration", timeout=10) as reply:
            metadata = json.loads(reply.read())
        yield base, metadata["issuer"]


@pytest.fixture(scope="module")
def oidc_app(provider, chromium_path, tmp_path_factory):
    """The app configured for the provider, on a database with one linked account."""
    from db.access import users
    from db.migrations.upgrade import upgrade
    from db.store.engine import make_engine, session_scope
    from tests.support.factories import make_user

    base, issuer = provider
    folder = tmp_path_factory.mktemp("oidc-app")
    database_url = f"sqlite:///{folder / 'studio.db'}"
    engine = make_engine(database_url)
    upgrade(engine)
    with session_scope(engine) as session:
        make_user(session, "dr_oidc", "annotator", 1)
        users.link_identity(
            session, username="dr_oidc", identity=users.oidc_identity(issuer, "alice-sub"), actor=users.SYSTEM_ACTOR
        )
    engine.dispose()
    port = _free_port()
    secrets = folder / "secrets.toml"
    secrets.write_text(
        "[auth]\n"
        f'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
        'cookie_secret = "a-cookie-secret-for-the-tests-only"\n'
        'client_id = "clinconsensus-studio"\n'
        'client_secret = "client-secret-for-the-tests"\n'
        f'server_metadata_url = "{base}/.well-known/openid-configuration"\n',
        encoding="utf-8",
    )
    log_path = folder / "server.log"
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable, "-m", "streamlit", "run", "streamlit_app.py",
        "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--secrets.files", str(secrets),
    ]  # fmt: skip
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _wait_until_healthy(process, f"http://127.0.0.1:{port}", log_path)
        yield f"http://127.0.0.1:{port}", database_url
    finally:
        _stop(process)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "e2e-oidc-server.log").write_text(log_path.read_text(errors="replace"), encoding="utf-8")


def _sign_in_at_provider(page, base_url: str, subject: str) -> None:
    page.goto(base_url)
    wait_for_app_run(page)
    page.get_by_role("button", name=text("security.oidc.sign_in")).click()
    page.locator('input[name="sub"]').fill(subject)  # the provider's own form
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(f"{base_url}/**")
    wait_for_app_run(page)


def test_a_linked_identity_signs_in_as_its_account(page, context, oidc_app):
    base_url, _ = oidc_app
    _sign_in_at_provider(page, base_url, "alice-sub")
    expect(page.get_by_text(text("sidebar.signed_in_as", name="dr_oidc"))).to_be_visible()
    page.wait_for_function("() => /(^|; )cc_session=[^;]+/.test(document.cookie)")
    screenshot(page, "oidc-signed-in")
    # A fresh load keeps the sign-in (our cookie), and signing out ends it.
    page.goto(base_url)
    wait_for_app_run(page)
    expect(page.get_by_text(text("sidebar.signed_in_as", name="dr_oidc"))).to_be_visible()
    page.get_by_role("button", name=text("logout"), exact=True).click()
    # Signing out also ends the provider's sign-in (its end-session page), then comes back to us.
    page.wait_for_url("**/oauth2/end_session**")
    page.get_by_role("button", name="End session").click()
    page.wait_for_url(f"{base_url}/**")
    wait_for_app_run(page)
    expect(page.get_by_role("button", name=text("login.submit"), exact=True)).to_be_visible()
    expect(page.get_by_text(text("sidebar.signed_in_as", name="dr_oidc"))).to_have_count(0)


def test_an_unlinked_identity_gets_nothing(page, oidc_app, provider):
    base_url, _ = oidc_app
    _, issuer = provider
    _sign_in_at_provider(page, base_url, "mallory-sub")
    # The identity is shown as text (a word joiner keeps its URL from becoming a link).
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("mallory-sub")
    expect(alert).to_contain_text(text("security.oidc.unlinked", identity="").split("  ")[-1].strip() or "mallory")
    assert issuer.split("//")[-1] in alert.inner_text()
    expect(page.get_by_text(text("sidebar.signed_in_as", name="dr_oidc"))).to_have_count(0)
    expect(page.get_by_role("button", name=text("login.submit"), exact=True)).to_be_visible()
    screenshot(page, "oidc-unlinked")


def _on_the_login_page(page) -> None:
    expect(page.get_by_role("button", name=text("login.submit"), exact=True)).to_be_visible()
    expect(page.get_by_text(text("sidebar.signed_in_as", name="dr_oidc"))).to_have_count(0)


def either(key: str, **values) -> re.Pattern:
    """The catalog text of `key` in Chinese or English (a click on the language switch may land either way)."""
    return re.compile("^(" + "|".join(re.escape(text(key, lang, **values)) for lang in ("zh", "en")) + ")$")


def _database(database_url: str):
    from db.store.engine import make_engine

    return make_engine(database_url)


def test_idle_timeout_and_deactivation_end_the_provider_sign_in_on_the_next_run(page, oidc_app):
    from sqlalchemy import update

    from db.access import users
    from db.store.engine import session_scope
    from db.store.models import LoginSession, User, utcnow

    base_url, database_url = oidc_app
    engine = _database(database_url)
    try:
        _sign_in_at_provider(page, base_url, "alice-sub")
        expect(page.get_by_text(text("sidebar.signed_in_as", name="dr_oidc"))).to_be_visible()
        # Idle: the local session's clock is set back past the idle timeout; the next run ends the sign-in,
        # and the provider's still-valid cookie does not open a new session.
        with session_scope(engine) as session:
            user_id = users.get_user(session, username="dr_oidc").id
            session.execute(
                update(LoginSession)
                .where(LoginSession.user_id == user_id)
                .values(last_seen_at=utcnow() - users.IDLE_TIMEOUT - timedelta(minutes=1))
            )
        page.reload()
        wait_for_app_run(page)
        _on_the_login_page(page)
        expect(page.get_by_text(text("security.oidc.ended"))).to_be_visible()
        screenshot(page, "oidc-idle-ended")
        # Signing in at the provider again opens a new session.
        page.wait_for_timeout(1100)  # the provider tells its sign-ins apart by the second they were issued
        page.get_by_role("button", name=text("security.oidc.sign_in")).click()
        page.locator('input[name="sub"]').fill("alice-sub")
        page.get_by_role("button", name="Authorize").click()
        page.wait_for_url(f"{base_url}/**")
        wait_for_app_run(page)
        expect(page.get_by_text(text("sidebar.signed_in_as", name="dr_oidc"))).to_be_visible()
        # Deactivation: the next run in the same tab (a click) ends the sign-in.
        with session_scope(engine) as session:
            users.set_active(session, username="dr_oidc", active=False, actor=users.SYSTEM_ACTOR)
        page.get_by_text("English", exact=True).click()
        wait_for_app_run(page)
        expect(page.get_by_role("button", name=either("login.submit"), exact=True)).to_be_visible()
        expect(page.get_by_text(either("security.oidc.ended"))).to_be_visible()
        expect(page.get_by_text(either("sidebar.signed_in_as", name="dr_oidc"))).to_have_count(0)
        # Active again, the same provider sign-in still opens nothing: it has had its session.
        with session_scope(engine) as session:
            users.set_active(session, username="dr_oidc", active=True, actor=users.SYSTEM_ACTOR)
        page.reload()
        wait_for_app_run(page)
        expect(page.get_by_text(either("security.oidc.ended"))).to_be_visible()
        expect(page.get_by_text(either("sidebar.signed_in_as", name="dr_oidc"))).to_have_count(0)
        with session_scope(engine, read_only=True) as session:
            assert session.get(User, user_id).provider_sign_in_at is not None
    finally:
        engine.dispose()
