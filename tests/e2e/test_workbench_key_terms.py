"""The focused criterion's key terms are marked in the response on the labeling workbench (1440×900):
<mark> elements made with DOM calls around the terms the page sent, the response's text unchanged (markup
in it stays text), and the marks follow the focus from criterion to criterion."""

from __future__ import annotations

import secrets

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from db import counts
from db.access import users
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import AssignmentKind, RubricStatus
from db.store.engine import make_engine, session_scope
from db.store.models import Assignment, Criterion, RubricVersion
from tests.e2e.conftest import ACTION_TIMEOUT_MS, choose_in_picker, login, screenshot, text, wait_for_app_run
from tests.support.factories import make_case, make_response
from ui.key_terms import key_terms

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
RESPONSE = (
    "建议尽快<b>完善头颅 CT</b> 检查，<img src=x onerror=alert(1)>监测血压并记录每日读数。\n"
    "出现意识障碍时立即拨打急救电话。\n"
    + "其余注意事项见随访计划。\n" * 40
    + "最后再次提醒：完善头颅 CT 前不要自行服药。"
)
CRITERIA = {1: "推荐完善头颅 CT 平扫以排除出血", 2: "建议监测血压并记录每日读数", 3: "询问既往是否有偏头痛发作史"}


@pytest.fixture
def world(app_server, accounts):
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    labeler = accounts("annotator", 2)
    with session_scope(engine) as s:
        grader = users.get_user(s, username=labeler.username)
        case = make_case(s, f"E2E-KT{tag}", n=RUBRIC_SIZE, status=RubricStatus.approved)
        response = make_response(s, case, f"hidden-model-{tag}", RESPONSE)
        s.add(
            Assignment(
                kind=AssignmentKind.label, case_pk=case.id, response_id=response.id, user_id=grader.id, group_no=2
            )
        )
        counts.refresh_assignments(s, [response.id])
        version = s.exec(select(RubricVersion).where(RubricVersion.case_pk == case.id)).one()
        for criterion in s.exec(select(Criterion).where(Criterion.rubric_version_id == version.id)).all():
            if criterion.position in CRITERIA:
                criterion.text = CRITERIA[criterion.position]
                s.add(criterion)
        code = response.code
    yield {"labeler": labeler, "code": code}
    engine.dispose()


def _marks(page) -> list[str]:
    return page.locator(".wb-text mark.wb-mark").all_inner_texts()


def test_the_focused_criterions_terms_are_marked_in_the_response(browser, app_server, world):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        login(page, app_server, world["labeler"])
        page.get_by_role("link", name=text("annotate.labeling.title")).first.click()
        wait_for_app_run(page)
        choose_in_picker(page, text("annotate.labeling.pick"), world["code"])
        expect(page.locator(".wb-pane-title")).to_have_text(text("workbench.response", code=world["code"]))
        pane = page.locator(".wb-text")
        # criterion 1 has the focus: "完善头颅" and "CT" are marked wherever the response has them
        first = key_terms(CRITERIA[1], RESPONSE)
        assert first == ("完善头颅", "CT")
        expect(page.locator(".wb-text mark.wb-mark")).to_have_count(4, timeout=WAIT_MS)
        assert _marks(page) == ["完善头颅", "CT", "完善头颅", "CT"]
        # the response reads exactly as sent: its markup is text, no element came from it
        assert pane.evaluate("el => el.textContent") == RESPONSE
        assert pane.evaluate("el => el.querySelectorAll(':not(mark)').length") == 0
        screenshot(page, "annotator-labeling-1440x900-key-terms")
        # the marks follow the focus
        page.keyboard.press("j")
        expect(page.locator(".wb-text mark.wb-mark")).to_have_count(1)
        assert _marks(page) == list(key_terms(CRITERIA[2], RESPONSE)) == ["监测血压并记录每日读数"]
        page.keyboard.press("j")  # nothing of criterion 3 is in the response: nothing marked
        expect(page.locator(".wb-text mark.wb-mark")).to_have_count(0)
        assert pane.evaluate("el => el.textContent") == RESPONSE
        page.keyboard.press("k")
        page.keyboard.press("k")
        expect(page.locator(".wb-text mark.wb-mark")).to_have_count(4)
    finally:
        context.close()
