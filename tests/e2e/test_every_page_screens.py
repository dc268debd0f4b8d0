"""Every page of every role on the demo, in Chinese and English at 1440×900 and 1024×768 (and Chinese at
1920×1080): it renders without an error, and a screenshot is kept
(tests/artifacts/screenshots/screens-<lang>-<role>-<page>-<size>.png) for people to look at."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from tests.e2e.conftest import ACTION_TIMEOUT_MS, login, screenshot, wait_for_app_run
from ui.shell import LANGUAGE_PARAM

pytestmark = pytest.mark.browser

#: (width, height, language) of each round through the pages.
VIEWS = ((1440, 900, "zh"), (1024, 768, "zh"), (1920, 1080, "zh"), (1440, 900, "en"), (1024, 768, "en"))
ROLES = (("admin", None), ("annotator", 1), ("checker", 1))
#: Below this width the workbench pages fold the sidebar (ui/narrow_window).
NARROW_WINDOW = 1280


@pytest.mark.parametrize("width,height,lang", VIEWS, ids=[f"{lang}-{w}x{h}" for w, h, lang in VIEWS])
@pytest.mark.parametrize("role,group", ROLES, ids=[role for role, _ in ROLES])
def test_every_page_of_every_role(browser, app_server, accounts, role, group, width, height, lang):
    locale = "zh-CN" if lang == "zh" else "en-US"
    context = browser.new_context(viewport={"width": width, "height": height}, locale=locale)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        login(page, app_server, accounts(role, group))
        if lang == "en":
            page.get_by_text("English", exact=True).click()  # the sidebar's language switch
            wait_for_app_run(page)
        links = page.locator('[data-testid="stSidebarNav"] a')
        links.first.wait_for()  # the language switch redraws the navigation: count its links once they are back
        paths = [urlparse(links.nth(i).get_attribute("href")).path.strip("/") for i in range(links.count())]
        assert paths, "no pages in the navigation"
        # Each page opened by its address (the language kept in it, as the app keeps it over a refresh): below
        # NARROW_WINDOW the workbench pages fold the sidebar, so its links are not there to click.
        query = "" if lang == "zh" else f"?{LANGUAGE_PARAM}={lang}"
        for path in paths:
            page.goto(f"{app_server.base_url}/{path}{query}")
            wait_for_app_run(page)
            page.wait_for_timeout(500)  # the workbench fits itself to the window
            assert page.locator('[data-testid="stException"]').count() == 0, path
            screenshot(page, f"screens-{lang}-{role}-{path or 'home'}-{width}x{height}", settle=False)
    finally:
        context.close()
