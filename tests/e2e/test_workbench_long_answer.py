"""A long answer labeled from the keyboard alone, with the case in view beside it, at 1440×900 and 1024×768.

Real model answers run to thousands of characters: the response pane scrolls on Space / PageDown and back
on Shift+Space / PageUp while the focused criterion stays where it is; the case stays readable above the
response (C folds it away and back, never in place of the response); the draft state says the draft is
kept and not yet submitted; the restored-draft notice goes once work resumes; the page's controls fit.
"""

from __future__ import annotations

import re
import secrets
import time

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from db import counts
from db.access import users
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import AssignmentKind, RubricStatus
from db.store.engine import make_engine, session_scope
from db.store.models import Assignment, Draft, Label
from tests.e2e.conftest import ACTION_TIMEOUT_MS, choose_in_picker, login, screenshot, text, wait_for_app_run
from tests.support.factories import make_case, make_response

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
ANSWER_CHARS = 8_000
CONTEXT = (
    "患者男，58 岁，高血压病史 10 年，规律服用氨氯地平。今晨突发胸背部撕裂样疼痛 2 小时，伴大汗。"
    "查体：血压 右上肢 182/104 mmHg、左上肢 150/90 mmHg，心率 102 次/分。"
    "化验：D-二聚体 4.8 mg/L（升高），肌钙蛋白 I 0.02 ng/mL（正常），血肌酐 168 μmol/L（升高）。"
    "心电图：窦性心动过速，未见 ST 段抬高。"
)
REQUEST = "胸背部剧痛两小时，应该怎么处理？"
SIZES = [(1440, 900), (1024, 768)]


def _long_answer() -> str:
    paragraphs, i = [], 0
    while sum(len(p) + 1 for p in paragraphs) < ANSWER_CHARS:
        i += 1
        paragraphs.append(
            f"第{i}段：结合双上肢血压差、D-二聚体升高与撕裂样胸背痛，应首先考虑主动脉夹层，"
            "需尽快完善主动脉 CTA，控制心率与血压，避免抗凝与溶栓，并请血管外科会诊评估手术指征。"
        )
    return "\n".join(paragraphs)[:ANSWER_CHARS]


ANSWER = _long_answer()


@pytest.fixture
def world(app_server, accounts):
    """A fresh case (a realistic context) and one 8,000-character response for a group-2 annotator."""
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    labeler = accounts("annotator", 2)
    with session_scope(engine) as s:
        grader = users.get_user(s, username=labeler.username)
        case = make_case(
            s,
            f"E2E-LA{tag}",
            n=RUBRIC_SIZE,
            status=RubricStatus.approved,
            clinical_context=CONTEXT,
            user_request=REQUEST,
        )
        response = make_response(s, case, f"hidden-model-{tag}", ANSWER)
        s.add(
            Assignment(
                kind=AssignmentKind.label, case_pk=case.id, response_id=response.id, user_id=grader.id, group_no=2
            )
        )
        counts.refresh_assignments(s, [response.id])
        world = {
            "case_id": case.case_id,
            "code": response.code,
            "id": response.id,
            "model": response.model,
            "user_id": grader.id,
        }
    yield {"engine": engine, "labeler": labeler, **world}
    engine.dispose()


def _tab(browser, width: int, height: int):
    context = browser.new_context(
        viewport={"width": width, "height": height}, locale="zh-CN", timezone_id="Asia/Shanghai"
    )
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    return context


def _open(page, app_server, world) -> None:
    login(page, app_server, world["labeler"])
    page.get_by_role("link", name=text("annotate.labeling.title")).first.click()
    wait_for_app_run(page)
    choose_in_picker(page, text("annotate.labeling.pick"), world["code"])
    expect(page.locator(".wb-pane-title")).to_have_text(text("workbench.response", code=world["code"]), timeout=WAIT_MS)
    page.locator(".wb-item").first.wait_for()
    page.wait_for_timeout(500)  # the workbench takes the focus back from the picker


def _scroll_top(page) -> float:
    return page.locator(".wb-text").evaluate("node => node.scrollTop")


def _focused(page) -> str:
    return page.locator(".wb-item.wb-focus").get_attribute("data-index")


def _in_view(box, width: int, height: int) -> bool:
    return box is not None and box["height"] > 20 and box["y"] >= 0 and box["y"] + 20 <= height and box["x"] < width


def _labels(world) -> dict[str, bool]:
    with session_scope(world["engine"], read_only=True) as s:
        rows = s.exec(select(Label).where(Label.response_id == world["id"])).all()
        return {label.criterion_id: label.met for label in rows}


