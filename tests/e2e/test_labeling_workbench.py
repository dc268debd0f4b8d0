"""The labeling workbench in a real browser at 1440×900 on the demo: no silent defaults, nothing lost,
one screen, one key per decision."""

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
from db.store.models import Assignment, Draft, Label, LabelTiming
from tests.e2e.conftest import ACTION_TIMEOUT_MS, choose_in_picker, login, screenshot, text, wait_for_app_run
from tests.support.factories import make_case, make_response

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
LONG_RESPONSE = "\n".join(
    f"第{i}段：建议尽快完善头颅 CT 检查，监测血压，并记录每日头痛发作的时间与持续时长。" for i in range(1, 40)
)
LONG_CRITERION = (
    "说明出现剧烈头痛、喷射性呕吐、意识改变或一侧肢体无力等危险信号时，应立即拨打急救电话并前往最近医院的急诊科就诊"
)


@pytest.fixture
def world(app_server, accounts):
    """Two fresh responses to label for a group-2 annotator of the demo; the case's criteria are long enough to wrap."""
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    labeler = accounts("annotator", 2)
    with session_scope(engine) as s:
        grader = users.get_user(s, username=labeler.username)
        case = make_case(
            s, f"E2E-WB{tag}", n=RUBRIC_SIZE, status=RubricStatus.approved, user_request="头痛三天，需要做哪些检查？"
        )
        responses = [make_response(s, case, f"hidden-model-{tag}-{i}", LONG_RESPONSE) for i in (1, 2)]
        for response in responses:
            s.add(
                Assignment(
                    kind=AssignmentKind.label, case_pk=case.id, response_id=response.id, user_id=grader.id, group_no=2
                )
            )
        counts.refresh_assignments(s, [response.id for response in responses])
        _lengthen_criteria(s, case.id)
        world = {
            "case_id": case.case_id,
            "codes": [r.code for r in responses],
            "ids": [r.id for r in responses],
            "models": [r.model for r in responses],
            "user_id": grader.id,
        }
    yield {"engine": engine, "labeler": labeler, **world}
    engine.dispose()


def _lengthen_criteria(session, case_pk: int) -> None:
    """Every third criterion is long, so the list shows wrapped criteria, as real rubrics do."""
    from db.store.models import Criterion, RubricVersion

    version = session.exec(select(RubricVersion).where(RubricVersion.case_pk == case_pk)).one()
    for criterion in session.exec(select(Criterion).where(Criterion.rubric_version_id == version.id)).all():
        if criterion.position % 3 == 0:
            criterion.text = LONG_CRITERION
            session.add(criterion)
    session.flush()


@pytest.fixture
def screen(browser, app_server):
    """A 1440×900 tab."""
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN", timezone_id="Asia/Shanghai")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


def _open_response(page, app_server, world, index: int) -> None:
    """Signs in, opens the labeling page and picks the response by its code in the picker."""
    login(page, app_server, world["labeler"])
    page.get_by_role("link", name=text("annotate.labeling.title")).first.click()
    wait_for_app_run(page)
    code = world["codes"][index]
    choose_in_picker(page, text("annotate.labeling.pick"), code)
    wait_for_app_run(page)
    expect(page.get_by_text(text("workbench.response", code=code))).to_be_visible(timeout=WAIT_MS)
    page.locator(".wb-item").first.wait_for()


def _labels(world, index: int) -> dict[str, bool]:
    with session_scope(world["engine"], read_only=True) as s:
        rows = s.exec(select(Label).where(Label.response_id == world["ids"][index])).all()
        return {label.criterion_id: label.met for label in rows}


def _draft(world, index: int) -> dict | None:
    with session_scope(world["engine"], read_only=True) as s:
        draft = s.exec(
            select(Draft).where(Draft.user_id == world["user_id"], Draft.key == f"label:{world['ids'][index]}")
        ).first()
        return dict(draft.payload) if draft else None


