"""Writing a 30-criterion rubric from scratch by keyboard on the authoring page at 1440×900 (issue 42's closing
figure beside drafting): the assigned author opens an unwritten case, selects the first criterion cell once, then
for each row opens the cell (Enter), types the criterion and commits it (Enter, which also moves the selection to
the next row), and submits. The submitted version holds exactly the 30 criteria, in order, read back from the
database; the elapsed time, keystrokes and clicks are printed (no timing bar: the machine's load varies).

A Chinese character is counted as one keystroke here (the browser receives it as one text input); with a pinyin
input method a physician presses several keys per character, so the keystrokes are a floor."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout, expect
from sqlmodel import select

from annotate.authoring import ID_WIDTH, ORDER_WIDTH
from db.rules.enums import RubricStatus
from db.rules.lint import lint_rubric
from db.store.engine import make_engine, session_scope
from db.store.models import Criterion, Draft, RubricVersion
from tests.e2e.conftest import ACTION_TIMEOUT_MS, screenshot, text, wait_for_app_run
from tests.e2e.grid_helpers import HEADER_HEIGHT, assign_new_case, open_case_grid, row_height_of

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
#: The criterion text's column in the grid's accessible table (cells `glide-cell-<column>-<row>`): №, id, text.
TEXT_COLUMN = 2
#: Thirty one-line criteria for a case of exertional chest tightness, each passing the quality hints.
CRITERIA = (
    "建议胸痛持续超过二十分钟立即拨打120急救电话",
    "询问胸闷发作时是否向左肩或下颌放射",
    "询问每次胸闷持续的时间",
    "询问胸闷是否在休息后数分钟内缓解",
    "询问既往有无高血压病史",
    "询问既往有无糖尿病病史",
    "询问吸烟史并记录每日吸烟支数",
    "询问直系亲属有无早发冠心病",
    "建议尽快完成十二导联心电图检查",
    "建议检测血清肌钙蛋白",
    "建议空腹检测血脂四项",
    "建议检测空腹血糖",
    "提示可能为稳定型心绞痛",
    "指出需排除急性冠脉综合征",
    "建议择期行运动负荷试验",
    "建议心内科门诊就诊评估冠脉病变",
    "说明舌下含服硝酸甘油的用法",
    "提醒含服硝酸甘油前应坐下以防晕厥",
    "说明无禁忌时可长期服用阿司匹林",
    "提醒服用阿司匹林期间留意黑便",
    "建议低盐低脂饮食",
    "建议戒烟并远离二手烟环境",
    "建议避免饱餐后剧烈活动",
    "建议每周进行中等强度有氧运动",
    "建议控制体重指数低于二十四",
    "建议每日监测血压并记录",
    "提醒出现夜间静息胸痛时立即就医",
    "说明胸闷加重伴大汗属于危险信号",
    "不建议自行停用已在服用的降压药",
    "建议两周后复诊复查心电图",
)


@pytest.fixture
def unwritten_case(app_server, accounts):
    """A case assigned to an author, with no rubric version and no draft."""
    engine = make_engine(app_server.database_url)
    author = accounts("annotator", 1)
    case_pk, case_id = assign_new_case(engine, author, "E2E-SCRATCH", "患者男，58 岁，活动后胸闷一月。")
    yield {"case_id": case_id, "case_pk": case_pk, "author": author, "engine": engine}
    engine.dispose()


class Counted:
    """The page's keyboard and mouse as the author uses them, counting key presses, typed characters and clicks."""

    def __init__(self, page) -> None:
        self.page, self.keys, self.clicks = page, 0, 0

    def press(self, key: str) -> None:
        self.page.keyboard.press(key)
        self.keys += 1

    def type(self, value: str) -> None:
        self.page.keyboard.type(value)
        self.keys += len(value)

    def click_at(self, x: float, y: float) -> None:
        self.page.mouse.click(x, y)
        self.clicks += 1

    def click(self, locator) -> None:
        locator.click()
        self.clicks += 1


def selected_cell(page) -> tuple[int, int] | None:
    """(column, row) of the grid's selected cell, from its accessible table; None when nothing is selected."""
    found = page.evaluate(
        """() => { const td = document.querySelector('[data-testid=stDataFrame] td[aria-selected=true]');
                   if (!td) return null; const m = td.id.match(/glide-cell-(\\d+)-(\\d+)/);
                   return m ? [Number(m[1]), Number(m[2])] : null; }"""
    )
    return tuple(found) if found else None


def cell_text(page, column: int, row: int) -> str | None:
    """The text of a cell of the grid's accessible table; None when there is no such cell."""
    return page.evaluate(
        "([c, r]) => { const td = document.getElementById(`glide-cell-${c}-${r}`);"
        " return td ? td.textContent : null; }",
        [column, row],
    )


def committed(page, row: int, body: str) -> None:
    """Waits until the grid shows `body` in the row's criterion cell; else fails saying what the grid shows."""
    try:
        page.wait_for_function(
            "([c, r, t]) => (document.getElementById(`glide-cell-${c}-${r}`) || {}).textContent === t",
            arg=[TEXT_COLUMN, row, body],
            timeout=WAIT_MS,
        )
    except PlaywrightTimeout:
        screenshot(page, f"FAILED-authoring-from-scratch-row-{row + 1}", settle=False)
        shown = cell_text(page, TEXT_COLUMN, row)
        raise AssertionError(
            f"row {row + 1}: the grid shows {shown!r} after typing {body!r}; selected {selected_cell(page)}"
        ) from None


