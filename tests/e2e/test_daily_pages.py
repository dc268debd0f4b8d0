"""The checker's and the maintainer's day in the browser, at 1440×900 and 1024×768: the work pages fold the
sidebar away on a narrow window; the dashboard's first screen and the judge runs history fit the page; a
started run, an assignment and an export answer next to their button; the New model page opens on the newest
model. Screenshots: tests/artifacts/screenshots/daily-*.png.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import ACTION_TIMEOUT_MS, login, open_app, screenshot, text, wait_for_app_run
from tools.llm_server import LLMServer
from ui.narrow_window import FOLD_BELOW_PX

pytestmark = pytest.mark.browser

SIZES = ((1440, 900), (1024, 768))
SIZE_IDS = [f"{width}x{height}" for width, height in SIZES]

#: How far below its button (in px) an action's answer may appear and still be "where the user is looking".
NEAR_PX = 300

_SIDEBAR_OPEN = """() => !!document.querySelector('[data-testid="stSidebarCollapseButton"] button')"""

#: Tables of the page that scroll sideways: their grid is wider than their frame.
_WIDE_TABLES = """(bottom) => Array.from(document.querySelectorAll('[data-testid="stDataFrame"]'))
  .filter(table => table.getBoundingClientRect().top < bottom)
  .map(table => [table, table.querySelector('.dvn-scroller')])
  .filter(([table, scroller]) => scroller && scroller.scrollWidth > scroller.clientWidth + 1)
  .map(([table, scroller]) =>
    `${Math.round(table.getBoundingClientRect().top)}px: ${scroller.scrollWidth} > ${scroller.clientWidth}`)"""

_PAGE_WIDER_THAN_WINDOW = """() => document.documentElement.scrollWidth > document.documentElement.clientWidth + 1
  || Array.from(document.querySelectorAll('[data-testid="stMain"], [data-testid="stMainBlockContainer"]'))
       .some(node => node.scrollWidth > node.clientWidth + 1)"""


def _context(browser, width: int, height: int):
    context = browser.new_context(viewport={"width": width, "height": height}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    return context


def _sidebar_open_after_load(page, *, folds: bool) -> bool:
    """Whether the sidebar is open once our component's script has run (and, where it folds, finished folding)."""
    page.locator("html[data-cc-narrow-window]").wait_for(state="attached")
    if folds:
        page.wait_for_function(f"() => !({_SIDEBAR_OPEN})()", timeout=15_000)
    page.wait_for_timeout(500)
    return page.evaluate(_SIDEBAR_OPEN)


@pytest.mark.parametrize("width,height", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize(
    "role,group,path",
    [("annotator", 1, "annotate-labeling"), ("checker", 1, "review-labels"), ("checker", 2, "review-adjudication")],
    ids=["labeling", "check", "adjudication"],
)
def test_the_work_pages_fold_the_sidebar_on_a_narrow_window(
    browser, app_server, accounts, role, group, path, width, height
):
    context = _context(browser, width, height)
    page = context.new_page()
    try:
        login(page, app_server, accounts(role, group))
        assert page.evaluate(_SIDEBAR_OPEN), "the home page keeps its sidebar"
        open_app(page, app_server, path)
        narrow = width < FOLD_BELOW_PX
        folded = not _sidebar_open_after_load(page, folds=narrow)
        screenshot(page, f"daily-{path}-{width}x{height}", settle=False)
        assert folded == narrow, f"{path} at {width}px: sidebar {'folded' if folded else 'open'}"
        assert page.locator(".wb-items").count() == 1
        if folded:
            # Opened again by hand, it stays open through the page's reruns.
            page.get_by_test_id("stExpandSidebarButton").click()
            wait_for_app_run(page)
            page.wait_for_timeout(1000)
            assert page.evaluate(_SIDEBAR_OPEN)
    finally:
        context.close()


@pytest.mark.parametrize("width,height", SIZES, ids=SIZE_IDS)
def test_the_dashboards_first_screen_and_the_judge_history_fit_the_page(browser, app_server, accounts, width, height):
    context = _context(browser, width, height)
    page = context.new_page()
    try:
        login(page, app_server, accounts("admin"))
        open_app(page, app_server, "analysis-dashboard")
        page.get_by_test_id("stDataFrame").first.wait_for()
        page.wait_for_timeout(1000)
        screenshot(page, f"daily-dashboard-{width}x{height}", settle=False)
        assert not page.evaluate(_PAGE_WIDER_THAN_WINDOW), "the dashboard scrolls sideways"
        assert page.evaluate(_WIDE_TABLES, height) == [], "a table of the first screen scrolls sideways"
        open_app(page, app_server, "admin-judge-runs")
        # On a narrow window the page folds the sidebar, leaving the history the window's width.
        assert _sidebar_open_after_load(page, folds=width < FOLD_BELOW_PX) == (width >= FOLD_BELOW_PX)
        page.wait_for_timeout(500)
        screenshot(page, f"daily-judge-runs-{width}x{height}", settle=False)
        assert not page.evaluate(_PAGE_WIDER_THAN_WINDOW)
        history = page.get_by_test_id("stDataFrame").first
        if history.count():
            assert page.evaluate(_WIDE_TABLES, 100_000)[:1] == [], "the history scrolls sideways"
    finally:
        context.close()


def _below(anchor, answer) -> float:
    """How far below `anchor`'s bottom edge `answer` starts, in px."""
    return answer.bounding_box()["y"] - (anchor.bounding_box()["y"] + anchor.bounding_box()["height"])


def test_a_started_run_answers_under_its_button(page, app_server, accounts):
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, app_server, accounts("admin"))
    open_app(page, app_server, "admin-judge-runs")
    with LLMServer(latency=0.5) as server:
        form = page.get_by_test_id("stForm").first
        form.get_by_role("textbox", name=text("judge.form.base_url")).fill(server.url)
        form.get_by_role("textbox", name=text("judge.form.model"), exact=True).fill("judge-test")
        form.get_by_role("textbox", name=text("judge.form.judge"), exact=True).fill("e2e-daily-judge")
        form.get_by_role("spinbutton", name=text("judge.form.limit")).fill("4")
        start = form.get_by_role("button", name=text("judge.form.start"))
        start.click()
        answer = page.get_by_text("已开始").first
        expect(answer).to_be_visible()
        assert 0 <= _below(start, answer) < NEAR_PX
        expect(page.get_by_test_id("stToast").first).to_be_visible()
        screenshot(page, "daily-judge-started-1440x900", settle=False)
        ended = page.get_by_text("已结束").first
        expect(ended).to_be_visible(timeout=60_000)
        assert 0 <= _below(start, ended) < NEAR_PX
        screenshot(page, "daily-judge-ended-1440x900", settle=False)


