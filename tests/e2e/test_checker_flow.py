"""The checker's day in a real browser: audit a rubric (return, then approve), check labels, adjudicate.

The author's and the annotators' part is done through the data layer they use (db.rubrics.authoring,
db.labeling.annotation), so this test covers the checker's pages; the gold label is read back with db.rules.gold.
"""

from __future__ import annotations

import re
import secrets
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
from playwright.sync_api import expect
from sqlmodel import select

from db import counts, labeling, labels as label_room, review, rubrics
from db.access import independence, users
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import AssignmentKind, RubricStatus, Stage
from db.rules.gold import LABEL_COLUMNS, gold_labels
from db.store.engine import make_engine, session_scope
from db.store.models import Assignment, Label, RubricVersion
from tests.e2e.conftest import choose_in_picker, login, screenshot, text, wait_for_app_run
from tests.support.factories import make_case, make_response
from tests.support.page_save import as_sent
from ui.times import zone_label

pytestmark = pytest.mark.browser

DISPUTED = ("c01", "c02")
#: A busy machine can take a while to rerun a page; wait up to this long for what a step shows.
WAIT_MS = 30_000


def _criteria(case_id: str, fixed: bool = False) -> list[rubrics.CriterionInput]:
    ids = rubrics.default_criterion_ids(RUBRIC_SIZE)
    texts = [f"{case_id}：回答第 {i} 项要点是否说明清楚" for i in range(1, RUBRIC_SIZE + 1)]
    texts[0] = "回答明确建议在出现胸痛加重时立即就医" if fixed else "回答提到就医"
    return [rubrics.CriterionInput(cid, body) for cid, body in zip(ids, texts)]


@pytest.fixture
def world(app_server, accounts):
    """A fresh case whose rubric an annotator of group 1 wrote and submitted."""
    engine = make_engine(app_server.database_url)
    case_id = f"E2E-{secrets.token_hex(3).upper()}"
    author = accounts("annotator", 1)
    with session_scope(engine) as s:
        admin = users.get_user(s, username=accounts("admin").username)
        case = make_case(
            s,
            case_id,
            n=0,
            clinical_context="患者男，58 岁，反复胸闷一周。<b>不应加粗</b>",
            user_request="需要马上去医院吗？",
        )
        s.add(
            Assignment(
                kind=AssignmentKind.rubric,
                case_pk=case.id,
                user_id=users.get_user(s, username=author.username).id,
                group_no=1,
                created_by=admin.id,
            )
        )
        case_pk = case.id
    with session_scope(engine) as s:
        writer = users.get_user(s, username=author.username)
        draft = rubrics.save_rubric_draft(
            s, writer, case_pk, _criteria(case_id), base_version_id=None, expected_lock=None
        )
        rubrics.submit_rubric(s, writer, draft.id, expected_lock=draft.lock_version)
    yield {"engine": engine, "case_id": case_id, "case_pk": case_pk, "author": author.username}
    engine.dispose()


def _open(page, title_key: str) -> None:
    page.get_by_role("link", name=text(title_key)).first.click()
    wait_for_app_run(page)
    expect(page.get_by_role("heading", name=text(title_key))).to_be_visible(timeout=WAIT_MS)
    wait_for_app_run(page)  # the heading comes early in the page's run


def _open_workbench(page, title_key: str, picker_key: str) -> None:
    """Opens a checker workbench page from the navigation; it is ready when its picker is."""
    page.get_by_role("link", name=text(title_key)).first.click()
    wait_for_app_run(page)
    expect(page.get_by_role("combobox", name=text(picker_key))).to_be_visible(timeout=WAIT_MS)


def _confirm(page) -> None:
    """Answers the rubric audit's question with its confirm button."""
    confirm = page.get_by_role("button", name=text("review.audit.confirm"))
    expect(confirm).to_be_in_viewport(timeout=WAIT_MS)
    confirm.click()
    wait_for_app_run(page)


def _pick(page, label_key: str, pattern: str) -> None:
    """Picks the option with `pattern`; done once the picker shows it and the run it started has finished."""
    choose_in_picker(page, text(label_key), pattern)
    expect(page.get_by_role("combobox", name=text(label_key))).to_have_value(
        re.compile(re.escape(pattern)), timeout=WAIT_MS
    )
    wait_for_app_run(page)


def _rubric(engine, case_pk) -> RubricVersion:
    with session_scope(engine, read_only=True) as s:
        return s.exec(
            select(RubricVersion).where(RubricVersion.case_pk == case_pk).order_by(RubricVersion.version.desc())
        ).first()


