"""In the browser: the sign-in lives in a SameSite=Strict cookie (never the URL), and an annotator's or a
checker's pages carry no model name and no internal id anywhere in the DOM (text, attributes, class names).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import login, open_app, screenshot, text, wait_for_app_run

pytestmark = pytest.mark.browser

COOKIE = "cc_session"
#: Every page of each role, by url path (the navigation's), plus pages of other roles tried by URL.
ROLE_PAGES = {
    "annotator": ["home", "annotate-rubrics", "annotate-labeling", "annotate-feedback"],
    "checker": ["home", "review-rubrics", "review-labels", "review-adjudication"],
}
OTHER_ROLES_PAGES = [
    "analysis-dashboard",
    "admin-progress",
    "admin-users",
    "admin-exports",
    "admin-audit-log",
    "admin-feedback",
]


def _database_facts(database_url: str) -> tuple[list[str], set[str]]:
    """Model names, and the internal ids (as text) of responses, cases, rubric versions and criteria."""
    from sqlmodel import select

    from db.store.engine import make_engine, session_scope
    from db.store.models import Case, Criterion, Response, RubricVersion

    engine = make_engine(database_url)
    try:
        with session_scope(engine, read_only=True) as session:
            models = sorted(set(session.exec(select(Response.model)).all()))
            ids = set()
            for table in (Response, Case, RubricVersion, Criterion):
                ids |= {str(i) for i in session.exec(select(table.id)).all()}
    finally:
        engine.dispose()
    # Numbers up to 30 also mean criterion positions, groups and counts on screen: only larger ids are telling.
    return models, {i for i in ids if int(i) > 30}


def _key_tokens(page) -> list[str]:
    """The words of every widget key (st-key-* class), element id and link of the page."""
    return page.evaluate(
        """() => {
            const words = [];
            for (const element of document.querySelectorAll('*')) {
                for (const name of element.classList) {
                    if (name.startsWith('st-key-')) words.push(name);
                }
                // Ids made from our widget keys (snake_case words); the frontend's own random ids
                // (like "r043-af-36-b94") carry nothing of ours.
                if (element.id && element.id.includes('_')) words.push(element.id);
                for (const attribute of ['data-testid', 'name']) {
                    const value = element.getAttribute(attribute);
                    if (value) words.push(value);
                }
                if (element.tagName === 'A' && element.getAttribute('href')) {
                    const target = new URL(element.getAttribute('href'), window.location.href);
                    words.push(target.pathname + target.search);  // in-page anchors are the frontend's ids
                }
            }
            words.push(window.location.pathname + window.location.search + window.location.hash);
            return words;
        }"""
    )


def _scan(page, models: list[str], ids: set[str], where: str) -> None:
    html = page.content()
    leaked_models = [m for m in models if m in html]
    assert not leaked_models, f"{where}: model names in the page: {leaked_models}"
    for word in _key_tokens(page):
        numbers = {token for token in re.split(r"[^0-9A-Za-z]+", word) if token.isdigit()}
        assert not numbers & ids, f"{where}: an internal id in {word!r}"


def _signed_in_cookie(page, context) -> dict:
    """The sign-in cookie, once the component has written it (just after the run that signed in)."""
    page.wait_for_function(f"() => /(^|; ){COOKIE}=[^;]+/.test(document.cookie)")
    cookie = _cookie(context)
    assert cookie is not None
    return cookie


def _cookie(context) -> dict | None:
    return next((c for c in context.cookies() if c["name"] == COOKIE), None)


@pytest.mark.parametrize("role,group", [("annotator", 1), ("checker", 1), ("checker", 2)])
def test_every_page_of_a_role_is_free_of_model_names_and_ids(page, context, app_server, accounts, role, group):
    models, ids = _database_facts(app_server.database_url)
    assert models and ids
    account = accounts(role, group)
    login(page, app_server, account)
    cookie = _signed_in_cookie(page, context)
    assert cookie["value"] and cookie["sameSite"] == "Strict"
    assert cookie["value"] not in page.url
    for path in ROLE_PAGES[role] + OTHER_ROLES_PAGES:
        # A fresh load of each address: the cookie alone signs the browser in.
        open_app(page, app_server, path)
        expect(page.get_by_text(text("sidebar.signed_in_as", name=account.display_name))).to_be_visible()
        assert cookie["value"] not in page.url
        _scan(page, models, ids, f"{role} g{group} /{path}")
        if path in ROLE_PAGES[role]:
            screenshot(page, f"blinding-{role}-g{group}-{path}")
        else:  # another role's page: refused or the home page, never its content
            assert page.get_by_role("heading", name=text("analysis.nav")).count() == 0


def test_sign_in_cookie_survives_a_reload_and_sign_out_clears_it(page, context, app_server, accounts):
    admin = accounts("admin")
    login(page, app_server, admin)
    cookie = _signed_in_cookie(page, context)
    assert cookie["sameSite"] == "Strict" and not cookie["secure"]  # plain http here
    assert "s=" not in page.url and cookie["value"] not in page.url
    page.reload()
    wait_for_app_run(page)
    expect(page.get_by_text(text("sidebar.signed_in_as", name=admin.display_name))).to_be_visible()
    page.get_by_role("button", name=text("logout"), exact=True).click()
    expect(page.get_by_role("button", name=text("login.submit"), exact=True)).to_be_visible()
    wait_for_app_run(page)
    page.wait_for_function(f"() => !document.cookie.includes('{COOKIE}=') || document.cookie.includes('{COOKIE}=;')")
    remaining = _cookie(context)
    assert remaining is None or remaining["value"] == ""
    # The old token no longer signs anyone in, even if a copy of the cookie survived somewhere.
    context.add_cookies([{**cookie, "expires": -1}])
    open_app(page, app_server)
    expect(page.get_by_role("button", name=text("login.submit"), exact=True)).to_be_visible()
    expect(page.get_by_text(text("sidebar.signed_in_as", name=admin.display_name))).to_have_count(0)
