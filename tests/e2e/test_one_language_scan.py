"""One language per page: every page of every role in Chinese, read as the browser renders it (visible text,
chart text, and the aria-label, placeholder and title attributes Streamlit's widgets carry), holds no Latin-script
UI text. Latin words that are data pass: the demo's model and judge names, usernames, case ids, and the units,
metric names and file formats the pages name as such (`DATA_WORDS`)."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest

from tests.e2e.conftest import ACTION_TIMEOUT_MS, login, screenshot, wait_for_app_run

pytestmark = pytest.mark.browser

ROLES = (("admin", None), ("annotator", 1), ("annotator", 2), ("checker", 1), ("checker", 2))

#: Words that are names of things, not sentences: the product's name, metric and statistic names, file
#: formats, units, protocols and the names of the models' makers as the demo spells them.
DATA_WORDS = frozenset(
    word.lower()
    for words in (
        "ClinConsensus Studio",
        "CACS Pass MF1 F1 SFT PPI AC1 Gwet kappa Cohen Holm Spearman Kendall Wilson",
        "JSONL JSON Lines CSV HTML PNG SHA sha256 ZIP UTF-8",
        "OpenAI Batch API URL LLM ID vLLM SGLang Ollama Qwen3 Plotly",  # "OpenAI Batch": a file format's name
        "AI",  # the mark of a drafted criterion, AI 草稿
        "ms MB GB KB min h s k n token UTC",
        "Ctrl Shift Alt Enter Esc Tab Space",  # the keys' names as printed on them
        "A B",  # two things of a kind side by side (judge A and judge B)
    )
    for word in words.split()
)

#: The switch between the languages names each language in its own words ("中文", "English"): on purpose.
LANGUAGE_SWITCH = frozenset({"english", "language"})

#: The text on a page the browser shows (text nodes of rendered elements, icons' ligature names left out),
#: its charts' text and the widget attributes a screen reader reads or a tooltip shows.
_PAGE_TEXT = """() => {
  const parts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest('script, style, [data-testid="stIconMaterial"]')) continue;
    if (!parent.closest('svg') && !parent.checkVisibility()) continue;
    parts.push(node.nodeValue);
  }
  for (const node of document.querySelectorAll('[aria-label], [placeholder], [title], [data-title]')) {
    for (const name of ['aria-label', 'placeholder', 'title', 'data-title']) {
      const value = node.getAttribute(name);
      if (value) parts.push(value);
    }
  }
  return parts.join('\\n');
}"""

LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’-]*")
#: Names, not words: web addresses, file names and the command line's commands are written as they are typed.
NOT_WORDS = re.compile(
    r"https?://\S+|[\w.-]*\.(?:jsonl|ndjson|json|csv|html|zip|md|txt|png)\b|clinconsensus(?:\s+[a-z][a-z-]*)*"
)


def data_words(database_url: str) -> frozenset[str]:
    """Every Latin word of the demo's data a page may show: model and judge names (runs' too), usernames, display
    names, case ids, response codes, the words of the cases', responses' and criteria's own texts (a drug's name,
    a unit), and the reason an endpoint gave for a failed run (quoted as it came)."""
    import json

    from sqlalchemy import text

    from db.store.engine import make_engine

    engine = make_engine(database_url)
    words: set[str] = set()
    try:
        with engine.connect() as connection:
            for query in (
                "SELECT DISTINCT model FROM response",
                "SELECT DISTINCT judge FROM judge_decision",
                "SELECT DISTINCT judge FROM judge_run",
                "SELECT code FROM response",
                'SELECT username FROM "user"',
                'SELECT display_name FROM "user" WHERE display_name IS NOT NULL',
                'SELECT case_id, clinical_context, user_request FROM "case"',
                "SELECT text FROM response",
                "SELECT criterion_id, text FROM criterion",
            ):
                for row in connection.execute(text(query)):
                    for value in row:
                        words.update(word.lower() for word in LATIN_WORD.findall(NOT_WORDS.sub(" ", str(value))))
            for (said,) in connection.execute(
                text("SELECT message_said FROM judge_run WHERE message_said IS NOT NULL")
            ):
                said = json.loads(said) if isinstance(said, str) else said
                reason = (said or {}).get("params", {}).get("reason") if isinstance(said, dict) else None
                words.update(word.lower() for word in LATIN_WORD.findall(NOT_WORDS.sub(" ", str(reason or ""))))
    finally:
        engine.dispose()
    return frozenset(words)


def latin_ui_words(page_text: str, allowed: frozenset[str]) -> list[str]:
    """The Latin words of `page_text` that are neither data nor a named unit, with their line for context."""
    found: list[str] = []
    for line in page_text.splitlines():
        for word in LATIN_WORD.findall(NOT_WORDS.sub(" ", line)):
            if word.lower() not in allowed | DATA_WORDS | LANGUAGE_SWITCH:
                found.append(f"{word!r} in {line.strip()[:90]!r}")
    return found


def test_latin_ui_words_are_found_and_data_passes():
    allowed = frozenset({"gpt-4o", "demo-1"})
    assert latin_ui_words("模型 GPT-4o 的 CACS@k 为 48.8 %，用时 12 ms，见 gold.jsonl", allowed) == []
    assert latin_ui_words("模型 GPT-5 的得分", allowed) == ["'GPT-5' in '模型 GPT-5 的得分'"]
    assert latin_ui_words("Choose options", allowed) == [
        "'Choose' in 'Choose options'",
        "'options' in 'Choose options'",
    ]
    assert latin_ui_words("Help for 模型名称", allowed) == [
        "'Help' in 'Help for 模型名称'",
        "'for' in 'Help for 模型名称'",
    ]
    assert latin_ui_words("评分 demo-1，命令 clinconsensus import labels，见 http://localhost:8000/v1", allowed) == []


@pytest.mark.parametrize("width,height", [(1440, 900), (1024, 768)], ids=["1440x900", "1024x768"])
@pytest.mark.parametrize("role,group", ROLES, ids=[f"{role}{group or ''}" for role, group in ROLES])
def test_every_chinese_page_speaks_only_chinese(browser, app_server, accounts, role, group, width, height):
    allowed = data_words(app_server.database_url)
    context = browser.new_context(viewport={"width": width, "height": height}, locale="zh-CN")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    leaks: dict[str, list[str]] = {}
    try:
        login(page, app_server, accounts(role, group))
        links = page.locator('[data-testid="stSidebarNav"] a')
        links.first.wait_for()
        paths = [urlparse(links.nth(i).get_attribute("href")).path.strip("/") for i in range(links.count())]
        for path in paths:
            page.goto(f"{app_server.base_url}/{path}")
            wait_for_app_run(page)
            # Our widget-text component has run on this page load (its script loads after the first run).
            page.locator("html[data-cc-chrome-language=zh]").wait_for(state="attached")
            page.wait_for_timeout(500)  # charts and the workbench draw after the run
            texts = [page.evaluate(_PAGE_TEXT)]
            texts += [frame.evaluate(_PAGE_TEXT) for frame in page.frames[1:] if frame.url.startswith("http")]
            found = latin_ui_words("\n".join(texts), allowed)
            if found:
                leaks[path] = sorted(set(found))
                screenshot(page, f"one-language-{role}{group or ''}-{path}-{width}x{height}", settle=False)
    finally:
        context.close()
    assert not leaks, "\n".join(f"{path}: {words}" for path, words in leaks.items())
