"""The rubric audit and the checker's pages at 1440×900 and 1024×768: every criterion of the audit at full
height in the page (no box of its own), a click asks before deciding, a refused correction names its
criterion and puts the cursor in its note."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from db.rules.config import RUBRIC_SIZE
from tests.e2e.conftest import ACTION_TIMEOUT_MS, SCREENSHOTS, choose_in_picker, login, text, wait_for_app_run
from tests.e2e.test_checker_workbench import submitted, to_check  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
SIZES = ((1440, 900), (1024, 768))
ROWS = '[class*="st-key-audit_row_"]'

#: Rows of the audit whose box meets the viewport, and every element around them that scrolls on its own
#: (the page's own scrolling element and the main area of the app do not count: they are the page).
_MEASURE = """() => {
  const rows = Array.from(document.querySelectorAll('[class*="st-key-audit_row_"]'));
  const seen = rows.filter((row) => {
    const box = row.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight && box.height > 0;
  }).length;
  const page = new Set([document.scrollingElement, document.body, document.documentElement,
    document.querySelector('[data-testid=stMain]'), document.querySelector('[data-testid=stAppViewContainer]'),
    document.querySelector('[data-testid=stApp]')]);
  const boxes = [];
  for (let node = rows[0] && rows[0].parentElement; node; node = node.parentElement) {
    const style = getComputedStyle(node);
    if (!page.has(node) && /(auto|scroll)/.test(style.overflowY) && node.scrollHeight > node.clientHeight + 1) {
      boxes.push(node.className || node.tagName);
    }
  }
  return { rows: rows.length, seen, boxes };
}"""


def screenshot(page, name: str) -> None:
    """What the screen shows (not the whole page): what a physician sees at this size."""
    wait_for_app_run(page)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def _open(browser, app_server, account, size, link):
    context = browser.new_context(
        viewport={"width": size[0], "height": size[1]}, locale="zh-CN", timezone_id="Asia/Shanghai"
    )
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    login(page, app_server, account)
    page.get_by_role("link", name=text(link)).first.click()
    wait_for_app_run(page)
    return context, page


def test_rubric_audit_shows_every_criterion_in_the_page(browser, app_server, accounts, submitted):  # noqa: F811
    for width, height in SIZES:
        context, page = _open(browser, app_server, accounts("checker", 2), (width, height), "review.audit.title")
        try:
            choose_in_picker(page, text("review.audit.pick"), submitted)
            expect(page.locator(ROWS)).to_have_count(RUBRIC_SIZE, timeout=WAIT_MS)
            screenshot(page, f"checker-rubric-audit-{width}x{height}-top")
            # the page scrolls to the middle of the list: the rows there are all drawn at once
            page.locator(ROWS).nth(10).scroll_into_view_if_needed()
            page.mouse.move(width - 200, height // 2)
            page.mouse.wheel(0, 300)
            page.wait_for_timeout(400)
            measured = page.evaluate(_MEASURE)
            assert measured["rows"] == RUBRIC_SIZE and measured["boxes"] == [], measured
            if (width, height) == (1440, 900):
                assert measured["seen"] >= 12, measured
            # the case and the decision stay in view while the page scrolls
            expect(page.get_by_text(text("widgets.case.user_request")).first).to_be_in_viewport()
            expect(page.get_by_role("button", name=text("review.audit.approve"))).to_be_in_viewport()
            screenshot(page, f"checker-rubric-audit-{width}x{height}-middle")
            # a click asks first, in view, and decides nothing
            page.get_by_role("button", name=text("review.audit.approve")).click()
            wait_for_app_run(page)
            expect(page.get_by_role("button", name=text("review.audit.confirm"))).to_be_in_viewport(timeout=WAIT_MS)
            screenshot(page, f"checker-rubric-audit-{width}x{height}-asked")
            page.get_by_role("button", name=text("review.audit.cancel")).click()
            wait_for_app_run(page)
        finally:
            context.close()


def test_a_refused_correction_names_its_criterion_and_opens_its_note(browser, app_server, accounts, to_check):  # noqa: F811
    context, page = _open(browser, app_server, accounts("checker", 1), SIZES[0], "review.check.title")
    try:
        choose_in_picker(page, text("review.check.pick"), to_check["code"])
        expect(page.locator(".wb-item")).to_have_count(RUBRIC_SIZE, timeout=WAIT_MS)
        # correct c03 without a note: refused, naming c03, with the cursor in c03's note field
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowDown")
        page.keyboard.press("0")
        page.keyboard.press("Control+Enter")
        message = page.locator(".wb-message")
        expect(message).to_have_attribute("data-kind", "error", timeout=WAIT_MS)
        expect(message).to_contain_text("c03")
        focused = page.evaluate(
            "() => { let a = document.activeElement;"
            " while (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;"
            " const row = a && a.closest && a.closest('.wb-item');"
            " return [a && a.className, row && row.textContent]; }"
        )
        assert focused[0] == "wb-note-input" and focused[1].startswith("3"), focused
        screenshot(page, "checker-label-check-1440x900-note-needed")
        page.keyboard.type("回答未提及")
        page.keyboard.press("Enter")
        wait_for_app_run(page)
        page.keyboard.press("Control+Enter")
        expect(message).to_have_attribute("data-kind", "success", timeout=WAIT_MS)
    finally:
        context.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_checker_and_authoring_pages_at_laptop_sizes(browser, app_server, accounts, size):
    width, height = size
    for account, link, name in (
        (accounts("checker", 1), "review.check.title", "checker-label-check"),
        (accounts("checker", 1), "review.adjudication.title", "checker-adjudication"),
        (accounts("annotator", 1), "annotate.authoring.title", "annotator-authoring"),
    ):
        context, page = _open(browser, app_server, account, size, link)
        try:
            screenshot(page, f"{name}-{width}x{height}")
        finally:
            context.close()
