"""Label check and adjudication at 1440×900 and 1024×768: the picker row's buttons show their words whole,
the open-disagreement count reads on a line of its own (not four lines squeezed beside the picker),
people are named as the pickers name them, and the workbench's save button and draft state are in view."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import ACTION_TIMEOUT_MS, choose_in_picker, login, screenshot, text, wait_for_app_run
from tests.e2e.test_checker_workbench import disputed, to_check  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
SIZES = [(1440, 900), (1024, 768)]
#: True when no element inside `el` cuts its text (an ellipsis or clipped words).
WHOLE = "el => Array.from(el.querySelectorAll('*')).concat([el]).every(e => e.scrollWidth <= e.clientWidth + 1)"


def _open(browser, app_server, accounts, size, title_key: str, pick_key: str, code: str):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    login(page, app_server, accounts("checker", 1))
    page.get_by_role("link", name=text(title_key)).first.click()
    wait_for_app_run(page)
    choose_in_picker(page, text(pick_key), code)
    expect(page.locator(".wb-pane-title")).to_have_text(text("workbench.response", code=code), timeout=WAIT_MS)
    return context, page


#: How many lines the last `n` characters of an element's text take (1: not split across lines).
TAIL_LINES = """(el, n) => { const node = el.firstChild; const range = document.createRange();
  range.setStart(node, node.textContent.length - n); range.setEnd(node, node.textContent.length);
  return new Set(Array.from(range.getClientRects(), r => Math.round(r.top))).size; }"""


def _workbench_in_view(page, height: int) -> None:
    # the key legend's last word ("保存") stays whole when the legend wraps
    assert page.locator(".wb-legend").evaluate(TAIL_LINES, 2) == 1
    save = page.locator(".wb-save")
    expect(save).to_be_visible()
    box = save.bounding_box()
    assert box is not None and box["y"] + box["height"] <= height, box
    assert save.evaluate(WHOLE)
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("size", SIZES, ids=["1440x900", "1024x768"])
def test_adjudication_top_row_and_workbench_fit(browser, app_server, accounts, disputed, size):  # noqa: F811
    context, page = _open(
        browser, app_server, accounts, size, "review.adjudication.title", "review.adjudication.pick", disputed["code"]
    )
    try:
        screenshot(page, f"checker-adjudication-{size[0]}x{size[1]}")
        take = page.get_by_role("button", name=text("review.adjudication.take_panel", n="").split("（")[0]).first
        expect(take).to_be_visible()
        assert take.evaluate(WHOLE), "the take-in button's words are cut"
        intro = page.get_by_text(text("review.adjudication.intro", decisions="\x00", responses="").split("\x00")[0])
        box = intro.first.bounding_box()
        assert box is not None and box["height"] <= 48, box  # at most two lines
        _workbench_in_view(page, size[1])
    finally:
        context.close()


@pytest.mark.parametrize("size", SIZES, ids=["1440x900", "1024x768"])
def test_label_check_names_the_annotator_and_fits(browser, app_server, accounts, to_check, size):  # noqa: F811
    context, page = _open(
        browser, app_server, accounts, size, "review.check.title", "review.check.pick", to_check["code"]
    )
    try:
        screenshot(page, f"checker-label-check-{size[0]}x{size[1]}")
        annotator = page.get_by_role("combobox", name=text("review.check.annotator")).input_value()
        name = annotator.rsplit("（", 1)[0]  # "王晓（25 个回答）": the name, then the count
        line = page.locator(".wb-line-label").first
        expect(line).to_have_text(text("workbench.check.annotator", name=name))
        # the case line breaks between its parts, never inside "患者家属"
        meta = page.locator(".wb-meta")
        role = meta.inner_text().rsplit("：", 1)[1]
        assert meta.evaluate(TAIL_LINES, len(role)) == 1, "the asker's role is split across lines"
        _workbench_in_view(page, size[1])
    finally:
        context.close()
