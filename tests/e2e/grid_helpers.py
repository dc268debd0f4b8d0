"""Typing into a cell of an `st.data_editor` grid (glide-data-grid) from the keyboard, whatever its scroll; a case
assigned for authoring, and its authoring page opened."""

from __future__ import annotations

import secrets

from playwright.sync_api import TimeoutError as PlaywrightTimeout, expect

from db.access import users
from db.rules.enums import AssignmentKind
from db.store.engine import session_scope
from db.store.models import Assignment
from tests.e2e.conftest import ACTION_TIMEOUT_MS, choose_in_picker, login, text, wait_for_app_run
from tests.support.factories import make_case

HEADER_HEIGHT = 36


def assign_new_case(engine, author, prefix: str, clinical_context: str) -> tuple[int, str]:
    """A new case (id `prefix` and a random tag) assigned to `author` to write its rubric; (case_pk, case_id)."""
    with session_scope(engine) as s:
        writer = users.get_user(s, username=author.username)
        case = make_case(s, f"{prefix}{secrets.token_hex(3).upper()}", n=0, clinical_context=clinical_context)
        s.add(Assignment(kind=AssignmentKind.rubric, case_pk=case.id, user_id=writer.id, group_no=1))
        return case.id, case.case_id


def open_case_grid(page, app_server, account, case_id: str):
    """Signs in, opens the authoring page and picks the case; returns its grid once it is drawn."""
    login(page, app_server, account)
    page.get_by_role("link", name=text("annotate.authoring.title")).first.click()
    wait_for_app_run(page)
    choose_in_picker(page, text("annotate.authoring.pick_case"), case_id)
    grid = page.get_by_test_id("stDataFrame").first
    expect(grid).to_be_visible(timeout=ACTION_TIMEOUT_MS)
    return grid


def row_height_of(grid, rows: int = 30) -> float:
    """The authoring grid's row height as drawn: the grid holds every row plus 40 px (header, border).
    It is one line for a rubric of one-line criteria and three once a criterion needs wrapping."""
    return (grid.bounding_box()["height"] - 40) / rows


def select_cell(page, grid, *, x_offset: float, row: int, row_height: int) -> None:
    """Selects row `row` of the column at `x_offset`: the grid is scrolled to its top, the first row
    clicked, then ↓ pressed `row` times (the grid scrolls the selection into view itself)."""
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    page.mouse.move(box["x"] + x_offset, box["y"] + HEADER_HEIGHT + row_height / 2)
    page.mouse.wheel(0, -100 * row_height)
    page.wait_for_timeout(200)
    # The app's header covers the top 60 px of the window: the first row must stand below it.
    grid.evaluate(
        "g => { const top = g.getBoundingClientRect().top; if (top >= 80) return; let m = g.parentElement;"
        " while (m && !(m.scrollTop > 0)) m = m.parentElement; if (m) m.scrollTop -= 80 - top; }"
    )
    page.wait_for_timeout(100)
    box = grid.bounding_box()
    page.mouse.click(box["x"] + x_offset, box["y"] + HEADER_HEIGHT + row_height / 2)
    for _ in range(row):
        page.keyboard.press("ArrowDown")


def type_into_row(page, grid, value: str, *, x_offset: float, row: int, row_height: int) -> None:
    """Opens the cell's editor with Enter, types `value`, commits with Enter and waits for the rerun."""
    cell_editor = open_row_editor(page, grid, value, x_offset=x_offset, row=row, row_height=row_height)
    cell_editor.press("Enter")
    wait_for_app_run(page)


def open_row_editor(page, grid, value: str, *, x_offset: float, row: int, row_height: int):
    """Opens the cell's editor with Enter and types `value`; returns the editor, not yet committed."""
    cell_editor = page.locator("textarea.gdg-input")
    for _ in range(3):
        select_cell(page, grid, x_offset=x_offset, row=row, row_height=row_height)
        page.keyboard.press("Enter")
        try:
            cell_editor.wait_for(timeout=5_000)
            break
        except PlaywrightTimeout:
            wait_for_app_run(page)  # a rerun was redrawing the grid; try again
    cell_editor.fill(value)
    return cell_editor
