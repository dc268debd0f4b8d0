"""Two tabs of one annotator on the same response, in a real browser at 1440×900: the second tab's save is
refused as "you, in another tab", shows the saved labels with its own differing decisions beside them, and
never overwrites what the first tab saved; a fresh tab does not restore the older draft as if it were newer."""

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
from tests.e2e.conftest import ACTION_TIMEOUT_MS, choose_in_picker, login, open_app, screenshot, text, wait_for_app_run
from tests.support.factories import make_case, make_response

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
#: Tab 1 says met on c01–c15; tab 2 on c01–c10 only: they differ on c11–c15.
TAB_ONE_KEYS = ["1"] * 15 + ["0"] * (RUBRIC_SIZE - 15)
TAB_TWO_KEYS = ["1"] * 10 + ["0"] * (RUBRIC_SIZE - 10)
TAB_ONE = {f"c{i:02d}": i <= 15 for i in range(1, RUBRIC_SIZE + 1)}
TAB_TWO = {f"c{i:02d}": i <= 10 for i in range(1, RUBRIC_SIZE + 1)}


@pytest.fixture
def world(app_server, accounts):
    """One fresh response for a group-1 annotator of the demo."""
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    labeler = accounts("annotator", 1)
    with session_scope(engine) as s:
        user = users.get_user(s, username=labeler.username)
        case = make_case(
            s, f"E2E-TT{tag}", n=RUBRIC_SIZE, status=RubricStatus.approved, user_request="胸闷两天怎么办？"
        )
        response = make_response(s, case, f"hidden-model-{tag}", "建议尽快就医，完善心电图检查。")
        s.add(
            Assignment(kind=AssignmentKind.label, case_pk=case.id, response_id=response.id, user_id=user.id, group_no=1)
        )
        counts.refresh_assignments(s, [response.id])
        world = {"code": response.code, "response_id": response.id, "user_id": user.id}
    yield {"engine": engine, "labeler": labeler, **world}
    engine.dispose()


@pytest.fixture
def tabs(browser):
    """Tabs of one browser (one sign-in), each 1440×900."""
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN", timezone_id="Asia/Shanghai")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    yield context
    context.close()


def _open_response(page, world) -> None:
    page.get_by_role("link", name=text("annotate.labeling.title")).first.click()
    wait_for_app_run(page)
    choose_in_picker(page, text("annotate.labeling.pick"), world["code"])
    wait_for_app_run(page)
    expect(page.get_by_text(text("workbench.response", code=world["code"]))).to_be_visible(timeout=WAIT_MS)
    page.locator(".wb-item").first.wait_for()


def _new_tab(tabs, app_server, world):
    page = tabs.new_page()
    open_app(page, app_server)
    _open_response(page, world)
    return page


def _labels(world) -> dict[str, bool]:
    with session_scope(world["engine"], read_only=True) as s:
        rows = s.exec(select(Label).where(Label.response_id == world["response_id"], Label.group_no == 1)).all()
        return {label.criterion_id: label.met for label in rows}


