"""A checker adjudicates with keys only, at 1440×900 on the demo: response beside the disputed cells."""

from __future__ import annotations

import re
import secrets

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from db.access import independence, users
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import RubricStatus, Stage
from db.store.engine import make_engine, session_scope
from db.store.models import Label
from tests.e2e.conftest import (
    ACTION_TIMEOUT_MS,
    DEMO_PASSWORD,
    choose_in_picker,
    login,
    screenshot,
    text,
    wait_for_app_run,
)
from tests.support.factories import make_case, make_label, make_response, make_user

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
DISPUTED = 20  # criteria on which the two groups' final labels differ
RESPONSE_TEXT = "\n".join(f"第{i}点：建议完善血常规与C反应蛋白检查，必要时复诊。" for i in range(1, 30))


@pytest.fixture
def disputed(app_server, accounts):
    """A fresh response both groups labeled, differing on the first DISPUTED criteria."""
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    g1, g2 = accounts("annotator", 1), accounts("annotator", 2)
    with session_scope(engine) as s:
        one = users.get_user(s, username=g1.username)
        two = users.get_user(s, username=g2.username)
        case = make_case(
            s, f"E2E-ADJ{tag}", n=RUBRIC_SIZE, status=RubricStatus.approved, user_request="孩子发热两天怎么办？"
        )
        response = make_response(s, case, f"hidden-model-{tag}", RESPONSE_TEXT)
        checkers = {n: make_user(s, f"e2e-chk{n}-{tag}", "checker", n, password=DEMO_PASSWORD) for n in (1, 2)}
        for i in range(1, RUBRIC_SIZE + 1):
            cid = f"c{i:02d}"
            make_label(s, response, cid, True, one, note="组一认为满足" if i == 1 else None)
            make_label(s, response, cid, i > DISPUTED, two)
            # both groups' checks confirm their annotations: adjudication may start
            make_label(s, response, cid, True, checkers[1], stage=Stage.check, note="组一认为满足" if i == 1 else None)
            make_label(s, response, cid, i > DISPUTED, checkers[2], stage=Stage.check)
        world = {"code": response.code, "response_id": response.id, "model": response.model}
    with session_scope(engine) as s:
        # the demo checkers have taken it into adjudication (closing their groups' labels on it to them)
        for group in (1, 2):
            checker = users.get_user(s, username=accounts("checker", group).username)
            independence.open_adjudication(s, checker, world["response_id"])
    yield {"engine": engine, **world}
    engine.dispose()


def test_a_checker_adjudicates_with_keys_only(browser, app_server, accounts, disputed):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        login(page, app_server, accounts("checker", 1))
        page.get_by_role("link", name=text("review.adjudication.title")).first.click()
        wait_for_app_run(page)
        choose_in_picker(page, text("review.adjudication.pick"), disputed["code"])
        wait_for_app_run(page)
        expect(page.locator(".wb-pane-title")).to_have_text(text("workbench.response", code=disputed["code"]))
        page.locator(".wb-item").first.wait_for()
        assert disputed["model"] not in page.content()
        expect(page.locator(".wb-item")).to_have_count(DISPUTED)
        # the response stays in sight beside the cells; A and B are shown with their notes
        expect(page.locator(".wb-text")).to_contain_text("第1点")
        assert page.locator(".wb-text").bounding_box()["height"] > 300
        expect(page.locator(".wb-item").first).to_contain_text("组一认为满足")
        screenshot(page, "checker-adjudication-1440x900-open")

        # without a rationale nothing is saved
        page.keyboard.press("1")
        page.keyboard.press("Control+Enter")
        expect(page.locator(".wb-message")).to_have_attribute("data-kind", "error", timeout=WAIT_MS)
        wait_for_app_run(page)
        with session_scope(disputed["engine"], read_only=True) as s:
            assert (
                s.exec(
                    select(Label).where(Label.stage == Stage.adjudication, Label.response_id == disputed["response_id"])
                ).all()
                == []
            )

        # the refusal put the cursor in c01's rationale box; Esc leaves it on c01
        expect(page.locator(".wb-note-input")).to_be_focused()
        page.keyboard.press("Escape")
        # c02 not met, c03 met, a shared rationale (R), one of its own for c03 (E), Ctrl+Enter
        page.keyboard.press("j")
        page.keyboard.press("0")
        page.keyboard.press("1")
        page.keyboard.press("k")
        page.keyboard.press("e")
        page.keyboard.type("回答写明了复诊时机")
        page.keyboard.press("Enter")
        page.keyboard.press("r")
        page.keyboard.type("以回答原文为准")
        page.keyboard.press("Enter")
        screenshot(page, "checker-adjudication-1440x900-decided")
        page.keyboard.press("Control+Enter")
        expect(page.locator(".wb-message")).to_have_text(
            text("review.adjudication.saved", n=3, code=disputed["code"]), timeout=WAIT_MS
        )
        wait_for_app_run(page)
        screenshot(page, "checker-adjudication-1440x900-saved")
        with session_scope(disputed["engine"], read_only=True) as s:
            gold = {
                label.criterion_id: (label.met, label.note)
                for label in s.exec(
                    select(Label).where(Label.stage == Stage.adjudication, Label.response_id == disputed["response_id"])
                ).all()
            }
        assert gold == {
            "c01": (True, "以回答原文为准"),
            "c02": (False, "以回答原文为准"),
            "c03": (True, "回答写明了复诊时机"),
        }
        # the decided cells show their decision, the rest are still open
        expect(page.locator('.wb-item[data-state="none"]')).to_have_count(DISPUTED - 3)
        expect(page.locator(".wb-items-title")).to_have_text(re.compile(str(DISPUTED - 3)))
    finally:
        context.close()


