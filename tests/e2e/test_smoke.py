"""The app comes up, speaks Chinese by default, refuses a wrong password and lets the demo admin in."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import CJK, fill_login, login, open_app, screenshot, text, wait_for_app_run

pytestmark = pytest.mark.browser


def test_login_page_is_served_in_chinese(page, app_server):
    open_app(page, app_server)

    expect(page).to_have_title("ClinConsensus Studio")
    expect(page.get_by_role("heading", name=text("app.title"))).to_be_visible()
    expect(page.get_by_label(text("login.username"), exact=True)).to_be_visible()
    expect(page.get_by_label(text("login.password"), exact=True)).to_have_attribute("type", "password")
    expect(page.get_by_role("button", name=text("login.submit"), exact=True)).to_be_visible()
    assert CJK.search(text("login.username")), "the default language is Chinese"
    # Nobody signed in: no sidebar user line, no home page.
    expect(page.get_by_text(text("sidebar.signed_in_as", name=""))).to_have_count(0)
    # toolbarMode = "viewer": no Deploy button for anyone.
    expect(page.get_by_test_id("stAppDeployButton")).to_have_count(0)
    screenshot(page, "smoke-login")


def test_wrong_password_shows_the_generic_error(page, app_server, accounts):
    admin = accounts("admin")
    open_app(page, app_server)

    fill_login(page, admin.username, admin.password + "-wrong")

    alert = page.get_by_test_id("stAlert")
    expect(alert).to_contain_text(text("login.failed"))
    # The same message whether or not the account exists; still on the login form.
    expect(page.get_by_role("button", name=text("login.submit"), exact=True)).to_be_visible()
    screenshot(page, "smoke-login-failed")

    # A fresh visit (no alert on screen yet), then an account that does not exist.
    open_app(page, app_server)
    expect(page.get_by_test_id("stAlert")).to_have_count(0)
    fill_login(page, "no-such-user", "whatever-password")
    expect(page.get_by_test_id("stAlert")).to_contain_text(text("login.failed"))
    expect(page.get_by_text(text("sidebar.signed_in_as", name=admin.display_name))).to_have_count(0)


def test_demo_admin_signs_in_and_sees_the_home_page(page, app_server, accounts):
    admin = accounts("admin")

    login(page, app_server, admin)

    expect(page.get_by_role("heading", name=text("home.title"))).to_be_visible()
    expect(page.get_by_text(text("home.welcome", name=admin.display_name))).to_be_visible()
    expect(page.get_by_text(text("role.admin"), exact=True)).to_be_visible()
    expect(page.get_by_role("button", name=text("logout"), exact=True)).to_be_visible()
    # The sign-in survives a reload (the token travels in a cookie, never in the address).
    assert "s=" not in page.url
    page.reload()
    wait_for_app_run(page)
    expect(page.get_by_text(text("sidebar.signed_in_as", name=admin.display_name))).to_be_visible()
    screenshot(page, "smoke-home-admin")


def test_an_upload_without_the_xsrf_token_is_refused(app_server):
    """XSRF protection is on in the served app: an upload without the token (a cross-site post) is rejected."""
    body = b'--x\r\nContent-Disposition: form-data; name="file"; filename="cases.jsonl"\r\n\r\n{}\r\n--x--\r\n'
    request = urllib.request.Request(
        f"{app_server.base_url}/_stcore/upload_file/any-session/any-file",
        method="PUT",
        data=body,
        headers={"Content-Type": "multipart/form-data; boundary=x"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403
