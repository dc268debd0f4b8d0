"""A drafted rubric from the loopback LLM endpoint to the report, in the browser (docs/REFERENCE.md §4.3).

A drafting run against tools/llm_server.py (a real HTTP server) drafts one case; its author opens it
with the draft in the grid, edits 3 criteria, deletes 2, adds 2 and submits,
all from the keyboard; the rubric auditor sees each origin; report.json's provenance equals what was
done. Screenshots of the authoring page at 1440×900 and 1024×768, and of the audit page.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import subprocess
import sys
import time

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from analysis.report import run_report
from annotate.authoring import ORDER_WIDTH, ORIGIN_WIDTH
from db.access import users
from db.rules.enums import AssignmentKind
from db.store.engine import make_engine, session_scope
from db.store.models import Assignment, CriterionProvenance, RubricVersion
from tests.e2e.conftest import ACTION_TIMEOUT_MS, choose_in_picker, login, screenshot, text, wait_for_app_run
from tests.e2e.grid_helpers import open_case_grid
from tools.llm_server import DRAFT_TEXTS, LLMServer

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
GENERATOR = "loop-drafter"
ID_WIDTH = 44
ADDED = ["询问既往有无消化道出血史", "说明胸痛持续需拨打120"]


@pytest.fixture
def drafted_case(app_server, accounts, tmp_path):
    engine = make_engine(app_server.database_url)
    tag = secrets.token_hex(3).upper()
    author = accounts("annotator", 1)
    from tests.support.factories import make_case

    with session_scope(engine) as s:
        writer = users.get_user(s, username=author.username)
        case = make_case(s, f"E2E-DRAFT{tag}", n=0, clinical_context="患者男，61 岁，活动后胸闷两周，休息可缓解。")
        s.add(Assignment(kind=AssignmentKind.rubric, case_pk=case.id, user_id=writer.id, group_no=1))
        case_id, case_pk = case.case_id, case.id
    listing = tmp_path / "cases.txt"
    listing.write_text(case_id + "\n", encoding="utf-8")
    with LLMServer() as server:
        started = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "cli.main",
                "draft",
                "rubrics",
                "--base-url",
                server.url,
                "--model",
                "loop",
                "--as",
                GENERATOR,
                "--cases",
                str(listing),
            ],
            env={**os.environ, "DATABASE_URL": app_server.database_url},
            capture_output=True,
            text=True,
            timeout=120,
        )
        seconds = time.perf_counter() - started
    assert done.returncode == 0 and "drafting run" in done.stdout, done.stdout + done.stderr
    yield {"case_id": case_id, "case_pk": case_pk, "author": author, "engine": engine, "seconds": seconds}
    engine.dispose()


def open_authoring(page, app_server, account, case_id):
    grid = open_case_grid(page, app_server, account, case_id)
    page.screenshot(path=f"tests/artifacts/screenshots/drafted-authoring-{page.viewport_size['width']}-opened.png")
    page.wait_for_function(
        "t => Array.from(document.querySelectorAll('[data-testid=stDataFrame] td'), e => e.textContent)"
        ".some(x => t.includes(x))",
        arg=list(DRAFT_TEXTS),
        timeout=WAIT_MS,
    )
    page.wait_for_timeout(500)
    return grid


def grid_row_height(grid) -> float:
    """The grid is drawn at every row's height plus 40 px (header and border): the row height follows."""
    return (grid.bounding_box()["height"] - 40) / 30


