"""The annotator's day in a real browser: write a 30-criterion rubric (seeing the lint), submit it;
then, as an annotator of the other group, label a response with the checklist and find the labels
kept after a reload."""

from __future__ import annotations

import re
import secrets

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from db import counts
from db.access import users
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import AssignmentKind, RubricStatus
from db.store.engine import make_engine, session_scope
from db.store.models import Assignment, Label, RubricVersion
from tests.e2e.conftest import choose_in_picker, login, screenshot, text, wait_for_app_run
from tests.e2e.grid_helpers import row_height_of, type_into_row
from tests.support.factories import make_case, make_response

pytestmark = pytest.mark.browser

#: Edits queue reruns of the page; give them time to land before checking what it shows.
WAIT_MS = 30_000


CRITERIA = [
    "询问头痛的起病方式是否为突发的剧烈头痛",
    "指出伴有恶心呕吐时需排除颅内压增高",
    "建议测量血压并记录每日早晚的读数",
    "提示出现意识障碍时应立即拨打急救电话",
    "建议患者适当休息两周后复查",
    "推荐完善头颅 CT 平扫以排除出血",
    "说明出现脑膜刺激征时行腰椎穿刺检查",
    "询问既往是否有偏头痛发作史",
    "询问近期有无头部外伤经历",
    "提醒记录头痛发作的时间与持续时长",
    "说明布洛芬每日最大剂量不超过 1200 毫克",
    "提醒避免长期自行服用含咖啡因的止痛药",
    "指出发热伴颈项强直提示脑膜炎可能",
    "建议眼科检查视乳头是否水肿",
    "询问是否正在服用口服避孕药",
    "提示视物模糊或复视时尽快就诊",
    "建议头痛日记中记录诱发因素",
    "说明紧张型头痛与偏头痛的主要区别",
    "指出五十岁后新发头痛需警惕颞动脉炎",
    "建议查血沉与 C 反应蛋白",
    "提醒保证规律睡眠并避免熬夜",
    "说明咖啡因戒断也可引起头痛",
    "建议两周内神经内科门诊随访",
    "提示一侧肢体无力时按卒中处理",
    "询问是否伴有畏光畏声症状",
    "说明妊娠期用药需咨询产科医生",
    "提醒避免驾车直至头晕症状消失",
    "指出高血压急症的血压阈值为 180/120",
    "建议复查时携带既往影像资料",
    "说明头痛加重且夜间痛醒需提前复诊",
]


@pytest.fixture
def world(app_server, accounts):
    """A fresh case to author (group 1) and a fresh response to label (group 2)."""
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    author, labeler = accounts("annotator", 1), accounts("annotator", 2)
    with session_scope(engine) as s:
        writer = users.get_user(s, username=author.username)
        grader = users.get_user(s, username=labeler.username)
        to_write = make_case(
            s, f"E2E-W{tag}", n=0, clinical_context="患者女，45 岁，头痛三天，伴恶心。", user_request="需要做哪些检查？"
        )
        s.add(Assignment(kind=AssignmentKind.rubric, case_pk=to_write.id, user_id=writer.id, group_no=1))
        to_label = make_case(s, f"E2E-L{tag}", n=RUBRIC_SIZE, status=RubricStatus.approved)
        response = make_response(s, to_label, f"hidden-model-{tag}", "建议尽快完善头颅 CT 检查，并监测血压。")
        s.add(
            Assignment(
                kind=AssignmentKind.label, case_pk=to_label.id, response_id=response.id, user_id=grader.id, group_no=2
            )
        )
        counts.refresh_assignments(s, [response.id])
        ids = {
            "write_pk": to_write.id,
            "write_id": to_write.case_id,
            "label_id": to_label.case_id,
            "response_id": response.id,
            "code": response.code,
            "model": response.model,
        }
    yield {"engine": engine, "author": author, "labeler": labeler, **ids}
    engine.dispose()


def _open(page, title_key: str) -> None:
    page.get_by_role("link", name=text(title_key)).first.click()
    wait_for_app_run(page)


def _pick(page, label_key: str, pattern: str) -> None:
    page.get_by_role("combobox", name=text(label_key)).click()
    page.keyboard.type(pattern)  # the list is long; typing filters it
    page.get_by_role("option", name=re.compile(re.escape(pattern))).first.click()
    wait_for_app_run(page)


