"""In the browser: the import page states our upload limit (db.rules.limits), in the reader's language, and
Streamlit's own limit line ("1GB per file" for 512 MB) is not shown beside it."""

from __future__ import annotations

import pytest

from db.rules.limits import MAX_UPLOAD_MB
from tests.e2e.conftest import login, open_app, screenshot, text, wait_for_app_run

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_uploader_states_our_limit(page, app_server, accounts, lang):
    from playwright.sync_api import expect

    login(page, app_server, accounts("admin"))
    open_app(page, app_server, "admin-import")
    if lang == "en":
        page.get_by_text("English", exact=True).click()  # the sidebar's language switch
        wait_for_app_run(page)
    expect(page.get_by_text(text("language.upload_limit", lang, mb=MAX_UPLOAD_MB))).to_be_visible()
    dropzone = page.get_by_test_id("stFileUploaderDropzone")
    expect(dropzone).to_be_visible()
    expect(page.get_by_test_id("stFileUploaderDropzoneInstructions")).to_be_hidden()
    assert "per file" not in dropzone.inner_text() and "GB" not in dropzone.inner_text()
    # The pickers of the form read in the page's language, also right after the switch (a cases file has
    # no format to choose: that picker belongs to judge files).
    shown = [box.input_value() for box in page.locator("[data-testid=stSelectbox] input").all()]
    assert shown == [text("admin.import.kind.cases", lang)]
    screenshot(page, f"language-admin-import-{lang}")


def _picker_labels(page) -> list[str]:
    return [box.input_value() for box in page.locator("[data-testid=stSelectbox] input").all()]


def _picker_labels_once(page, settled, timeout_ms: int = 15_000) -> list[str]:
    """The picker's labels as soon as `settled(labels)` holds (the redraw after a switch takes a moment)."""
    labels: list[str] = []
    for _ in range(timeout_ms // 100):
        labels = _picker_labels(page)
        if settled(labels):
            return labels
        page.wait_for_timeout(100)
    return labels


def test_the_adjudication_picker_follows_the_language_switch(page, app_server, accounts):
    """The browser keeps a select box's label; after a switch to English the picker must read English."""
    from playwright.sync_api import expect

    login(page, app_server, accounts("checker", 1))
    open_app(page, app_server, "review-adjudication")
    expect(page.locator("[data-testid=stSelectbox] input").first).to_be_visible()
    [chinese] = _picker_labels(page)
    assert "待仲裁" in chinese
    page.get_by_text("English", exact=True).click()
    wait_for_app_run(page)
    [english] = _picker_labels_once(page, lambda labels: len(labels) == 1 and "open" in labels[0])
    code = chinese.split(" · ")[0]  # the same response stays picked
    assert english.startswith(code + " · ") and "open" in english and "agreement" in english, english
    assert not any("\u4e00" <= ch <= "\u9fff" for ch in english.replace(chinese.split(" · ")[1], ""))
    screenshot(page, "language-review-adjudication-en")
    page.get_by_text("中文", exact=True).click()
    wait_for_app_run(page)
    assert _picker_labels_once(page, lambda labels: labels == [chinese]) == [chinese]


def test_the_workbench_follows_the_language_switch_and_keeps_the_decisions(page, app_server, accounts):
    from playwright.sync_api import expect

    login(page, app_server, accounts("checker", 2))
    open_app(page, app_server, "review-adjudication")
    frame = page.locator(".wb-items")
    expect(frame.locator(".wb-yes").first).to_have_text(text("workbench.met"))
    frame.locator(".wb-item").first.click()
    page.keyboard.press("1")  # one decision, kept in the browser until saved
    decided = frame.locator(".wb-item").first.get_attribute("class")
    page.get_by_text("English", exact=True).click()
    wait_for_app_run(page)
    expect(frame.locator(".wb-yes").first).to_have_text(text("workbench.met", "en"))
    expect(page.locator(".wb-save")).to_have_text(text("workbench.adj.save", "en"))
    assert frame.locator(".wb-item").first.get_attribute("class") == decided
    screenshot(page, "language-workbench-en")