def rows_in_view(page, grid) -> int:
    """Grid rows wholly inside the window once the grid's top is scrolled to just below the app's header."""
    grid.evaluate(
        "g => { g.scrollIntoView({block: 'start'}); let m = g.parentElement;"
        " while (m && !(m.scrollTop > 0)) m = m.parentElement; if (m) m.scrollTop -= 64; }"
    )
    page.wait_for_timeout(300)
    box = grid.bounding_box()
    row_height = grid_row_height(grid)
    return min(int((page.viewport_size["height"] - (box["y"] + 36)) // row_height), 30)


def pick(page, grid, *, x_offset: float, row: int, row_height: float) -> None:
    """Clicks a cell with the page scrolled to its top: the grid's first ten rows are then in view, below the
    app's header (a grid scrolled into view would put its first rows under the header)."""
    page.evaluate("() => document.querySelectorAll('*').forEach(e => { if (e.scrollTop > 0) e.scrollTop = 0; })")
    page.wait_for_timeout(200)
    box = grid.bounding_box()
    row_height = grid_row_height(grid)  # measured again: a longer criterion makes every row three lines high
    page.mouse.click(box["x"] + x_offset, box["y"] + 36 + row_height * (row + 0.5))


def grid_texts(page) -> list[str]:
    return page.evaluate(
        "() => Array.from(document.querySelectorAll('[data-testid=stDataFrame] td'), e => e.textContent)"
    )


def has_cell(page, body: str) -> bool:
    return page.evaluate(
        "t => Array.from(document.querySelectorAll('[data-testid=stDataFrame] td'), e => e.textContent)"
        ".some(x => x === t)",
        body,
    )


def edit_cell(page, grid, x_offset, row, row_height, *, append: str = "", replace: str | None = None) -> None:
    """Opens a cell's editor from the keyboard (Enter), appends to or replaces its text, commits (Enter);
    tried again when a rerun redrew the grid in between, until the grid holds the new text."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _attempt in range(6):
        wait_for_app_run(page)
        page.wait_for_timeout(400)
        pick(page, grid, x_offset=x_offset, row=row, row_height=row_height)
        page.keyboard.press("Enter")
        cell = page.locator("textarea.gdg-input")
        try:
            cell.wait_for(timeout=4_000)
        except PlaywrightTimeout:
            continue
        try:
            before = cell.input_value(timeout=2_000)
            if replace is not None:
                cell.fill(replace, timeout=2_000)
            else:
                cell.press("End", timeout=2_000)
                cell.type(append, timeout=2_000)
            cell.press("Enter", timeout=2_000)
        except PlaywrightTimeout:
            continue  # a rerun closed the editor: select and open it again
        wait_for_app_run(page)
        wanted = replace if replace is not None else before + append
        page.wait_for_timeout(300)
        if has_cell(page, wanted):
            return
    raise AssertionError(f"row {row}: the edit did not land")


def test_draft_edit_delete_add_submit_audit_and_report(browser, app_server, accounts, drafted_case):
    case_id = drafted_case["case_id"]
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        grid = open_authoring(page, app_server, drafted_case["author"], case_id)
        expect(page.get_by_text(text("drafts.keys_title"))).to_be_visible()
        row_height = grid_row_height(grid)
        in_view = rows_in_view(page, grid)
        screenshot(page, "drafted-authoring-1440x900")
        page.screenshot(path="tests/artifacts/screenshots/drafted-authoring-1440x900-view.png")
        assert in_view >= 15, (in_view, row_height)
        x_text = ORDER_WIDTH + ID_WIDTH + ORIGIN_WIDTH + 60
        edits = 0
        started = time.perf_counter()
        for row in range(3):  # edit: Enter opens the cell with its text, End, type, Enter
            edit_cell(page, grid, x_text, row, row_height, append="，并注明剂量")
            edits += 1
        for row in (3, 4):  # delete: select the cell, Delete
            for _attempt in range(4):
                wait_for_app_run(page)
                before = grid_texts(page)
                pick(page, grid, x_offset=x_text, row=row, row_height=row_height)
                page.keyboard.press("Delete")
                wait_for_app_run(page)
                page.wait_for_timeout(300)
                if sum(1 for x in grid_texts(page) if x in DRAFT_TEXTS) < sum(1 for x in before if x in DRAFT_TEXTS):
                    break
            edits += 1
        for row, body in zip((3, 4), ADDED, strict=True):  # add into the emptied rows
            edit_cell(page, grid, x_text, row, row_height, replace=body)
            edits += 1
        keyboard_seconds = time.perf_counter() - started
        screenshot(page, "drafted-authoring-edited-1440x900")
        submit = page.get_by_role("button", name=text("annotate.authoring.submit"), exact=True)
        expect(submit).to_be_enabled(timeout=WAIT_MS)
        submit.click()
        wait_for_app_run(page)
        expect(page.get_by_text(text("annotate.authoring.submitted", version=1)).first).to_be_attached(timeout=WAIT_MS)
        done = page.get_by_test_id("stToast").filter(has_text=text("annotate.authoring.submitted", version=1))
        expect(done).to_be_visible(timeout=WAIT_MS)
        box = done.bounding_box()
        assert box is not None and 0 <= box["y"] <= 900 - box["height"], "the confirmation is in view"
        expect(page.get_by_text(text("annotate.authoring.editor_help"), exact=False)).to_have_count(0)
        page.screenshot(path="tests/artifacts/screenshots/drafted-authoring-submitted-1440x900-view.png")
    finally:
        context.close()

    engine = drafted_case["engine"]
    with session_scope(engine, read_only=True) as s:
        version = s.exec(select(RubricVersion).where(RubricVersion.case_pk == drafted_case["case_pk"])).one()
        rows = s.exec(select(CriterionProvenance).where(CriterionProvenance.rubric_version_id == version.id)).all()
        origins = [row.origin for row in rows]
        first = s.exec(
            select(CriterionProvenance).where(
                CriterionProvenance.rubric_version_id == version.id, CriterionProvenance.origin == "edited"
            )
        ).all()
    assert (origins.count("drafted"), origins.count("edited"), origins.count("written"), origins.count("deleted")) == (
        25,
        3,
        2,
        2,
    )
    assert all(row.edit_distance == len("，并注明剂量") for row in first)

    checker = accounts("checker", 2)
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        login(page, app_server, checker)
        page.goto(f"{app_server.base_url}/review-rubrics")
        wait_for_app_run(page)
        choose_in_picker(page, text("review.audit.pick"), case_id)
        rows = page.locator('[class*="st-key-audit_row_"]')
        expect(rows).to_have_count(30, timeout=WAIT_MS)
        expect(rows.filter(has_text=text("drafts.short.drafted"))).to_have_count(25)
        expect(rows.filter(has_text=text("drafts.short.edited", distance=len("，并注明剂量")))).to_have_count(3)
        expect(rows.filter(has_text=text("drafts.short.written"))).to_have_count(2)
        expect(page.get_by_text(GENERATOR, exact=False).first).to_be_visible()
        expect(page.get_by_text(text("drafts.deleted", n=2))).to_be_visible()
        first_row = page.locator(".st-key-audit_row_1")
        first_row.evaluate(
            "e => { e.scrollIntoView({block: 'start'}); let m = e.parentElement;"
            " while (m && !(m.scrollTop > 0)) m = m.parentElement; if (m) m.scrollTop -= 70; }"
        )
        page.wait_for_timeout(300)
        bar = page.locator(".st-key-audit_decide_bar").bounding_box()
        visible = page.evaluate(
            """bottom => Array.from(document.querySelectorAll('[class*="st-key-audit_row_"]'))
                 .filter(e => { const r = e.getBoundingClientRect(); return r.top >= 56 && r.bottom <= bottom; })
                 .length""",
            bar["y"] if bar else 900,
        )
        page.screenshot(path="tests/artifacts/screenshots/drafted-audit-1440x900-view.png")
        assert visible >= 12, visible
    finally:
        context.close()

    path = drafted_case["engine"].url.database + ".report.json"
    run_report(engine, json_path=path, stream=io.StringIO())
    with open(path, encoding="utf-8") as handle:
        section = json.load(handle)["rubric_provenance"]["by_generator"][GENERATOR]
    assert {key: section[key] for key in ("n_cases", "offered", "drafted", "edited", "written", "deleted")} == {
        "n_cases": 1,
        "offered": 30,
        "drafted": 25,
        "edited": 3,
        "written": 2,
        "deleted": 2,
    }
    assert section["acceptance_rate"] == 28 / 30 and section["median_edit_distance"] == len("，并注明剂量")
    print(
        f"\ndrafting (1 case through loopback): {drafted_case['seconds']:.2f}s; keyboard work: {edits} edits, "
        f"{keyboard_seconds:.1f}s"
    )


@pytest.mark.parametrize("size", [(1440, 900), (1024, 768)], ids=["1440x900", "1024x768"])
def test_the_drafted_authoring_page_at_two_sizes(browser, app_server, drafted_case, size):
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        grid = open_authoring(page, app_server, drafted_case["author"], drafted_case["case_id"])
        page.screenshot(path=f"tests/artifacts/screenshots/drafted-authoring-{width}x{height}-top.png")
        rows_in_view(page, grid)
        page.screenshot(path=f"tests/artifacts/screenshots/drafted-authoring-{width}x{height}-grid.png")
        # the case box whole beside the grid: its bottom inside the window
        box = page.locator(".st-key-case_box").bounding_box()
        assert box is not None and box["y"] + box["height"] <= height + 1, box
        # the text column and the origin beside it without sideways scrolling
        widths = page.evaluate(
            """() => { const s = document.querySelector('[data-testid=stDataFrame] .dvn-scroller');
                       return {content: s.scrollWidth, shown: s.clientWidth}; }"""
        )
        print(size, widths)
    finally:
        context.close()
