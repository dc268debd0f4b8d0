"""Reordering criteria from the keyboard on the authoring page (the page's key help): a number typed into a
row's № cell moves that row there, in the browser; the moved order is what a save stores."""

from __future__ import annotations

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from sqlmodel import select

from annotate.authoring import ORDER_WIDTH
from db import rubrics
from db.access import users
from db.rules.config import RUBRIC_SIZE
from db.store.engine import make_engine, session_scope
from db.store.models import Criterion, RubricVersion
from tests.e2e.conftest import ACTION_TIMEOUT_MS, screenshot, text, wait_for_app_run
from tests.e2e.grid_helpers import assign_new_case, open_case_grid

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
#: A click and the keys after it are tried this many times, each given this long to take effect.
ATTEMPTS, RETRY_MS = 3, 8_000


def _body(i: int) -> str:
    return f"询问第{i}项既往病史与用药情况并记录具体剂量"


@pytest.fixture
def saved_rubric(app_server, accounts):
    """A case whose author saved 30 criteria (not submitted)."""
    engine = make_engine(app_server.database_url)
    author = accounts("annotator", 1)
    case_pk, case_id = assign_new_case(engine, author, "E2E-MOVE", "患者女，45 岁，反复心悸一月。")
    ids = rubrics.default_criterion_ids(RUBRIC_SIZE)
    with session_scope(engine) as s:
        writer = users.get_user(s, username=author.username)
        rubrics.save_rubric_draft(
            s,
            writer,
            case_pk,
            [rubrics.CriterionInput(cid, _body(i), ()) for i, cid in enumerate(ids, start=1)],
            base_version_id=None,
            expected_lock=None,
        )
    yield {"case_id": case_id, "case_pk": case_pk, "author": author, "engine": engine}
    engine.dispose()


def grid_column(page, name: str) -> list[str]:
    """The texts of one column of the grid's accessible table, row by row (named by its header)."""
    return page.evaluate(
        """name => {
          const table = document.querySelector('[data-testid=stDataFrame] table');
          const heads = Array.from(table.querySelectorAll('thead th'), th => th.textContent.trim());
          const at = heads.findIndex(h => h.includes(name));
          return Array.from(table.querySelectorAll('tbody tr'), tr => (tr.children[at] || {}).textContent || '');
        }""",
        name,
    )


def criterion_texts(page) -> list[str]:
    return grid_column(page, text("annotate.authoring.col.text"))


def move_row(page, grid, *, row: int, to: int, row_height: float, typed: bool) -> list[str]:
    """Moves row `row` (from 0) to place `to` (from 1) through its № cell: select it, then either type the number
    straight in (`typed`: the first digit opens the cell's editor) or open the cell with Enter and type it; Enter.
    Waits until the grid's first six criteria are in the moved order, checks them and returns them."""
    before = criterion_texts(page)
    page.evaluate("() => document.querySelectorAll('*').forEach(e => { if (e.scrollTop > 0) e.scrollTop = 0; })")
    page.wait_for_timeout(200)
    editor = page.locator("input.gdg-input, textarea.gdg-input").first
    for _attempt in range(ATTEMPTS):
        # A click or a key that lands while the grid is drawn again after the last change is lost with the old
        # grid: the cell is selected (the grid's accessible table says so) and its editor open before typing on.
        wait_for_app_run(page)
        box = grid.bounding_box()
        page.mouse.click(box["x"] + ORDER_WIDTH / 2, box["y"] + 36 + row_height * (row + 0.5))
        try:
            page.wait_for_function(
                "id => (document.querySelector('[data-testid=stDataFrame] td[aria-selected=true]') || {}).id === id",
                arg=f"glide-cell-0-{row}",
                timeout=RETRY_MS,
            )
            if typed:
                page.wait_for_timeout(200)
                for digit in str(to):
                    page.keyboard.press(digit)
                editor.wait_for(timeout=RETRY_MS)
            else:
                page.keyboard.press("Enter")
                editor.wait_for(timeout=RETRY_MS)
                editor.fill(str(to))
            if editor.input_value() == str(to):
                break
        except PlaywrightTimeout:
            pass
        page.keyboard.press("Escape")
    else:
        raise AssertionError(f"row {row + 1}: its № cell's editor did not open with {to} in {ATTEMPTS} attempts")
    editor.press("Enter")
    wait_for_app_run(page)
    # The expected order, computed from the grid as it was: the row taken out and put in at its new place.
    order = list(before)
    order.insert(to - 1, order.pop(row))
    wanted = order[:6]
    page.wait_for_function(
        """wanted => {
          const rows = Array.from(document.querySelectorAll('[data-testid=stDataFrame] tbody tr'));
          const texts = rows.map(tr => Array.from(tr.children, td => td.textContent));
          return wanted.every((w, i) => texts[i] && texts[i].includes(w));
        }""",
        arg=wanted,
        timeout=WAIT_MS,
    )
    assert criterion_texts(page)[:6] == wanted
    return wanted


def test_a_number_typed_in_the_order_column_moves_the_row(browser, app_server, saved_rubric):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    try:
        grid = open_case_grid(page, app_server, saved_rubric["author"], saved_rubric["case_id"])
        page.wait_for_function(
            "t => Array.from(document.querySelectorAll('[data-testid=stDataFrame] td'), e => e.textContent)"
            ".some(x => x === t)",
            arg=_body(1),
            timeout=WAIT_MS,
        )
        page.wait_for_timeout(500)
        assert criterion_texts(page)[:6] == [_body(i) for i in range(1, 7)]
        grid_top = grid.bounding_box()
        row_height = (grid_top["height"] - 40) / RUBRIC_SIZE
        # Row 1 to place 5, the number typed straight into the selected cell: the rows between move up one.
        wanted = move_row(page, grid, row=0, to=5, row_height=row_height, typed=True)
        assert wanted == [_body(i) for i in (2, 3, 4, 5, 1, 6)]
        screenshot(page, "authoring-reordered-1440x900")
        texts = criterion_texts(page)
        assert sorted(texts) == sorted(_body(i) for i in range(1, RUBRIC_SIZE + 1)), "nothing lost or doubled"
        # The № column reads 1..30 again, and a second move works on the redrawn grid: row 6 to place 2.
        assert grid_column(page, text("drafts.col.order"))[:6] == ["1", "2", "3", "4", "5", "6"]
        # This time the cell is opened with Enter first (Enter opens any cell), then the number typed.
        wanted = move_row(page, grid, row=5, to=2, row_height=row_height, typed=False)
        assert wanted == [_body(i) for i in (2, 6, 3, 4, 5, 1)]
        page.get_by_role("button", name=text("annotate.authoring.save")).first.click()
        wait_for_app_run(page)
        page.wait_for_timeout(1000)
    finally:
        context.close()
    with session_scope(saved_rubric["engine"], read_only=True) as s:
        newest = s.exec(
            select(RubricVersion)
            .where(RubricVersion.case_pk == saved_rubric["case_pk"])
            .order_by(RubricVersion.version.desc())  # type: ignore[attr-defined]
        ).first()
        assert newest is not None
        stored = s.exec(
            select(Criterion).where(Criterion.rubric_version_id == newest.id).order_by(Criterion.position)  # type: ignore[arg-type]
        ).all()
        assert [c.text for c in stored][:6] == wanted
