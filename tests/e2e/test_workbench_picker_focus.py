"""A picker opened while the workbench is drawn keeps the focus: the code typed into it neither decides
items nor lands in the shared rationale (nor in a draft)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from db.store.engine import session_scope
from db.store.models import Draft
from tests.e2e.conftest import ACTION_TIMEOUT_MS, login, text, wait_for_app_run
from tests.e2e.test_checker_workbench import DISPUTED, disputed  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser


def test_typing_in_a_picker_opened_at_once_stays_in_the_picker(browser, app_server, accounts, disputed):  # noqa: F811
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    engine, response_id = disputed["engine"], disputed["response_id"]
    try:
        login(page, app_server, accounts("checker", 1))
        page.get_by_role("link", name=text("review.adjudication.title")).first.click()
        page.locator(".wb-item").first.wait_for()
        # open the picker as soon as the workbench shows, and keep it open past the workbench's own
        # focus handling before typing a code into it
        box = page.get_by_role("combobox", name=text("review.adjudication.pick"))
        box.click()
        page.wait_for_timeout(800)
        expect(box).to_be_focused()
        page.keyboard.type(disputed["code"])
        page.get_by_role("option", name=disputed["code"]).first.click()
        wait_for_app_run(page)
        expect(page.locator(".wb-pane-title")).to_have_text(text("workbench.response", code=disputed["code"]))
        expect(page.locator(".wb-item")).to_have_count(DISPUTED)
        expect(page.locator('.wb-item[data-state="none"]')).to_have_count(DISPUTED)
        expect(page.locator(".wb-shared-input")).to_have_value("")
        wait_for_app_run(page)
        with session_scope(engine, read_only=True) as s:
            assert s.exec(select(Draft).where(Draft.key == f"adjudication:{response_id}")).first() is None
    finally:
        context.close()
