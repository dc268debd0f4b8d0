"""A checker works through five responses of the check queue from the keyboard alone, at 1440×900 and then at
1024×768: Ctrl+Enter saves and opens the next response, the first save confirms or corrects every criterion,
K goes back and a save with nothing changed says so and moves on, J skips ahead."""

from __future__ import annotations

import secrets

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from db.access import users
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import RubricStatus, Stage
from db.store.engine import make_engine, session_scope
from db.store.models import Label, Response
from tests.e2e.conftest import ACTION_TIMEOUT_MS, login, screenshot, text, wait_for_app_run
from tests.support.factories import make_case, make_label, make_response

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
FIVE = 5


@pytest.fixture
def five_to_check(app_server, accounts):
    """Five fresh responses of the first group-1 annotator, first in their check queue (their case ids sort
    before the demo's), each with every criterion met but c02."""
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    with session_scope(engine) as s:
        annotator = sorted(
            (
                u
                for u in users.list_users(s, actor=users.SYSTEM_ACTOR)
                if u.role == "annotator" and u.group_no == 1 and u.is_active
            ),
            key=lambda u: u.username,
        )[0]
        codes, ids = [], []
        for n in range(1, FIVE + 1):
            case = make_case(s, f"A0-{tag}-{n}", n=RUBRIC_SIZE, status=RubricStatus.approved)
            response = make_response(s, case, f"hidden-model-{tag}", f"第{n}个回答：建议完善血常规检查，必要时复诊。")
            for i in range(1, RUBRIC_SIZE + 1):
                make_label(s, response, f"c{i:02d}", i != 2, annotator)
            codes.append(response.code)
            ids.append(response.id)
    yield {"engine": engine, "codes": codes, "ids": ids}
    engine.dispose()


def _checks(engine, response_ids: list[int]) -> dict[str, dict[str, tuple[bool, str | None]]]:
    with session_scope(engine, read_only=True) as s:
        rows = s.exec(
            select(Response.code, Label.criterion_id, Label.met, Label.note)
            .join(Response, Response.id == Label.response_id)
            .where(Label.stage == Stage.check, Label.response_id.in_(response_ids))  # type: ignore[union-attr]
        ).all()
    out: dict[str, dict[str, tuple[bool, str | None]]] = {}
    for code, cid, met, note in rows:
        out.setdefault(code, {})[cid] = (met, note)
    return out


def test_a_checker_checks_five_responses_without_the_mouse(browser, app_server, accounts, five_to_check):
    engine, codes = five_to_check["engine"], five_to_check["codes"]
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    title = page.locator(".wb-pane-title")
    message = page.locator(".wb-message")

    def on(code: str) -> None:
        expect(title).to_have_text(text("workbench.response", code=code), timeout=WAIT_MS)
        expect(page.locator(".wb-item")).to_have_count(RUBRIC_SIZE)
        wait_for_app_run(page)

    def saved(n: int, code: str) -> None:
        expect(message).to_have_text(text("review.check.saved", n=n, code=code), timeout=WAIT_MS)

    try:
        login(page, app_server, accounts("checker", 1))
        page.goto(f"{app_server.base_url}/review-labels")
        wait_for_app_run(page)
        on(codes[0])
        # the key help names every key, J/K for responses among them
        expect(page.locator(".wb-legend")).to_have_text(text("workbench.legend_check"))
        screenshot(page, "check-queue-keys-1440x900-first")
        # 1: confirm all 30 as prefilled
        page.keyboard.press("Control+Enter")
        saved(RUBRIC_SIZE, codes[0])
        on(codes[1])
        # 2: correct c02 to met with a note (the focus opens on c01; ↓ to c02, 1 decides and moves to c03)
        page.keyboard.press("ArrowDown")
        page.keyboard.press("1")
        page.keyboard.press("ArrowUp")
        page.keyboard.press("e")
        page.keyboard.type("回答写明了复查")
        page.keyboard.press("Enter")
        wait_for_app_run(page)
        screenshot(page, "check-queue-keys-1440x900-corrected")
        page.keyboard.press("Control+Enter")
        saved(RUBRIC_SIZE, codes[1])
        on(codes[2])
        # K back to the second, saved again with nothing changed: "no changes", and on to the third
        page.keyboard.press("k")
        on(codes[1])
        page.keyboard.press("Control+Enter")
        expect(message).to_have_text(text("review.check.unchanged", code=codes[1]), timeout=WAIT_MS)
        on(codes[2])
        # J skips the third for now; the fourth confirmed
        page.keyboard.press("j")
        on(codes[3])
        page.keyboard.press("Control+Enter")
        saved(RUBRIC_SIZE, codes[3])
        on(codes[4])
        # the narrow screen: the fifth confirmed, then K back to the third, confirmed
        page.set_viewport_size({"width": 1024, "height": 768})
        wait_for_app_run(page)
        screenshot(page, "check-queue-keys-1024x768-fifth")
        save_box = page.locator(".wb-save").bounding_box()
        assert save_box is not None and save_box["y"] + save_box["height"] <= 768, save_box
        page.keyboard.press("Control+Enter")
        saved(RUBRIC_SIZE, codes[4])
        expect(title).not_to_have_text(text("workbench.response", code=codes[4]), timeout=WAIT_MS)
        wait_for_app_run(page)  # on the demo's first response of the queue, after ours
        for back in (4, 3, 2):
            page.keyboard.press("k")
            on(codes[back])
        page.keyboard.press("Control+Enter")
        saved(RUBRIC_SIZE, codes[2])
        on(codes[3])
        screenshot(page, "check-queue-keys-1024x768-done")
    finally:
        context.close()

    checks = _checks(engine, five_to_check["ids"])
    assert sorted(checks) == sorted(codes)
    assert all(len(by_criterion) == RUBRIC_SIZE for by_criterion in checks.values())
    # every confirmation is a check label equal to the annotation; the one correction carries its note
    for code in codes:
        expected_c02 = (True, "回答写明了复查") if code == codes[1] else (False, None)
        assert checks[code]["c02"] == expected_c02, code
        assert all(checks[code][f"c{i:02d}"] == (True, None) for i in range(1, RUBRIC_SIZE + 1) if i != 2)