def test_author_a_rubric_then_label_a_response(page, context, browser, app_server, world):
    engine = world["engine"]
    # --- rubric authoring, group 1 ----------------------------------------------------------
    login(page, app_server, world["author"])
    _open(page, "annotate.authoring.title")
    _pick(page, "annotate.authoring.pick_case", world["write_id"])
    expect(page.get_by_text(world["write_id"]).first).to_be_visible(timeout=WAIT_MS)
    grid = page.get_by_test_id("stDataFrame").first
    grid.scroll_into_view_if_needed()
    screenshot(page, "annotator-authoring-empty")

    texts = CRITERIA
    wait_for_app_run(page)
    for row, body in enumerate(texts):
        type_into_row(page, grid, body, x_offset=56 + 150, row=row, row_height=row_height_of(grid))
    screenshot(page, "annotator-authoring-filled")
    # the lint warns about the vague wording and nothing blocks submission
    from db.rules.lint import lint_rubric

    warnings = len(lint_rubric(texts).warnings)  # the vague 适当 and the compounds joined by 与
    assert warnings >= 2
    expect(page.get_by_text(text("annotate.authoring.lint_summary", errors=0, warnings=warnings))).to_be_visible(
        timeout=WAIT_MS
    )
    page.get_by_text(text("annotate.authoring.lint_details")).click()
    # The warning is listed under the details (the grid's own lint column says it too, on its canvas).
    vague = page.locator("span").filter(has_text=text("annotate.lint.vague", words="适当")).first
    expect(vague).to_be_visible(timeout=WAIT_MS)
    screenshot(page, "annotator-authoring-lint")
    page.get_by_role("button", name=text("annotate.authoring.submit")).click()
    wait_for_app_run(page)
    expect(page.get_by_text(text("annotate.authoring.submitted", version=1)).first).to_be_visible(timeout=WAIT_MS)
    screenshot(page, "annotator-authoring-submitted")
    with session_scope(engine, read_only=True) as s:
        version = s.exec(select(RubricVersion).where(RubricVersion.case_pk == world["write_pk"])).one()
        assert version.status == RubricStatus.submitted
        from db.rubrics.authoring import criteria_of

        assert [c.text for c in criteria_of(s, version.id)] == texts

    # --- hit labeling, group 2 ----------------------------------------------------------------
    other = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="zh-CN")
    other.set_default_timeout(30_000)
    labeling_page = other.new_page()
    try:
        login(labeling_page, app_server, world["labeler"])
        _open(labeling_page, "annotate.labeling.title")
        choose_in_picker(labeling_page, text("annotate.labeling.pick"), world["code"])
        expect(labeling_page.get_by_text(text("workbench.response", code=world["code"]))).to_be_visible(timeout=WAIT_MS)
        expect(labeling_page.get_by_text(world["model"])).to_have_count(0)
        # one key per decision: c01 met (with a note), c02 not met, c03 met, the rest not met (confirmed)
        labeling_page.locator(".wb-item").first.wait_for()
        labeling_page.keyboard.press("e")
        labeling_page.keyboard.type("提到了头颅CT")
        labeling_page.keyboard.press("Enter")
        for key in ("1", "0", "1"):
            labeling_page.keyboard.press(key)
        labeling_page.get_by_role("button", name=text("workbench.mark_rest")).click()
        labeling_page.get_by_role("button", name=text("workbench.confirm_yes")).click()
        screenshot(labeling_page, "annotator-labeling-ticked")
        labeling_page.keyboard.press("Control+Enter")
        expect(labeling_page.locator(".wb-message")).to_have_text(
            text("workbench.saved_next", code=world["code"], created=RUBRIC_SIZE, updated=0), timeout=WAIT_MS
        )
        wait_for_app_run(labeling_page)
        screenshot(labeling_page, "annotator-labeling-saved")

        # reload the page on the labeled response: the labels are there
        url = re.sub(r"([?&]r=)[^&]*", rf"\g<1>{world['code']}", labeling_page.url)
        labeling_page.goto(url)
        wait_for_app_run(labeling_page)
        expect(labeling_page.get_by_text(text("workbench.response", code=world["code"]))).to_be_visible(timeout=WAIT_MS)
        expect(labeling_page.locator('.wb-item[data-state="met"]')).to_have_count(2, timeout=WAIT_MS)
        expect(labeling_page.locator(".wb-unsaved")).to_be_hidden()
        screenshot(labeling_page, "annotator-labeling-reloaded")
    finally:
        other.close()
    with session_scope(engine, read_only=True) as s:
        labels = {
            label.criterion_id: label
            for label in s.exec(select(Label).where(Label.response_id == world["response_id"])).all()
        }
    assert len(labels) == RUBRIC_SIZE
    assert {cid for cid, label in labels.items() if label.met} == {"c01", "c03"}
    assert labels["c01"].note == "提到了头颅CT" and all(label.group_no == 2 for label in labels.values())
