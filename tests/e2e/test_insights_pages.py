"""The analysis-depth pages in Chromium on the small demo: an admin opens each, sees Chinese text, figures and
tables and no error; a checker does not find them in the navigation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import login, open_app, screenshot, text, wait_for_app_run

pytestmark = pytest.mark.browser

PAGES = {
    "analysis-criteria": "insights.criteria.title",
    "analysis-judge-errors": "insights.judges.title",
    "analysis-physicians": "insights.physicians.title",
}


def test_admin_opens_the_analysis_depth_pages(page, app_server, accounts):
    login(page, app_server, accounts("admin"))
    for path, title in PAGES.items():
        open_app(page, app_server, path)
        wait_for_app_run(page, timeout_ms=120_000)
        expect(page.get_by_role("heading", name=text(title))).to_be_visible()
        expect(page.get_by_test_id("stException")).to_have_count(0)
        expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)
        if path == "analysis-criteria":
            # the small demo has 5 models, fewer than a criterion needs to be evaluated
            expect(page.get_by_text(text("insights.criteria.too_few", n=10))).to_be_visible()
        else:
            expect(page.locator(".js-plotly-plot").first).to_be_visible()
        screenshot(page, f"insights-{path}")


def test_checker_does_not_see_them(page, app_server, accounts):
    login(page, app_server, accounts("checker", 1))
    navigation = page.get_by_test_id("stSidebarNav")
    for title in ("insights.criteria.nav", "insights.judges.nav", "insights.physicians.nav"):
        expect(navigation.get_by_text(text(title), exact=True)).to_have_count(0)
    open_app(page, app_server, "analysis-criteria")
    expect(page.get_by_role("heading", name=text("insights.criteria.title"))).to_have_count(0)
