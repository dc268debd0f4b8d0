"""Nothing lost for checkers, at 1440×900 on the demo: decisions made with keys survive a reload as a draft
the page says was kept (when, and not submitted), the restored-draft notice goes at the next key, and
Ctrl+Enter saves exactly them (label check and adjudication); the picker then shows the new state."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from db.rules.config import RUBRIC_SIZE
from db.rules.enums import Stage
from db.store.engine import session_scope
from db.store.models import Draft, Label
from tests.e2e.conftest import ACTION_TIMEOUT_MS, choose_in_picker, login, screenshot, text, wait_for_app_run
from tests.e2e.test_checker_workbench import DISPUTED, disputed, to_check  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser

WAIT_MS = 30_000


def _draft_kept_state():
    """The draft state's words with any time: "草稿已保存 12:03，尚未提交", never "unsaved"."""
    return re.compile("^" + re.escape(text("workbench.draft_kept", when="\x00")).replace("\x00", r"\d\d:\d\d") + "$")


def _picked(page, label_key: str, *parts: str):
    """The picker named `label_key` once the option it shows holds every one of `parts`."""
    pattern = ".*".join(re.escape(part) for part in parts)
    expect(page.get_by_role("combobox", name=text(label_key))).to_have_value(re.compile(pattern), timeout=WAIT_MS)


def _wait_for_draft(engine, key: str, predicate) -> dict:
    """The draft under `key` once `predicate(payload)` holds (drafts are written after each decision)."""
    deadline = time.monotonic() + WAIT_MS / 1000
    payload = None
    while time.monotonic() < deadline:
        with session_scope(engine, read_only=True) as s:
            draft = s.exec(select(Draft).where(Draft.key == key)).first()
            payload = dict(draft.payload) if draft is not None else None
        if payload is not None and predicate(payload):
            return payload
        time.sleep(0.2)
    raise AssertionError(f"no draft {key} as expected; last seen: {payload}")


def _labels(engine, response_id: int, stage: str) -> dict:
    with session_scope(engine, read_only=True) as s:
        return {
            label.criterion_id: (label.met, label.note)
            for label in s.exec(select(Label).where(Label.stage == stage, Label.response_id == response_id)).all()
        }


def _draft_exists(engine, key: str) -> bool:
    with session_scope(engine, read_only=True) as s:
        return s.exec(select(Draft).where(Draft.key == key)).first() is not None


def test_label_check_decisions_survive_a_reload_and_ctrl_enter_saves_them(browser, app_server, accounts, to_check):  # noqa: F811
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    engine, response_id = to_check["engine"], to_check["response_id"]
    key = f"check:{response_id}"
    try:
        login(page, app_server, accounts("checker", 1))
        page.get_by_role("link", name=text("review.check.title")).first.click()
        wait_for_app_run(page)
        choose_in_picker(page, text("review.check.pick"), to_check["code"])
        expect(page.locator(".wb-item")).to_have_count(RUBRIC_SIZE)
        expect(page.locator('.wb-item[data-state="not"]')).to_have_count(1)  # prefilled: c01 not met
        expect(page.locator(".wb-unsaved")).to_be_hidden()
        # c02 and c03 corrected to not met with keys, each with its note (E)
        page.keyboard.press("ArrowDown")
        page.keyboard.press("0")
        page.keyboard.press("0")
        page.keyboard.press("ArrowUp")
        page.keyboard.press("e")
        page.keyboard.type("第三条未提及")
        page.keyboard.press("Enter")
        page.keyboard.press("ArrowUp")
        page.keyboard.press("e")
        page.keyboard.type("第二条未提及")
        page.keyboard.press("Enter")
        expect(page.locator('.wb-item[data-state="not"]')).to_have_count(3)
        _wait_for_draft(
            engine,
            key,
            lambda p: (
                p["decisions"].get("c02") is False
                and p["decisions"].get("c03") is False
                and p["notes"] == {"c02": "第二条未提及", "c03": "第三条未提及"}
            ),
        )
        assert _labels(engine, response_id, Stage.check) == {}

        # a reload loses nothing: reopened, the response shows the draft, marked unsaved
        page.reload()
        wait_for_app_run(page)
        choose_in_picker(page, text("review.check.pick"), to_check["code"])
        expect(page.locator(".wb-pane-title")).to_have_text(text("workbench.response", code=to_check["code"]))
        expect(page.locator(".wb-unsaved")).to_have_text(_draft_kept_state(), timeout=WAIT_MS)
        expect(page.locator('.wb-item[data-state="not"]')).to_have_count(3)
        expect(page.locator(".wb-item").nth(1)).to_contain_text("第二条未提及")
        expect(page.locator(".wb-item").nth(2)).to_contain_text("第三条未提及")
        expect(page.locator(".wb-message")).to_contain_text(text("workbench.draft_restored", when="")[:6])
        screenshot(page, "checker-label-check-1440x900-draft-restored")
        # work resumes: the notice has said its piece; the draft state stays
        page.keyboard.press("ArrowDown")
        expect(page.locator(".wb-message")).to_have_text("")
        expect(page.locator(".wb-unsaved")).to_have_text(_draft_kept_state())

        page.keyboard.press("Control+Enter")
        expect(page.locator(".wb-message")).to_have_attribute("data-kind", "success", timeout=WAIT_MS)
        expect(page.locator(".wb-message")).to_contain_text(
            text("review.check.saved", n=RUBRIC_SIZE, code=to_check["code"]), timeout=WAIT_MS
        )
        wait_for_app_run(page)
        # saved, the next response of the queue opens (or, at the queue's end, the saved one stays, checked)
        if page.locator(".wb-pane-title").text_content() == text("workbench.response", code=to_check["code"]):
            _picked(page, "review.check.pick", to_check["code"], f"{RUBRIC_SIZE}/{RUBRIC_SIZE}")
        expect(page.locator(".wb-unsaved")).to_be_hidden(timeout=WAIT_MS)
        checks = _labels(engine, response_id, Stage.check)
        assert len(checks) == RUBRIC_SIZE
        assert checks["c02"] == (False, "第二条未提及") and checks["c03"] == (False, "第三条未提及")
        assert checks["c01"][0] is False and all(checks[f"c{i:02d}"][0] for i in range(4, RUBRIC_SIZE + 1))
        assert not _draft_exists(engine, key)
    finally:
        context.close()


