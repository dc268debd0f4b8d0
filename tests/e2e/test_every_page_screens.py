"""Every page of every role at 1440×900 and 1920×1080 on the demo: it renders without an error, and a
screenshot is kept (tests/artifacts/screenshots/screens-<role>-<page>-<size>.png) for people to look at."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from tests.e2e.conftest import ACTION_TIMEOUT_MS, login, screenshot, wait_for_app_run

pytestmark = pytest.mark.browser

SIZES = ((1440, 900), (1920, 1080))
ROLES = (("admin", None), ("annotator", 1), ("checker", 1))


@pytest.mark.parametrize("width,height", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("role,group", ROLES, ids=[role for role, _ in ROLES])
def test_every_page_of_every_role(browser, app_server, accounts, role, group, width, height):
    context = browser.new_context(viewport={"width": width, "height": height}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        login(page, app_server, accounts(role, group))
        links = page.locator('[data-testid="stSidebarNav"] a')
        paths = [urlparse(links.nth(i).get_attribute("href")).path.strip("/") for i in range(links.count())]
        assert paths, "no pages in the navigation"
        for i, path in enumerate(paths):
            page.locator('[data-testid="stSidebarNav"] a').nth(i).click()
            wait_for_app_run(page)
            page.wait_for_timeout(500)  # the workbench fits itself to the window
            assert page.locator('[data-testid="stException"]').count() == 0, path
            screenshot(page, f"screens-{role}-{path or 'home'}-{width}x{height}", settle=False)
    finally:
        context.close()