def _wait_for_draft(world, index: int, judged: int, timeout_s: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        draft = _draft(world, index)
        if draft and sum(v is not None for v in draft["decisions"].values()) == judged:
            return draft
        time.sleep(0.2)
    raise AssertionError(f"no draft with {judged} decisions after {timeout_s}s: {_draft(world, index)}")


def _fully_visible(page, locator) -> int:
    """How many of the elements are entirely inside the viewport and inside their scrolling list."""
    height = page.viewport_size["height"]
    return page.evaluate(
        """([selector, height]) => {
            const list = document.querySelector('.wb-items') ||
              [...document.querySelectorAll('*')].map(e => e.shadowRoot).filter(Boolean)
                .map(r => r.querySelector('.wb-items')).find(Boolean);
            const root = list.getRootNode();
            const box = list.getBoundingClientRect();
            return [...root.querySelectorAll(selector)].filter(e => {
              const r = e.getBoundingClientRect();
              return r.top >= Math.max(0, box.top) && r.bottom <= Math.min(height, box.bottom) && r.height > 0;
            }).length;
        }""",
        [locator, height],
    )


def test_untouched_save_is_refused_then_keys_survive_a_reload_and_save_exactly(screen, app_server, world):
    page = screen
    _open_response(page, app_server, world, 0)
    # blinded: the model behind the response is nowhere on the page, nor in any element id
    assert not any(model in page.content() for model in world["models"])
    screenshot(page, "annotator-labeling-1440x900-open")

    # One screen: at least 12 criteria and the top of the response readable without scrolling.
    assert _fully_visible(page, ".wb-item") >= 12
    response_box = page.locator(".wb-text").bounding_box()
    assert response_box["y"] + 60 < 900 and response_box["height"] > 300
    expect(page.locator(".wb-text")).to_contain_text("第1段")
    # the request is always in view; long criteria wrap in full
    expect(page.locator(".wb-request-text")).to_have_text("头痛三天，需要做哪些检查？")
    long_row = page.locator(".wb-item-text").nth(2)
    expect(long_row).to_have_text(LONG_CRITERION)
    assert long_row.bounding_box()["height"] > 40
    # first unjudged criterion has the focus
    expect(page.locator(".wb-item").first).to_have_class(re.compile("wb-focus"))

    # Ctrl+Enter on an untouched response saves nothing and says how many are unjudged
    page.keyboard.press("Control+Enter")
    expect(page.locator(".wb-message")).to_have_text(text("workbench.not_judged_yet", n=RUBRIC_SIZE), timeout=WAIT_MS)
    wait_for_app_run(page)
    assert _labels(world, 0) == {}
    screenshot(page, "annotator-labeling-1440x900-refused")

    # 1 ×15, 0 ×15: each key decides and moves on; every decision is kept as a draft
    for key in ["1"] * 15 + ["0"] * 15:
        page.keyboard.press(key)
    expect(page.locator(".wb-count")).to_have_text(text("workbench.count", judged=RUBRIC_SIZE, total=RUBRIC_SIZE))
    draft = _wait_for_draft(world, 0, RUBRIC_SIZE)
    expected = {f"c{i:02d}": i <= 15 for i in range(1, RUBRIC_SIZE + 1)}
    assert draft["decisions"] == expected
    assert _labels(world, 0) == {}
    screenshot(page, "annotator-labeling-1440x900-judged")

    # a reload loses nothing: the draft is back, marked unsaved
    page.reload()
    wait_for_app_run(page)
    page.locator(".wb-item").first.wait_for()
    expect(page.locator(".wb-unsaved")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator(".wb-count")).to_have_text(text("workbench.count", judged=RUBRIC_SIZE, total=RUBRIC_SIZE))
    expect(page.locator('.wb-item[data-state="met"]')).to_have_count(15)
    expect(page.locator('.wb-item[data-state="not"]')).to_have_count(15)
    screenshot(page, "annotator-labeling-1440x900-reloaded")

    # Ctrl+Enter saves exactly those 30 labels and opens the next response
    page.keyboard.press("Control+Enter")
    expect(page.locator(".wb-message")).to_have_text(
        text("workbench.saved_next", code=world["codes"][0], created=RUBRIC_SIZE, updated=0), timeout=WAIT_MS
    )
    wait_for_app_run(page)
    expect(page.locator(".wb-pane-title")).not_to_have_text(text("workbench.response", code=world["codes"][0]))
    assert _labels(world, 0) == expected
    assert _draft(world, 0) is None
    with session_scope(world["engine"], read_only=True) as s:
        timing = s.exec(select(LabelTiming).where(LabelTiming.response_id == world["ids"][0])).one()
    assert timing.n_criteria == RUBRIC_SIZE and timing.active_ms > 0
    # the next open response comes up with no decision made for the physician
    expect(page.locator('.wb-item[data-state="met"]')).to_have_count(0)
    screenshot(page, "annotator-labeling-1440x900-next")


def test_mark_the_rest_not_met_asks_first_and_notes_are_kept(screen, app_server, world):
    page = screen
    _open_response(page, app_server, world, 1)
    for key in ("1", "1", "j", "1", "k"):
        page.keyboard.press(key)
    page.keyboard.press("e")
    page.keyboard.type("提到了头颅CT")
    page.keyboard.press("Enter")
    page.get_by_role("button", name=text("workbench.mark_rest")).click()
    expect(page.locator(".wb-confirm-text")).to_have_text(text("workbench.confirm_rest", n=RUBRIC_SIZE - 3))
    screenshot(page, "annotator-labeling-1440x900-confirm-rest")
    # nothing changes before the confirmation
    expect(page.locator('.wb-item[data-state="none"]')).to_have_count(RUBRIC_SIZE - 3)
    page.get_by_role("button", name=text("workbench.confirm_yes")).click()
    expect(page.locator('.wb-item[data-state="none"]')).to_have_count(0)
    _wait_for_draft(world, 1, RUBRIC_SIZE)
    page.keyboard.press("Control+Enter")
    expect(page.locator(".wb-message")).to_contain_text(world["codes"][1], timeout=WAIT_MS)
    wait_for_app_run(page)
    labels = _labels(world, 1)
    assert {cid for cid, met in labels.items() if met} == {"c01", "c02", "c04"}
    assert len(labels) == RUBRIC_SIZE
    with session_scope(world["engine"], read_only=True) as s:
        noted = s.exec(select(Label).where(Label.response_id == world["ids"][1], Label.criterion_id == "c04")).one()
    assert noted.note == "提到了头颅CT"


def test_the_workbench_fills_a_1920x1080_screen(browser, app_server, world):
    context = browser.new_context(viewport={"width": 1920, "height": 1080}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        _open_response(page, app_server, world, 0)
        assert _fully_visible(page, ".wb-item") >= 20
        box = page.locator(".wb").bounding_box()
        assert box["y"] + box["height"] <= 1080 and box["height"] > 700
        screenshot(page, "annotator-labeling-1920x1080")
    finally:
        context.close()