def test_adjudication_decisions_and_rationale_survive_a_reload(browser, app_server, accounts, disputed):  # noqa: F811
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    engine, response_id = disputed["engine"], disputed["response_id"]
    key = f"adjudication:{response_id}"
    try:
        login(page, app_server, accounts("checker", 1))
        page.get_by_role("link", name=text("review.adjudication.title")).first.click()
        wait_for_app_run(page)
        choose_in_picker(page, text("review.adjudication.pick"), disputed["code"])
        expect(page.locator(".wb-item")).to_have_count(DISPUTED)
        # c01 met, c02 not met, a shared rationale (R)
        page.keyboard.press("1")
        page.keyboard.press("0")
        page.keyboard.press("r")
        page.keyboard.type("以回答原文为准")
        page.keyboard.press("Enter")
        _wait_for_draft(
            engine,
            key,
            lambda p: (
                p["decisions"].get("c01") is True
                and p["decisions"].get("c02") is False
                and p["shared_note"] == "以回答原文为准"
            ),
        )
        assert _labels(engine, response_id, Stage.adjudication) == {}

        page.reload()
        wait_for_app_run(page)
        choose_in_picker(page, text("review.adjudication.pick"), disputed["code"])
        expect(page.locator(".wb-unsaved")).to_have_text(_draft_kept_state(), timeout=WAIT_MS)
        expect(page.locator('.wb-item[data-state="met"]')).to_have_count(1)
        expect(page.locator('.wb-item[data-state="not"]')).to_have_count(1)
        expect(page.locator(".wb-shared-input")).to_have_value("以回答原文为准")
        expect(page.locator(".wb-message")).to_contain_text(text("workbench.draft_restored", when="")[:6])
        screenshot(page, "checker-adjudication-1440x900-draft-restored")

        page.keyboard.press("Control+Enter")
        expect(page.locator(".wb-message")).to_have_text(
            text("review.adjudication.saved", n=2, code=disputed["code"]), timeout=WAIT_MS
        )
        wait_for_app_run(page)
        # two of the disputed criteria decided: the picker counts the rest
        open_now = text("review.adjudication.queue_item", code="", case="", n=DISPUTED - 2, share="").split("·")[2]
        _picked(page, "review.adjudication.pick", disputed["code"], open_now.strip())
        assert _labels(engine, response_id, Stage.adjudication) == {
            "c01": (True, "以回答原文为准"),
            "c02": (False, "以回答原文为准"),
        }
        assert not _draft_exists(engine, key)
    finally:
        context.close()
