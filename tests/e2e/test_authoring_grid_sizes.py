"""The authoring grid at 1440×900 and 1024×768, as a physician writing long criteria sees it: every
criterion and returned comment readable whole in its wrapped cell, the tags without sideways scrolling
at 1440 px, the lint column reached at 1024 px, headers on one line. Read from the grid's accessible
table (the canvas draws the same cells) once it holds the criteria."""

from __future__ import annotations

import secrets

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from annotate.authoring import ID_WIDTH, LINT_WIDTH, ORDER_WIDTH, REVIEW_WIDTH, TAGS_WIDTH, TEXT_WIDTH_BESIDE_REVIEW
from db import review, rubrics
from db.access import users
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import AssignmentKind
from db.store.engine import make_engine, session_scope
from db.store.models import Assignment, Criterion, RubricVersion
from tests.e2e.conftest import ACTION_TIMEOUT_MS, choose_in_picker, login, screenshot, text, wait_for_app_run
from ui.widgets import CASE_META_FIELDS

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
LONG = "说明若头痛在用力、咳嗽或体位改变时明显加重并伴有视物模糊，应尽快到神经内科门诊完善检查"
TAGS = ["missing_emergency_trigger", "follow_up_incompleteness"]
COMMENT = "请写明需排除的具体疾病以及检查的时间要求"


def _criteria() -> list[str]:
    return [
        f"{LONG}（第{i}条）" if i % 3 == 0 else f"询问第{i}项既往病史与用药情况并记录具体剂量" for i in range(1, 31)
    ]


@pytest.fixture
def long_rubric(app_server, accounts):
    """A case whose 30 criteria (every third one 50 characters long, two tags each) a checker returned with comments."""
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    author, checker = accounts("annotator", 1), accounts("checker", 1)
    from tests.support.factories import make_case

    with session_scope(engine) as s:
        writer = users.get_user(s, username=author.username)
        case = make_case(s, f"E2E-GRID{tag}", n=0, clinical_context="患者男，52 岁，反复头痛一月。")
        s.add(Assignment(kind=AssignmentKind.rubric, case_pk=case.id, user_id=writer.id, group_no=1))
        case_pk, case_id = case.id, case.case_id
    ids = rubrics.default_criterion_ids(RUBRIC_SIZE)
    with session_scope(engine) as s:
        writer = users.get_user(s, username=author.username)
        draft = rubrics.save_rubric_draft(
            s,
            writer,
            case_pk,
            [rubrics.CriterionInput(cid, body, tuple(TAGS)) for cid, body in zip(ids, _criteria(), strict=True)],
            base_version_id=None,
            expected_lock=None,
        )
        rubrics.submit_rubric(s, writer, draft.id, expected_lock=draft.lock_version)
    with session_scope(engine) as s:
        auditor = users.get_user(s, username=checker.username)
        version = s.exec(select(RubricVersion).where(RubricVersion.case_pk == case_pk)).one()
        commented = s.exec(
            select(Criterion.id).where(
                Criterion.rubric_version_id == version.id, Criterion.criterion_id.in_(["c03", "c06"])
            )
        ).all()
        review.return_rubric(
            s,
            auditor,
            version.id,
            seen_lock_version=version.lock_version,
            criterion_comments=dict.fromkeys(commented, COMMENT),
        )
    yield {"case_id": case_id, "author": author}
    engine.dispose()


@pytest.mark.parametrize("size", [(1440, 900), (1024, 768)], ids=["1440x900", "1024x768"])
def test_authoring_grid_reads_whole_at_two_sizes(browser, app_server, long_rubric, size):
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        login(page, app_server, long_rubric["author"])
        page.get_by_role("link", name=text("annotate.authoring.title")).first.click()
        wait_for_app_run(page)
        choose_in_picker(page, text("annotate.authoring.pick_case"), long_rubric["case_id"])
        grid = page.get_by_test_id("stDataFrame").first
        expect(grid).to_be_visible(timeout=WAIT_MS)
        page.wait_for_function(
            "text => Array.from(document.querySelectorAll('[data-testid=stDataFrame] td'), e => e.textContent)"
            ".some(t => t.includes(text))",
            arg=LONG,
            timeout=WAIT_MS,
        )
        page.wait_for_timeout(500)  # the canvas draws what the accessible table holds
        screenshot(page, f"annotator-authoring-grid-{width}x{height}")
        scroller = page.evaluate(
            """() => {
              const s = document.querySelector('[data-testid=stDataFrame] .dvn-scroller');
              return {content: s.scrollWidth, shown: s.clientWidth};
            }"""
        )
        reviewed_row = ORDER_WIDTH + ID_WIDTH + TEXT_WIDTH_BESIDE_REVIEW + REVIEW_WIDTH  # where the lint column starts
        if width >= 1440:
            # every column, tags included, in view: no sideways scrolling
            assert scroller["content"] <= scroller["shown"] + 1, scroller
        else:
            # the lint column whole in view beside the text and the comment; the tags are a scroll away
            assert reviewed_row + LINT_WIDTH <= scroller["shown"], scroller
            assert scroller["content"] == reviewed_row + LINT_WIDTH + TAGS_WIDTH, scroller
        # the case card's field names on one line each (not "难/度")
        card = page.locator(".st-key-case_pane_sticky")
        for field in CASE_META_FIELDS:
            label = card.get_by_text(text(f"widgets.case.{field}"), exact=True).first
            box = label.bounding_box()
            assert box is not None and box["height"] < 30, (field, box)
    finally:
        context.close()
