"""The rubric audit page shows a validation run's reasons beside their criteria (docs/REFERENCE.md §4.2), at 1440×900.

A submitted rubric whose criterion texts make the loopback judge server (tools/llm_server.py) find that the
reference answer misses c03 and the generic answer meets c05 is validated with `--rubric submitted` through
the runner; the checker then sees "参考答案未满足此条" under c03 and the generic answer's reason under c05,
no reason under the others, and can cite them in a return comment.
"""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from db.access import users
from db.rubrics.references import set_reference
from db.rules.anchors import GENERIC, REFUSAL, WEAK_TEXTS
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import AssignmentKind, RubricStatus
from db.store.engine import make_engine, session_scope
from db.store.models import Assignment, Criterion, RubricVersion
from judge.validate import ValidateOptions, run_validation
from tests.e2e.conftest import choose_in_picker, login, screenshot, text, wait_for_app_run
from tests.support.factories import make_case
from tools.llm_server import LLMServer, expected_met

pytestmark = pytest.mark.browser

REFERENCE_TEXT = "考虑偏头痛可能性大，但需先排除颅内出血：建议头颅CT，监测血压，必要时腰穿，给予对症止痛。"


def criterion_text(number: int, wanted: tuple[bool, bool, bool]) -> str:
    for variant in range(5000):
        body = f"第{number}条：回答说明头痛的评估要点（表述{variant}）"
        verdicts = tuple(
            expected_met(body, answer) for answer in (REFERENCE_TEXT, WEAK_TEXTS[REFUSAL], WEAK_TEXTS[GENERIC])
        )
        if verdicts == wanted:
            return body
    raise AssertionError("no text found")


@pytest.fixture
def validated_case(app_server, accounts, tmp_path):
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    author, admin = accounts("annotator", 1), accounts("admin")
    with session_scope(engine) as s:
        writer = users.get_user(s, username=author.username)
        case = make_case(
            s,
            f"E2E-RQ{tag}",
            n=RUBRIC_SIZE,
            status=RubricStatus.submitted,
            author=writer,
            clinical_context="患者男，52 岁，突发剧烈头痛 2 小时，伴呕吐。",
            user_request="现在应该怎么办？",
        )
        s.add(Assignment(kind=AssignmentKind.rubric, case_pk=case.id, user_id=writer.id, group_no=1))
        version = s.exec(select(RubricVersion).where(RubricVersion.case_pk == case.id)).one()
        for criterion in s.exec(select(Criterion).where(Criterion.rubric_version_id == version.id)).all():
            number = int(criterion.criterion_id[1:])
            criterion.text = criterion_text(number, (number != 3, False, number == 5))
            s.add(criterion)
        case_pk, case_id = case.id, case.case_id
    with session_scope(engine) as s:
        set_reference(s, users.get_user(s, username=admin.username), case_pk, REFERENCE_TEXT)
    cases = tmp_path / "cases.txt"
    cases.write_text(case_id + "\n", encoding="utf-8")
    with LLMServer() as server:
        options = ValidateOptions(
            base_url=server.url, model="judge-8b", judge="e2e-anchor-judge", rubric="submitted", cases=str(cases)
        )
        # Playwright's own event loop runs in this thread: the run's loop gets a thread of its own.
        with ThreadPoolExecutor(1) as pool:
            summary = pool.submit(run_validation, engine, options).result()
    assert summary["status"] == "finished" and summary["errors"] == 0
    yield {"case_id": case_id}
    engine.dispose()


def test_the_audit_page_shows_both_reasons_at_1440x900(browser, app_server, accounts, validated_case):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN", timezone_id="Asia/Shanghai")
    page = context.new_page()
    try:
        login(page, app_server, accounts("checker", 2))
        page.get_by_role("link", name=text("review.audit.title")).first.click()
        wait_for_app_run(page)
        choose_in_picker(page, text("review.audit.pick"), validated_case["case_id"])
        wait_for_app_run(page)
        missed = page.get_by_text(text("rubric_quality.reason.reference_not_met"), exact=True)
        generic = page.get_by_text(text("rubric_quality.reason.generic_met"), exact=True)
        expect(missed).to_have_count(1)
        expect(generic).to_have_count(1)
        expect(page.get_by_text(text("rubric_quality.reason.refusal_met"), exact=True)).to_have_count(0)
        expect(page.get_by_text(text("rubric_quality.run_line", judge="e2e-anchor-judge", n=2))).to_be_visible()
        # each reason stands in its criterion's row
        row3 = page.locator(".st-key-audit_row_3")
        row5 = page.locator(".st-key-audit_row_5")
        expect(row3.get_by_text(text("rubric_quality.reason.reference_not_met"))).to_be_visible()
        expect(row5.get_by_text(text("rubric_quality.reason.generic_met"))).to_be_visible()
        expect(row3.get_by_text(text("rubric_quality.cite"))).to_be_visible()
        screenshot(page, "checker-rubric-audit-1440x900-quality")
        row3.scroll_into_view_if_needed()
        screenshot(page, "checker-rubric-audit-1440x900-quality-rows", settle=False)
    finally:
        context.close()