def _label_both_groups(engine, case_pk, annotator1: str, annotator2: str) -> int:
    """One response, labeled by an annotator of each group; they differ on DISPUTED."""
    with session_scope(engine) as s:
        from db.store.models import Case

        response = make_response(
            s, s.get(Case, case_pk), f"e2e-model-{secrets.token_hex(2)}", "建议您尽快到心内科就诊。"
        )
        for name, group in ((annotator1, 1), (annotator2, 2)):
            s.add(
                Assignment(
                    kind=AssignmentKind.label,
                    case_pk=case_pk,
                    response_id=response.id,
                    user_id=users.get_user(s, username=name).id,
                    group_no=group,
                )
            )
        counts.refresh_assignments(s, [response.id])
        response_id = response.id
    for name, group in ((annotator1, 1), (annotator2, 2)):
        with session_scope(engine) as s:
            person = users.get_user(s, username=name)
            view = labeling.response_for_labeling(s, person, response_id)
            decisions = [
                labeling.LabelInput(
                    c.criterion_id,
                    met=(group == 1) or c.criterion_id not in DISPUTED,
                    note=f"第{group}组：理由" if c.criterion_id in DISPUTED else None,
                )
                for c in view.criteria
            ]
            label_room.save(
                s,
                person,
                "annotation",
                response_id,
                **as_sent(decisions),
                rubric_version_id=view.rubric_version_id,
                expected_versions=view.expected_versions,
            )
    return response_id


def test_checker_returns_approves_checks_and_adjudicates(page, app_server, accounts, world):
    engine, case_id, case_pk = world["engine"], world["case_id"], world["case_pk"]
    checker1, checker2 = accounts("checker", 1), accounts("checker", 2)

    # 1. The checker returns the rubric with a comment on its first criterion.
    login(page, app_server, checker1)
    _open(page, "review.audit.title")
    expect(page.get_by_text(text("sidebar.unresolved"))).to_be_visible(timeout=WAIT_MS)
    _pick(page, "review.audit.pick", case_id)
    rubric = _rubric(engine, case_pk)
    with session_scope(engine, read_only=True) as s:
        first_criterion = rubrics.criteria_of(s, rubric.id)[0]
        from db.store.models import Criterion

        first_pk = s.exec(
            select(Criterion.id).where(
                Criterion.rubric_version_id == rubric.id, Criterion.criterion_id == first_criterion.criterion_id
            )
        ).one()
    # Widget keys carry no database id (a per-session random name): the first comment field by position.
    assert first_pk  # the criterion exists; its id is not in the page
    comment = "太笼统：请写明何种情况需要立即就医"
    field = page.locator('[class*="st-key-review_audit_c_"] input').first
    field.fill(comment)
    field.press("Tab")
    wait_for_app_run(page)
    expect(field).to_have_value(comment)  # no rerun drew the field again in between
    screenshot(page, "checker-rubric-audit")
    page.get_by_role("button", name=text("review.audit.return")).click()
    wait_for_app_run(page)
    # a click asks first, like Ctrl+Enter; nothing is decided yet
    assert _rubric(engine, case_pk).status == RubricStatus.submitted
    _confirm(page)
    expect(page.get_by_text(text("review.audit.returned", case=case_id)).first).to_be_visible(timeout=WAIT_MS)
    returned = _rubric(engine, case_pk)
    assert returned.status == RubricStatus.returned

    # 2. The author reads the comment, fixes the criterion and resubmits (their own page's data layer).
    with session_scope(engine) as s:
        writer = users.get_user(s, username=world["author"])
        view = rubrics.authoring_view(s, writer, case_pk)
        assert view.returned is not None and view.returned.criteria[0].review_comment.startswith("太笼统")
        draft = rubrics.save_rubric_draft(
            s,
            writer,
            case_pk,
            _criteria(case_id, fixed=True),
            base_version_id=view.latest.id,
            expected_lock=view.latest.lock_version,
        )
        rubrics.submit_rubric(s, writer, draft.id, expected_lock=draft.lock_version)

    # 3. The checker approves the resubmitted version.
    page.reload()
    wait_for_app_run(page)
    _pick(page, "review.audit.pick", case_id)
    expect(page.get_by_text("回答明确建议在出现胸痛加重时立即就医")).to_be_visible(timeout=WAIT_MS)
    # The checker sees what they asked for last time next to the fixed criterion.
    expect(page.get_by_text(re.compile("太笼统：请写明何种情况需要立即就医"))).to_be_visible(timeout=WAIT_MS)
    screenshot(page, "checker-rubric-resubmitted")
    page.get_by_role("button", name=text("review.audit.approve")).click()
    wait_for_app_run(page)
    _confirm(page)
    expect(page.get_by_text(text("review.audit.approved", case=case_id)).first).to_be_visible(timeout=WAIT_MS)
    approved = _rubric(engine, case_pk)
    assert approved.status == RubricStatus.approved and approved.version == returned.version + 1

    # 4. The two groups label one response differently.
    response_id = _label_both_groups(
        engine, case_pk, accounts("annotator", 1).username, accounts("annotator", 2).username
    )

    # 5. Checker of group 1 looks at group 1's work on it (the label check workbench).
    _open_workbench(page, "review.check.title", "review.check.annotator")
    choose_in_picker(page, text("review.check.annotator"), accounts("annotator", 1).display_name)
    with session_scope(engine, read_only=True) as s:
        from db.store.models import Response

        code = s.get(Response, response_id).code
    choose_in_picker(page, text("review.check.pick"), code)
    expect(page.locator(".wb-pane-title")).to_have_text(text("workbench.response", code=code), timeout=WAIT_MS)
    expect(page.locator(".wb-item").first).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_text("第1组：理由").first).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_text("第2组：理由")).to_have_count(0, timeout=WAIT_MS)  # the other group's notes stay hidden
    screenshot(page, "checker-label-check")

    # 6. Group 2's check is done (by its checker, through the data layer); then that checker, who
    #    annotated nothing here, adjudicates both disputed criteria with keys only.
    with session_scope(engine) as s:
        group2_checker = users.get_user(s, username=checker2.username)
        rows = review.check_view(s, group2_checker, response_id).rows
        review.save_checks(
            s,
            group2_checker,
            response_id=response_id,
            decisions=[review.CheckInput(row.criterion_id, row.annotation.met) for row in rows],
        )
    with session_scope(engine) as s:  # and takes it into adjudication: only then does its disagreement show
        independence.open_adjudication(s, users.get_user(s, username=checker2.username), response_id)
    page.get_by_role("button", name=text("logout")).click()
    wait_for_app_run(page)
    login(page, app_server, checker2)
    _open_workbench(page, "review.adjudication.title", "review.adjudication.pick")
    choose_in_picker(page, text("review.adjudication.pick"), code)
    expect(page.locator(".wb-pane-title")).to_have_text(text("workbench.response", code=code), timeout=WAIT_MS)
    expect(page.locator(".wb-item")).to_have_count(len(DISPUTED), timeout=WAIT_MS)
    # The case text is set as typed, never as HTML (it waits behind the context key).
    assert "<b>不应加粗</b>" in page.locator(".wb-context-text").text_content()
    # The first disputed cell has focus: its rationale (E), met (1); the second: its rationale, not met (0).
    for cid, key in zip(DISPUTED, ("1", "0")):
        page.keyboard.press("e")
        page.keyboard.type(f"仲裁：{cid} 依据回答原文")
        page.keyboard.press("Enter")
        page.keyboard.press(key)
    screenshot(page, "checker-adjudication")
    page.keyboard.press("Control+Enter")
    expect(page.locator(".wb-message")).to_have_text(text("review.adjudication.saved", n=2, code=code), timeout=WAIT_MS)
    wait_for_app_run(page)
    screenshot(page, "checker-adjudication-saved")

    # 7. The decisions are gold, with source "adjudicated".
    with session_scope(engine, read_only=True) as s:
        rows = s.exec(
            select(Label.response_id, Label.criterion_id, Label.stage, Label.group_no, Label.met).where(
                Label.response_id == response_id
            )
        ).all()
        decisions = s.exec(
            select(Label).where(Label.response_id == response_id, Label.stage == Stage.adjudication)
        ).all()
    gold = gold_labels(pd.DataFrame(rows, columns=LABEL_COLUMNS)).set_index("criterion_id")
    assert len(gold) == RUBRIC_SIZE
    assert gold.loc[list(DISPUTED), "source"].tolist() == ["adjudicated", "adjudicated"]
    assert gold.loc[list(DISPUTED), "met"].tolist() == [True, False]
    assert (gold.drop(index=list(DISPUTED))["source"] == "agreement").all()
    assert sorted((d.criterion_id, d.note) for d in decisions) == [
        (cid, f"仲裁：{cid} 依据回答原文") for cid in DISPUTED
    ]