@pytest.mark.parametrize("width,height", SIZES, ids=SIZE_IDS)
def test_an_assignment_is_previewed_confirmed_and_said_in_its_tab(browser, app_server, accounts, width, height):
    context = _context(browser, width, height)
    page = context.new_page()
    try:
        login(page, app_server, accounts("admin"))
        open_app(page, app_server, "admin-assignments")
        page.get_by_role("tab", name=text("admin.assign.tab.label")).click()
        submit = page.get_by_role("button", name=text("admin.assign.label.submit"))
        submit.click()
        wait_for_app_run(page)
        # The preview stands under the button; the demo's labeling is handed out, so nothing new is created,
        # or some is: either way the page says which, before anything is written.
        confirm = page.get_by_role("button", name="确认新建")
        nothing = page.get_by_text("没有要新建的任务")
        expect(confirm.or_(nothing).first).to_be_visible()
        answer = confirm if confirm.count() else nothing
        assert 0 <= _below(submit, answer.first) < NEAR_PX
        screenshot(page, f"daily-assign-preview-{width}x{height}", settle=False)
        if confirm.count():
            confirm.click()
            wait_for_app_run(page)
            result = page.get_by_text(text("admin.assign.result", created="", existing="")[:3]).first
            expect(result).to_be_visible()
        # Another tab shows no banner of this one.
        page.get_by_role("tab", name=text("admin.assign.tab.reassign")).click()
        page.wait_for_timeout(300)
        visible_success = [node for node in page.get_by_test_id("stAlertContentSuccess").all() if node.is_visible()]
        assert visible_success == []
        screenshot(page, f"daily-assign-other-tab-{width}x{height}", settle=False)
    finally:
        context.close()


def test_an_export_is_said_next_to_its_button_and_the_release_card_is_rubric_only(page, app_server, accounts):
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, app_server, accounts("admin"))
    open_app(page, app_server, "admin-exports")
    expect(page.get_by_text(text("admin.export.release.help"))).to_be_visible()
    # The gold card's own buttons (by their widget keys): its download appears under its build button.
    build = page.locator(".st-key-build_gold").get_by_role("button", name=text("admin.export.build"))
    build.click()
    wait_for_app_run(page)
    download = page.locator(".st-key-download_gold").get_by_test_id("stDownloadButton")
    expect(download).to_be_visible(timeout=60_000)
    assert 0 <= _below(build, download) < NEAR_PX
    screenshot(page, "daily-export-built-1440x900", settle=False)


def test_the_new_model_page_opens_on_the_newest_model(page, app_server, accounts):
    from sqlmodel import select

    from db.rules.enums import Role
    from db.store.engine import make_engine, session_scope
    from db.store.models import User
    from db.work.generation import models_newest_first

    engine = make_engine(app_server.database_url)
    try:
        with session_scope(engine, read_only=True) as session:
            admin = session.scalars(select(User).where(User.role == Role.admin)).first()
            newest = models_newest_first(session, actor=admin)[0]
    finally:
        engine.dispose()
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, app_server, accounts("admin"))
    open_app(page, app_server, "admin-new-model")
    picker = page.locator("[data-testid=stSelectbox] input").first
    expect(picker).to_have_value(newest)
    page.wait_for_timeout(1000)
    screenshot(page, "daily-new-model-1440x900", settle=False)