def _wait_for_draft(world, decisions: dict[str, bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    key = f"label:{world['response_id']}"
    while time.monotonic() < deadline:
        with session_scope(world["engine"], read_only=True) as s:
            draft = s.exec(select(Draft).where(Draft.user_id == world["user_id"], Draft.key == key)).first()
            if draft and draft.payload.get("decisions") == decisions:
                return
        time.sleep(0.2)
    raise AssertionError(f"the draft did not reach the decisions within {timeout_s}s")


def _press(page, keys: list[str]) -> None:
    for key in keys:
        page.keyboard.press(key)
    expect(page.locator(".wb-count")).to_have_text(text("workbench.count", judged=RUBRIC_SIZE, total=RUBRIC_SIZE))


def _expect_comparison(page) -> None:
    """The saved labels are shown (c01–c15 met), and exactly c11–c15 carry the saved value beside the draft's."""
    marked = page.locator(".wb-item.wb-marked")
    expect(marked).to_have_count(5, timeout=WAIT_MS)
    for index in range(5):
        row = marked.nth(index)
        expect(row.locator(".wb-num")).to_have_text(str(11 + index))
        expect(row.locator(".wb-line-label")).to_have_text(
            [text("annotate.labeling.saved_value"), text("annotate.labeling.draft_value")]
        )
        expect(row.locator(".wb-line-value")).to_have_text([text("workbench.met"), text("workbench.not_met")])
    expect(page.locator('.wb-item[data-state="met"]')).to_have_count(15)
    expect(page.locator(".wb-unsaved")).to_be_hidden()


def test_the_second_tabs_refused_save_tells_the_truth_and_keeps_the_first_tabs_labels(tabs, app_server, world):
    first = tabs.new_page()
    login(first, app_server, world["labeler"])
    _open_response(first, world)
    second = _new_tab(tabs, app_server, world)

    # Tab 2 decides first (its decisions become the draft), then tab 1 decides and saves.
    _press(second, TAB_TWO_KEYS)
    _wait_for_draft(world, TAB_TWO)
    first.bring_to_front()
    _press(first, TAB_ONE_KEYS)
    first.keyboard.press("Control+Enter")
    expect(first.locator(".wb-message")).to_have_text(
        text("workbench.saved_next", code=world["code"], created=RUBRIC_SIZE, updated=0), timeout=WAIT_MS
    )
    wait_for_app_run(first)
    assert _labels(world) == TAB_ONE

    # Tab 2's Ctrl+Enter is refused: it was the same annotator, in another tab; the saved labels come up.
    second.bring_to_front()
    second.keyboard.press("Control+Enter")
    refusal = f"{text('annotate.labeling.conflict_you')} {text('annotate.labeling.compare', n=5)}"
    expect(second.locator(".wb-message")).to_have_text(refusal, timeout=WAIT_MS)
    wait_for_app_run(second)
    assert text("annotate.labeling.conflict_member") not in second.locator(".wb-message").inner_text()
    _expect_comparison(second)
    # the first criterion to decide again has the focus
    expect(second.locator(".wb-item.wb-marked").first).to_have_class(re.compile(r"\bwb-focus\b"))
    screenshot(second, "annotator-two-tabs-1440x900-refused")
    assert _labels(world) == TAB_ONE

    # A fresh tab on the finished response: the older draft is not "restored"; the same comparison shows.
    third = _new_tab(tabs, app_server, world)
    message = third.locator(".wb-message")
    expect(message).not_to_contain_text(text("workbench.draft_restored", when="").split("（")[0], timeout=WAIT_MS)
    expect(message).to_contain_text(text("annotate.labeling.draft_older_you", when="\x00", n=5).split("\x00")[1])
    _expect_comparison(third)
    screenshot(third, "annotator-two-tabs-1440x900-fresh-tab")

    # One more Ctrl+Enter in tab 2, nothing re-decided: the saved labels stay exactly as tab 1 saved them.
    second.bring_to_front()
    second.keyboard.press("Control+Enter")
    # (the save changed nothing; the page then opens the next open response, or says none is left)
    done = (text("workbench.unchanged", code=world["code"]), text("annotate.labeling.all_done"))
    expect(second.locator(".wb-message")).to_have_text(re.compile("|".join(map(re.escape, done))), timeout=WAIT_MS)
    wait_for_app_run(second)
    assert _labels(world) == TAB_ONE


def test_labels_made_final_by_the_rounds_feedback_show_read_only(tabs, app_server, world, accounts):
    """The round of the response is labeled and its feedback opened, then closed: the labels stay final."""
    from db.labeling import drafts as label_drafts
    from db.store.models import User
    from db.work import feedback

    with session_scope(world["engine"]) as s:
        user = s.get(User, world["user_id"])
        bench = label_drafts.open_response(s, user, world["response_id"])
        label_drafts.save(
            s,
            user,
            world["response_id"],
            rubric_version_id=bench.view.rubric_version_id,
            decisions=TAB_ONE,
            expected_versions=bench.view.expected_versions,
        )
    with session_scope(world["engine"]) as s:
        admin = users.get_user(s, username=accounts("admin").username)
        (round_at,) = s.exec(select(Assignment.created_at).where(Assignment.response_id == world["response_id"]))
        feedback.set_feedback_open(s, actor=admin, round_at=round_at, is_open=True)
        feedback.set_feedback_open(s, actor=admin, round_at=round_at, is_open=False)

    page = tabs.new_page()
    login(page, app_server, world["labeler"])
    _open_response(page, world)
    expect(page.get_by_text(text("annotate.labeling.final"))).to_be_visible(timeout=WAIT_MS)
    expect(page.locator(".wb-save")).to_be_hidden()
    expect(page.locator(".wb-rest")).to_be_hidden()
    expect(page.locator('.wb-item[data-state="met"]')).to_have_count(15)
    # keys decide nothing and Ctrl+Enter saves nothing
    for key in ("0", "0", "1", "Control+Enter"):
        page.keyboard.press(key)
    wait_for_app_run(page)
    expect(page.locator('.wb-item[data-state="met"]')).to_have_count(15)
    screenshot(page, "annotator-final-labels-1440x900")
    assert _labels(world) == TAB_ONE
    with session_scope(world["engine"], read_only=True) as s:
        key = f"label:{world['response_id']}"
        assert s.exec(select(Draft).where(Draft.user_id == world["user_id"], Draft.key == key)).first() is None