def test_admin_audit_log_page(page, app_server, accounts):
    login(page, app_server, accounts("admin"))
    _open(page, "review.audit_log.title")
    page.get_by_role("button", name=text("review.audit_log.verify")).click()
    wait_for_app_run(page)
    expect(page.get_by_text(re.compile(text("review.audit_log.verified", n="").split("：")[0]))).to_be_visible(
        timeout=WAIT_MS
    )
    expect(page.get_by_test_id("stDataFrame").first).to_be_visible(timeout=WAIT_MS)
    shanghai = zone_label(ZoneInfo("Asia/Shanghai"), text)  # the zone named as a reader would, with its offset
    expect(page.get_by_text(text("review.audit_log.dates", zone=shanghai))).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_role("button", name=text("review.audit_log.download"))).to_be_visible(timeout=WAIT_MS)
    page.wait_for_timeout(1500)  # the table draws on a canvas after it is attached
    screenshot(page, "admin-audit-log")
    # Filter to the checkers' work only.
    page.get_by_role("combobox", name=text("review.audit_log.entity")).click()
    # the list of entities is longer than the open picker shows: type to bring the option into view
    page.keyboard.type(text("workbench.audit_entity.rubric"))
    page.get_by_role("option", name=text("workbench.audit_entity.rubric"), exact=True).click()
    page.keyboard.press("Escape")
    wait_for_app_run(page)
    expect(page.get_by_test_id("stDataFrame").first).to_be_visible(timeout=WAIT_MS)
    page.wait_for_timeout(1500)
    screenshot(page, "admin-audit-log-filtered")