def kept(engine, case_pk: int, row: int, body: str) -> None:
    """Waits until the server keeps `body` in the row of the author's draft: the run the commit started has
    folded it in and drawn the editor again. The next criterion is typed only then, as a person's next one
    comes after that run; typed while it runs, on a loaded machine, the redraw could land mid-typing."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while True:
        with session_scope(engine, read_only=True) as session:
            draft = session.exec(select(Draft).where(Draft.key == f"rubric:{case_pk}")).first()
            rows = (draft.payload.get("rows") if draft is not None else None) or []
        if row < len(rows) and rows[row].get("text") == body:
            return
        if time.monotonic() > deadline:
            shown = rows[row].get("text") if row < len(rows) else None
            raise AssertionError(f"row {row + 1}: the kept draft holds {shown!r} after typing {body!r}")
        time.sleep(0.1)


def test_thirty_criteria_written_from_scratch_by_keyboard(browser, app_server, unwritten_case):
    assert not lint_rubric(list(CRITERIA), len(CRITERIA)).findings, "the criteria pass the quality hints"
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    author = Counted(page)
    try:
        grid = open_case_grid(page, app_server, unwritten_case["author"], unwritten_case["case_id"])
        expect(page.locator("[data-testid=stDataFrame] td#glide-cell-0-29")).to_be_attached(timeout=WAIT_MS)
        empty = [cell_text(page, TEXT_COLUMN, row) for row in range(len(CRITERIA))]
        assert empty == [""] * len(CRITERIA), "the case is unwritten"
        page.wait_for_timeout(500)
        page.evaluate("() => document.querySelectorAll('*').forEach(e => { if (e.scrollTop > 0) e.scrollTop = 0; })")
        page.wait_for_timeout(200)
        box = grid.bounding_box()
        started = time.perf_counter()
        # The one click: the first row's criterion cell (after № and id). From here on the keyboard only.
        author.click_at(box["x"] + ORDER_WIDTH + ID_WIDTH + 60, box["y"] + HEADER_HEIGHT + row_height_of(grid) / 2)
        # The grid's accessible table marks the selected cell a frame after the click.
        page.wait_for_function(
            "() => document.querySelector('[data-testid=stDataFrame] td[aria-selected=true]')", timeout=WAIT_MS
        )
        reselected = 0
        for row, body in enumerate(CRITERIA):
            where = selected_cell(page)
            if where is None or where[0] != TEXT_COLUMN:
                raise AssertionError(f"row {row + 1}: the grid lost its selection ({where})")
            while where[1] != row:  # a redraw put the selection elsewhere: the arrow keys bring it back
                author.press("ArrowDown" if where[1] < row else "ArrowUp")
                reselected += 1
                where = selected_cell(page) or where
            author.press("Enter")
            editor = page.locator("textarea.gdg-input")
            editor.wait_for(timeout=WAIT_MS)
            author.type(body)
            # Enter commits what the editor holds: pressed before the editor has taken the last characters
            # in, it would commit less than was typed (a person's Enter comes far later than a script's).
            expect(editor).to_have_value(body, timeout=WAIT_MS)
            if row == 0:
                # The page's own first runs end before the first commit: a script types the first criterion
                # within a second of the page opening, where a person takes longer than those runs.
                wait_for_app_run(page)
            author.press("Enter")
            wait_for_app_run(page)
            committed(page, row, body)
            kept(unwritten_case["engine"], unwritten_case["case_pk"], row, body)
            wait_for_app_run(page)
        typed_seconds = time.perf_counter() - started
        screenshot(page, "authoring-from-scratch-1440x900")
        submit = page.get_by_role("button", name=text("annotate.authoring.submit"), exact=True)
        expect(submit).to_be_enabled(timeout=WAIT_MS)
        author.click(submit)
        wait_for_app_run(page)
        expect(
            page.get_by_test_id("stToast").filter(has_text=text("annotate.authoring.submitted", version=1))
        ).to_be_visible(timeout=WAIT_MS)
        seconds = time.perf_counter() - started
    finally:
        context.close()

    with session_scope(unwritten_case["engine"], read_only=True) as s:
        version = s.exec(select(RubricVersion).where(RubricVersion.case_pk == unwritten_case["case_pk"])).one()
        stored = s.exec(
            select(Criterion).where(Criterion.rubric_version_id == version.id).order_by(Criterion.position)  # type: ignore[arg-type]
        ).all()
        assert version.status == RubricStatus.submitted and version.version == 1
        assert [c.text for c in stored] == list(CRITERIA)
    # Per criterion: Enter opens the cell, its characters, Enter commits (and moves down); arrows only after a redraw.
    characters = sum(len(body) for body in CRITERIA)
    print(
        f"\nfrom scratch, 30 criteria ({characters} characters) at 1440x900: {seconds:.1f}s to submission "
        f"({typed_seconds:.1f}s typing), {author.keys} keystrokes ({reselected} arrow keys after redraws), "
        f"{author.clicks} clicks"
    )
