"""Authoring and rubric audit at 1440×900: the case beside the criteria, each scrolling on its own;
returned comments beside their criterion; a committed cell reruns only the editor's fragment;
lint findings and changes beside each criterion in the audit; Ctrl+Enter decides after asking.

Which part of the page a run covered is read from the app's own messages: every run ends with a
`script_finished` message saying whether the whole page or a fragment ran."""

from __future__ import annotations

import secrets
import statistics
import time

import pytest
from playwright.sync_api import expect
from sqlmodel import select
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from db import review, rubrics
from db.access import users
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import AssignmentKind, RubricStatus
from db.store.engine import make_engine, session_scope
from db.store.models import Assignment, Criterion, RubricVersion
from tests.e2e.conftest import ACTION_TIMEOUT_MS, choose_in_picker, login, screenshot, text, wait_for_app_run
from tests.e2e.grid_helpers import open_row_editor, row_height_of, type_into_row
from tests.e2e.test_annotator_flow import CRITERIA

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
TEXT_X = 56 + 100  # inside the criterion text column, right of the pinned id column
COMMENT = "请写明需排除的具体疾病"
COMPOUND = "指出伴有恶心呕吐时需排除颅内压增高与颅内出血"  # c02 rewritten: two checks joined by 与
FULL, FRAGMENT = ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY


