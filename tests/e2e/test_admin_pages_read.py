"""The admin pages in the browser at 1440×900: a wrong file type is refused in our words (Streamlit's own
English refusal never shows), the uploader empties after an import, the add-user form keeps its fields
after a refusal, and the audit log and assignments pages read as the reader expects. Screenshots of
each state land in tests/artifacts/screenshots/admin-read-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import ACTION_TIMEOUT_MS, choose_in_picker, login, open_app, screenshot, text, wait_for_app_run

pytestmark = pytest.mark.browser


@pytest.fixture
def wide(browser):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN", timezone_id="Asia/Shanghai")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    yield context.new_page()
    context.close()


def test_the_import_page_refuses_a_wrong_file_in_our_words_and_empties_after_an_import(wide, app_server, accounts):
    page = wide
    login(page, app_server, accounts("admin"))
    open_app(page, app_server, "admin-import")
    expect(page.get_by_text(text("admin.import.judge"))).to_have_count(0)  # asked for judge files only
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b'{"case_id": "CC-0001"}\n'}]
    )
    wait_for_app_run(page)
    expect(page.get_by_text(text("admin.import.wrong_type", file="notes.txt"))).to_be_visible()
    expect(page.get_by_text("are not allowed")).to_have_count(0)
    screenshot(page, "admin-read-import-wrong-type-1440x900")

    expect(page.get_by_text("notes.txt", exact=True)).to_have_count(0)  # taken out of the uploader
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "cut.jsonl", "mimeType": "application/octet-stream", "buffer": b'{"case_id": "CC-0001"\n'}]
    )
    wait_for_app_run(page)
    page.get_by_role("button", name=text("admin.import.submit")).click()
    wait_for_app_run(page)
    column = len('{"case_id": "CC-0001"') + 1
    expect(page.get_by_text(f"第 {column} 列").first).to_be_visible()
    expect(page.get_by_text("cut.jsonl", exact=True)).to_have_count(0)  # the uploader holds no file any more
    screenshot(page, "admin-read-import-after-1440x900")

    choose_in_picker(page, text("admin.import.kind"), text("admin.import.kind.judge"))
    expect(page.get_by_text(text("admin.import.judge"))).to_be_visible()
    screenshot(page, "admin-read-import-judge-1440x900")


def test_the_users_assignments_and_audit_pages_read_in_the_readers_terms(wide, app_server, accounts):
    page = wide
    login(page, app_server, accounts("admin"))
    open_app(page, app_server, "admin-users")
    page.get_by_role("textbox", name=text("admin.users.username"), exact=True).fill("anno1a")  # taken: refused
    page.get_by_role("textbox", name=text("admin.users.display_name"), exact=True).fill("新医生")
    page.get_by_role("textbox", name=text("admin.users.password"), exact=True).fill("a-long-password-1")
    page.get_by_role("button", name=text("admin.users.add.submit")).click()
    wait_for_app_run(page)
    expect(page.get_by_role("alert").first).to_be_visible()
    expect(page.get_by_role("textbox", name=text("admin.users.display_name"), exact=True)).to_have_value("新医生")
    screenshot(page, "admin-read-users-refused-1440x900")

    open_app(page, app_server, "admin-assignments")
    page.get_by_role("tab", name=text("admin.assign.tab.reassign")).click()
    wait_for_app_run(page)
    page.get_by_role("combobox", name=text("admin.assign.task")).click()
    first = page.get_by_role("option").first
    expect(first).to_contain_text("CC-")
    expect(page.get_by_role("option").filter(has_text="model-")).to_have_count(0)
    screenshot(page, "admin-read-assign-reassign-1440x900")
    page.keyboard.press("Escape")

    open_app(page, app_server, "admin-audit-log")
    expect(page.get_by_text("北京时间，UTC+8").first).to_be_visible()
    expect(page.get_by_text("Asia/Shanghai")).to_have_count(0)
    expect(page.get_by_text("yyyy-mm-dd")).to_have_count(0)
    screenshot(page, "admin-read-audit-log-1440x900")
    choose_in_picker(page, text("review.audit_log.entry"), "提交 · 评分标准")
    page.get_by_text(text("review.audit_log.raw")).scroll_into_view_if_needed()
    expect(page.get_by_text("null")).to_have_count(0)
    screenshot(page, "admin-read-audit-log-entry-1440x900")

    open_app(page, app_server, "admin-progress")
    screenshot(page, "admin-read-progress-1440x900")
