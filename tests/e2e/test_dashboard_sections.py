"""The analysis dashboard in Chromium at 1440×900 on the small demo: one section drawn at a time, each
reached with the section control, tables headed in Chinese, no error; a screenshot of each section."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import login, open_app, screenshot, text, wait_for_app_run

pytestmark = pytest.mark.browser

SECTIONS = ("models", "agreement", "judges", "slices", "diagnostics")
FIRST_TABLE = {
    "models": "analysis.table.models",
    "agreement": "analysis.table.agreement",
    "judges": "analysis.table.judges",
    "slices": "analysis.table.slices",
    "diagnostics": "analysis.table.threshold_sensitivity",
}


def exact(value: str) -> re.Pattern:
    return re.compile(f"^{re.escape(value)}$")


def test_admin_reads_the_dashboard_one_section_at_a_time(page, app_server, accounts):
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, app_server, accounts("admin"))
    open_app(page, app_server, "analysis-dashboard")
    wait_for_app_run(page, timeout_ms=120_000)
    expect(page.get_by_role("heading", name=text("analysis.nav"))).to_be_visible()
    for section in SECTIONS:
        page.get_by_test_id("stButtonGroup").get_by_text(text(f"analysis.tab.{section}"), exact=True).click()
        wait_for_app_run(page, timeout_ms=120_000)
        expect(page.get_by_role("heading", name=text(FIRST_TABLE[section]))).to_be_visible()
        # the other sections are not drawn
        for other in SECTIONS:
            if other != section:
                expect(page.get_by_role("heading", name=text(FIRST_TABLE[other]))).to_have_count(0)
        expect(page.get_by_test_id("stException")).to_have_count(0)
        expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)
        if section != "diagnostics" or page.locator(".js-plotly-plot").count():
            expect(page.locator(".js-plotly-plot").first).to_be_visible()
        if section == "models":
            # headers from the catalog, not the frame's column names (the grid's accessible table)
            grid = page.get_by_test_id("stDataFrame").first
            headers = grid.locator("th")
            expect(headers.filter(has_text=exact(text("analysis.column.rubric_accuracy")))).to_have_count(1)
            expect(headers.filter(has_text=exact("rubric_accuracy"))).to_have_count(0)
        screenshot(page, f"dashboard-{section}-1440x900")