def _wait_for_draft(world, judged: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with session_scope(world["engine"], read_only=True) as s:
            draft = s.exec(
                select(Draft).where(Draft.user_id == world["user_id"], Draft.key == f"label:{world['id']}")
            ).first()
            if draft and sum(v is not None for v in draft.payload["decisions"].values()) == judged:
                return
        time.sleep(0.2)
    raise AssertionError(f"no draft with {judged} decisions after {timeout_s}s")


def _press_and_check_scroll(page) -> None:
    """Space/PageDown scroll the response down, Shift+Space/PageUp back; the focused criterion does not move."""
    focused = _focused(page)
    assert _scroll_top(page) == 0
    page.keyboard.press("Space")
    after_space = _scroll_top(page)
    assert after_space > 100, after_space
    page.keyboard.press("PageDown")
    after_page_down = _scroll_top(page)
    assert after_page_down > after_space + 100, (after_space, after_page_down)
    page.keyboard.press("Shift+Space")
    assert _scroll_top(page) < after_page_down
    page.keyboard.press("PageUp")
    assert _scroll_top(page) == 0
    for _ in range(3):
        page.keyboard.press("PageDown")
    assert _scroll_top(page) > after_page_down
    assert _focused(page) == focused
    expect(page.locator(".wb-item.wb-focus")).to_be_focused()


@pytest.mark.parametrize(("width", "height"), SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_a_long_answer_is_labeled_from_the_keyboard_beside_the_case(browser, app_server, world, width, height):
    context = _tab(browser, width, height)
    page = context.new_page()
    try:
        _open(page, app_server, world)
        assert world["model"] not in page.content()
        # the case is in view by default, beside (above) the response, under its own title
        case_text = page.locator(".wb-context-text")
        expect(case_text).to_have_text(CONTEXT)
        expect(page.locator(".wb-text")).to_be_visible()
        assert _in_view(case_text.bounding_box(), width, height), case_text.bounding_box()
        assert _in_view(page.locator(".wb-text").bounding_box(), width, height)
        expect(page.locator(".wb-context-title")).to_contain_text(text("workbench.case"))
        screenshot(page, f"annotator-long-answer-{width}x{height}-open")

        _press_and_check_scroll(page)
        screenshot(page, f"annotator-long-answer-{width}x{height}-scrolled")

        # C folds the case away and back; the response stays under its own title throughout
        page.keyboard.press("c")
        expect(case_text).to_be_hidden()
        expect(page.locator(".wb-text")).to_be_visible()
        expect(page.locator(".wb-pane-title")).to_have_text(text("workbench.response", code=world["code"]))
        page.keyboard.press("c")
        expect(case_text).to_be_visible()
        assert _in_view(case_text.bounding_box(), width, height)

        # every decision from the keyboard, scrolling between them; the draft state tells the truth
        for index in range(RUBRIC_SIZE):
            page.keyboard.press("1" if index % 2 == 0 else "0")
            if index % 10 == 9:
                page.keyboard.press("PageDown")
        expect(page.locator(".wb-count")).to_have_text(text("workbench.count", judged=RUBRIC_SIZE, total=RUBRIC_SIZE))
        _wait_for_draft(world, RUBRIC_SIZE)
        kept = text("workbench.draft_kept", when="\x00").split("\x00")
        expect(page.locator(".wb-unsaved")).to_have_text(
            re.compile(re.escape(kept[0]) + r"\d{2}:\d{2}" + re.escape(kept[1])), timeout=WAIT_MS
        )
        assert _in_view(case_text.bounding_box(), width, height)
        screenshot(page, f"annotator-long-answer-{width}x{height}-judged")

        page.keyboard.press("Control+Enter")
        expect(page.locator(".wb-message")).to_have_text(
            text("workbench.saved_next", code=world["code"], created=RUBRIC_SIZE, updated=0), timeout=WAIT_MS
        )
        wait_for_app_run(page)
        assert _labels(world) == {f"c{i:02d}": i % 2 == 1 for i in range(1, RUBRIC_SIZE + 1)}
    finally:
        context.close()


def _fits(button) -> bool:
    """The button shows its whole label on one line, inside its border: nothing cut, nothing wrapped."""
    return button.evaluate(
        """node => {
            const label = node.querySelector("p");
            if (!label) return false;
            const range = document.createRange();
            range.selectNodeContents(label);
            const rects = [...range.getClientRects()].filter(r => r.width > 0);
            const box = node.getBoundingClientRect();
            const lines = new Set(rects.map(r => Math.round(r.top)));
            return rects.length > 0 && lines.size === 1 && label.scrollWidth <= label.clientWidth + 1
              && rects.every(r => r.left >= box.left - 0.5 && r.right <= box.right + 0.5);
        }"""
    )


@pytest.mark.parametrize(("width", "height"), [*SIZES, (1920, 1080)], ids=["1440", "1024", "1920"])
def test_the_controls_fit_and_the_restored_draft_notice_goes_once_work_resumes(
    browser, app_server, world, width, height
):
    context = _tab(browser, width, height)
    page = context.new_page()
    try:
        _open(page, app_server, world)
        screenshot(page, f"annotator-long-answer-{width}x{height}-controls")
        skip = page.get_by_role("button", name=text("annotate.labeling.skip"))
        refresh = page.get_by_role("button", name=re.compile(text("annotate.labeling.refresh_short")))
        expect(skip).to_be_visible()
        expect(refresh).to_be_visible()
        assert _fits(skip), "the skip button's label is cut"
        expect(refresh.locator("p")).to_have_text(text("annotate.labeling.refresh_short"))
        assert _fits(refresh), "the refresh button's label is cut"
        legend = page.locator(".wb-legend")
        line = float(legend.evaluate("node => parseFloat(getComputedStyle(node).lineHeight)"))
        assert legend.bounding_box()["height"] <= 2 * line + 2, legend.bounding_box()
        wb_box = page.locator(".wb").bounding_box()
        assert wb_box["x"] + wb_box["width"] <= width and wb_box["y"] + wb_box["height"] <= height + 1

        page.keyboard.press("1")
        _wait_for_draft(world, 1)
        page.reload()
        wait_for_app_run(page)
        page.locator(".wb-item").first.wait_for()
        restored = text("workbench.draft_restored", when="\x00").split("\x00")[0]
        expect(page.locator(".wb-message")).to_contain_text(restored, timeout=WAIT_MS)
        page.wait_for_timeout(500)
        screenshot(page, f"annotator-long-answer-{width}x{height}-restored")
        page.keyboard.press("j")  # work resumes: the notice has said what it had to
        expect(page.locator(".wb-message")).not_to_contain_text(restored)
        page.keyboard.press("0")
        _wait_for_draft(world, 2)
        wait_for_app_run(page)
        expect(page.locator(".wb-message")).not_to_contain_text(restored)
    finally:
        context.close()