class RunLog:
    """The end of every script run the page's websocket reports, with when it arrived."""

    def __init__(self, page) -> None:
        self.page = page
        self.finished: list[tuple[float, int]] = []
        self.started: list[float] = []  # every run, whole page or fragment, opens with a new_session message
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        if not isinstance(payload, bytes | bytearray):
            return
        try:
            message = ForwardMsg.FromString(bytes(payload))
        except Exception:
            return
        kind = message.WhichOneof("type")
        if kind == "new_session":
            self.started.append(time.monotonic())
        elif kind == "script_finished":
            self.finished.append((time.monotonic(), message.script_finished))

    def run_seconds(self, finished_at: float) -> float:
        """From the start message of the run that ended at `finished_at` to its end: the server's run time
        (plus sending its elements), without the browser's part."""
        return finished_at - max(at for at in self.started if at <= finished_at)

    def since(self, mark: int) -> list[int]:
        return [status for _, status in self.finished[mark:]]

    def wait_for(self, mark: int, status: int, timeout_s: float = 30.0) -> float:
        """When (time.monotonic) the first run ending with `status` after message `mark` arrived."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for at, seen in self.finished[mark:]:
                if seen == status:
                    return at
            self.page.wait_for_timeout(20)  # lets Playwright deliver the frames that arrived
        raise AssertionError(f"no run ended with {status} after message {mark}: {self.since(mark)}")


@pytest.fixture
def returned_case(app_server, accounts):
    """A case its group-1 author submitted with CRITERIA and a checker returned, commenting on c02."""
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    author, checker = accounts("annotator", 1), accounts("checker", 1)
    from tests.support.factories import make_case

    with session_scope(engine) as s:
        writer = users.get_user(s, username=author.username)
        case = make_case(
            s,
            f"E2E-RA{tag}",
            n=0,
            clinical_context="患者女，45 岁，头痛三天，伴恶心。" + "既往体健，无外伤史。" * 30,
            user_request="需要做哪些检查？",
        )
        s.add(Assignment(kind=AssignmentKind.rubric, case_pk=case.id, user_id=writer.id, group_no=1))
        case_pk, case_id = case.id, case.case_id
    ids = rubrics.default_criterion_ids(RUBRIC_SIZE)
    with session_scope(engine) as s:
        writer = users.get_user(s, username=author.username)
        draft = rubrics.save_rubric_draft(
            s,
            writer,
            case_pk,
            [rubrics.CriterionInput(cid, body) for cid, body in zip(ids, CRITERIA, strict=True)],
            base_version_id=None,
            expected_lock=None,
        )
        rubrics.submit_rubric(s, writer, draft.id, expected_lock=draft.lock_version)
    with session_scope(engine) as s:
        auditor = users.get_user(s, username=checker.username)
        version = s.exec(select(RubricVersion).where(RubricVersion.case_pk == case_pk)).one()
        c02 = s.exec(
            select(Criterion.id).where(Criterion.rubric_version_id == version.id, Criterion.criterion_id == "c02")
        ).one()
        review.return_rubric(
            s, auditor, version.id, seen_lock_version=version.lock_version, criterion_comments={c02: COMMENT}
        )
    yield {"engine": engine, "case_id": case_id, "case_pk": case_pk, "author": author, "checker": checker}
    engine.dispose()


def _context(browser):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN", timezone_id="Asia/Shanghai")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    return context


def _side_by_side(left, right) -> None:
    """`left` ends before `right` starts, and both start on the first screen."""
    a, b = left.bounding_box(), right.bounding_box()
    assert a["x"] + a["width"] <= b["x"], (a, b)
    assert a["y"] < 900 and b["y"] < 900, (a, b)


def test_authoring_then_audit_at_1440x900(browser, app_server, returned_case):
    engine, case_id = returned_case["engine"], returned_case["case_id"]

    # --- the author: case beside the editor, the comment beside its criterion -------------------
    context = _context(browser)
    page = context.new_page()
    runs = RunLog(page)
    try:
        login(page, app_server, returned_case["author"])
        page.get_by_role("link", name=text("annotate.authoring.title")).first.click()
        wait_for_app_run(page)
        choose_in_picker(page, text("annotate.authoring.pick_case"), case_id)
        wait_for_app_run(page)
        grid = page.get_by_test_id("stDataFrame").first
        case_pane = page.locator(".st-key-case_pane_sticky")
        expect(grid).to_be_visible(timeout=WAIT_MS)
        _side_by_side(case_pane, grid)
        # the returned comment is a column of the editor, on the first screen beside the text
        screenshot(page, "annotator-authoring-1440x900-returned")
        # the editor's accessible table: the comment is the cell right after its criterion's text
        page.wait_for_function(
            "text => Array.from(document.querySelectorAll('[data-testid=stDataFrame] td'), e => e.textContent)"
            ".includes(text)",
            arg=CRITERIA[1],
        )
        cells = page.evaluate(
            "() => Array.from(document.querySelectorAll('[data-testid=stDataFrame] td'), e => e.textContent)"
        )
        at = cells.index(CRITERIA[1])
        assert cells[at - 1] == "c02" and cells[at + 1] == COMMENT, cells[: at + 3]
        # and the lint comes next, before the tags (the column a laptop screen cuts off)
        assert cells[at + 2] == text("annotate.lint.ok"), cells[: at + 4]

        # a committed cell reruns the editor's fragment only, never the whole page
        edits, fragment_s, fragment_run_s = [], [], []
        for i, body in enumerate([f"建议测量血压并记录每日早晚的读数（改{n}）" for n in range(4)] + [CRITERIA[2]]):
            cell_editor = open_row_editor(page, grid, body, x_offset=TEXT_X, row=2, row_height=row_height_of(grid))
            mark = len(runs.finished)
            started = time.monotonic()
            cell_editor.press("Enter")  # the commit: from here to the end of the run it starts
            ended = runs.wait_for(mark, FRAGMENT)
            fragment_s.append(ended - started)
            fragment_run_s.append(runs.run_seconds(ended))
            wait_for_app_run(page)
            edits.append(runs.since(mark))
            assert FRAGMENT in edits[-1] and FULL not in edits[-1], (i, edits[-1])
        type_into_row(page, grid, COMPOUND, x_offset=TEXT_X, row=1, row_height=row_height_of(grid))
        expect(page.get_by_text(text("annotate.authoring.unsaved"))).to_be_visible(timeout=WAIT_MS)
        # the case pane stays where it was while the page beside it scrolls
        before = case_pane.bounding_box()["y"]
        page.mouse.move(1000, 880)
        page.mouse.wheel(0, 600)
        page.wait_for_timeout(400)
        scrolled = page.evaluate("() => document.querySelector('[data-testid=stMain]')?.scrollTop || window.scrollY")
        after = case_pane.bounding_box()
        assert after["y"] >= 0 and after["y"] < 900, (before, after, scrolled)
        screenshot(page, "annotator-authoring-1440x900-edited", settle=False)

        # a whole-page run (what every committed cell cost before the fragment), for comparison
        full_s, full_run_s = [], []
        for _ in range(5):
            # R reruns the whole page when no input has the keys (the grid would take it as typing)
            page.keyboard.press("Escape")
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            wait_for_app_run(page)
            mark = len(runs.finished)
            started = time.monotonic()
            page.keyboard.press("r")
            ended = runs.wait_for(mark, FULL)
            full_s.append(ended - started)
            full_run_s.append(runs.run_seconds(ended))
            wait_for_app_run(page)
        ms = lambda values: f"{statistics.median(values) * 1000:.0f} ms"  # noqa: E731
        print(
            f"\nauthoring, median of {len(fragment_s)} cell commits (fragment) vs {len(full_s)} whole-page runs: "
            f"key to run end {ms(fragment_s)} vs {ms(full_s)}; run start to end {ms(fragment_run_s)} vs "
            f"{ms(full_run_s)} (shared machine)"
        )

        page.get_by_role("button", name=text("annotate.authoring.submit")).click()
        wait_for_app_run(page)
        expect(page.get_by_text(text("annotate.authoring.submitted", version=2)).first).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_text(text("annotate.authoring.is_submitted"))).to_be_visible(timeout=WAIT_MS)
    finally:
        context.close()
    with session_scope(engine, read_only=True) as s:
        newest = s.exec(
            select(RubricVersion)
            .where(RubricVersion.case_pk == returned_case["case_pk"])
            .order_by(RubricVersion.version.desc())
        ).first()
        assert newest.status == RubricStatus.submitted and newest.version == 2
        texts = {c.criterion_id: c.text for c in rubrics.criteria_of(s, newest.id)}
    assert texts["c02"] == COMPOUND and texts["c03"] == CRITERIA[2]

    # --- the checker: case beside the criteria, lint and changes beside each, keys to decide -----
    context = _context(browser)
    page = context.new_page()
    try:
        login(page, app_server, returned_case["checker"])
        page.get_by_role("link", name=text("review.audit.title")).first.click()
        wait_for_app_run(page)
        choose_in_picker(page, text("review.audit.pick"), case_id)
        wait_for_app_run(page)
        compound = page.get_by_text(
            text("annotate.lint.compound", words="与"), exact=False
        ).first  # the finding under c02
        expect(compound).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_text(text("review.audit.changed_since", n=1, version=1))).to_be_visible()
        expect(page.get_by_text(text("workbench.audit.changed")).first).to_be_visible()
        case_box = page.get_by_text(text("widgets.case.user_request")).first
        criteria_box = page.get_by_text(COMPOUND).first
        _side_by_side(case_box, criteria_box)
        approve = page.get_by_role("button", name=text("review.audit.approve")).bounding_box()
        assert approve["y"] + approve["height"] <= 900  # the decision is on the first screen too
        screenshot(page, "checker-rubric-audit-1440x900-lint")
        # the page scrolls through the criteria; the case pane sticks below the header and stays in view
        box = criteria_box.bounding_box()
        page.mouse.move(box["x"] + 50, box["y"] + 50)
        page.mouse.wheel(0, 600)
        page.wait_for_timeout(400)
        case_y = case_box.bounding_box()["y"]
        page.mouse.wheel(0, 1400)
        page.wait_for_timeout(400)
        assert abs(case_box.bounding_box()["y"] - case_y) < 2 and 0 <= case_y < 900
        expect(page.get_by_text(CRITERIA[-1])).to_be_in_viewport()
        screenshot(page, "checker-rubric-audit-1440x900-scrolled")

        # keys: a comment, Ctrl+Enter proposes "return", Ctrl+Enter again confirms
        page.locator('[class*="st-key-review_audit_c_"] input').nth(1).fill("请拆成两条")
        page.keyboard.press("Control+Enter")
        wait_for_app_run(page)
        question = page.get_by_text(text("review.audit.confirm_return", case=case_id, version=2, n=1))
        expect(question).to_be_in_viewport(timeout=WAIT_MS)
        screenshot(page, "checker-rubric-audit-1440x900-confirm")
        with session_scope(engine, read_only=True) as s:
            assert s.get(RubricVersion, newest.id).status == RubricStatus.submitted  # asked, not yet done
        page.keyboard.press("Control+Enter")
        wait_for_app_run(page)
        expect(page.get_by_text(text("review.audit.returned", case=case_id)).first).to_be_visible(timeout=WAIT_MS)
    finally:
        context.close()
    with session_scope(engine, read_only=True) as s:
        assert s.get(RubricVersion, newest.id).status == RubricStatus.returned
        comments = {c.criterion_id: c.review_comment for c in rubrics.criteria_of(s, newest.id) if c.review_comment}
    assert comments == {"c02": "请拆成两条"}