@pytest.fixture
def to_check(app_server, accounts):
    """A fresh response labeled by the first annotator of group 1 (every criterion met but c01)."""
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    with session_scope(engine) as s:
        annotators = sorted(
            (
                u
                for u in users.list_users(s, actor=users.SYSTEM_ACTOR)
                if u.role == "annotator" and u.group_no == 1 and u.is_active
            ),
            key=lambda u: u.username,
        )
        annotator = annotators[0]
        case = make_case(s, f"E2E-CHK{tag}", n=RUBRIC_SIZE, status=RubricStatus.approved)
        response = make_response(s, case, f"hidden-model-{tag}", RESPONSE_TEXT)
        for i in range(1, RUBRIC_SIZE + 1):
            make_label(s, response, f"c{i:02d}", i != 1, annotator)
        world = {"code": response.code, "response_id": response.id, "annotator": annotator.username}
    yield {"engine": engine, **world}
    engine.dispose()


def test_a_checker_confirms_and_corrects_labels_with_keys(browser, app_server, accounts, to_check):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        login(page, app_server, accounts("checker", 1))
        page.get_by_role("link", name=text("review.check.title")).first.click()
        wait_for_app_run(page)
        choose_in_picker(page, text("review.check.pick"), to_check["code"])
        wait_for_app_run(page)
        expect(page.locator(".wb-pane-title")).to_have_text(text("workbench.response", code=to_check["code"]))
        expect(page.locator(".wb-item")).to_have_count(RUBRIC_SIZE)
        # prefilled with the annotator's labels
        expect(page.locator('.wb-item[data-state="not"]')).to_have_count(1)
        screenshot(page, "checker-label-check-1440x900-open")
        # correct c02 (met) to not met without a note: refused, nothing saved
        page.keyboard.press("ArrowDown")
        page.keyboard.press("0")
        page.keyboard.press("Control+Enter")
        expect(page.locator(".wb-message")).to_have_attribute("data-kind", "error", timeout=WAIT_MS)
        wait_for_app_run(page)
        with session_scope(to_check["engine"], read_only=True) as s:
            assert (
                s.exec(
                    select(Label).where(Label.stage == Stage.check, Label.response_id == to_check["response_id"])
                ).all()
                == []
            )
        # the refusal opened c02's note box with the cursor in it: the note is typed straight away,
        # then Ctrl+Enter confirms the rest as they are
        expect(page.locator(".wb-note-input")).to_be_focused()
        page.keyboard.type("回答未说明")
        page.keyboard.press("Enter")
        wait_for_app_run(page)
        screenshot(page, "checker-label-check-1440x900-noted")
        page.keyboard.press("Control+Enter")
        expect(page.locator(".wb-message")).to_have_attribute("data-kind", "success", timeout=WAIT_MS)
        wait_for_app_run(page)
        screenshot(page, "checker-label-check-1440x900-saved")
        with session_scope(to_check["engine"], read_only=True) as s:
            checks = {
                label.criterion_id: (label.met, label.note)
                for label in s.exec(
                    select(Label).where(Label.stage == Stage.check, Label.response_id == to_check["response_id"])
                ).all()
            }
        assert len(checks) == RUBRIC_SIZE
        assert checks["c02"] == (False, "回答未说明")
        assert checks["c01"][0] is False and all(checks[f"c{i:02d}"][0] for i in range(3, RUBRIC_SIZE + 1))
    finally:
        context.close()


@pytest.fixture
def submitted(app_server, accounts):
    """A rubric a group-1 annotator submitted, waiting for the audit."""
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    with session_scope(engine) as s:
        author = users.get_user(s, username=accounts("annotator", 1).username)
        case = make_case(s, f"E2E-AUD{tag}", n=RUBRIC_SIZE, status=RubricStatus.submitted, author=author)
        case_id = case.case_id
    yield case_id
    engine.dispose()


def test_rubric_audit_shows_the_case_beside_the_criteria_on_one_screen(browser, app_server, accounts, submitted):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        login(page, app_server, accounts("checker", 2))
        page.get_by_role("link", name=text("review.audit.title")).first.click()
        wait_for_app_run(page)
        choose_in_picker(page, text("review.audit.pick"), submitted)
        approve = page.get_by_role("button", name=text("review.audit.approve"))
        screenshot(page, "checker-rubric-audit-1440x900")
        # the decision buttons are on the first screen, the case pane sits left of the criteria
        box = approve.bounding_box()
        assert box["y"] + box["height"] <= 900
        case_title = page.get_by_text(text("widgets.case.user_request")).first
        assert case_title.bounding_box()["x"] + 200 < box["x"] + 400
    finally:
        context.close()
