"""One catalog, two languages: same keys in zh and en, and no page shows a string that bypasses it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import i18n

ROOT = Path(__file__).resolve().parents[2]
#: Where user-visible pages live (docs/REFERENCE.md §2).
PAGE_SOURCES = ["annotate", "review", "admin", "ui", "dashboards"]
#: Streamlit calls (as `st.x`, `st.sidebar.x` or on a column/tab/form) whose text arguments a user reads.
DISPLAY_CALLS = {
    "title",
    "header",
    "subheader",
    "markdown",
    "write",
    "caption",
    "text",
    "error",
    "warning",
    "info",
    "success",
    "toast",
    "exception",
    "button",
    "form_submit_button",
    "download_button",
    "link_button",
    "page_link",
    "text_input",
    "text_area",
    "number_input",
    "selectbox",
    "multiselect",
    "radio",
    "checkbox",
    "toggle",
    "slider",
    "select_slider",
    "file_uploader",
    "date_input",
    "time_input",
    "color_picker",
    "chat_input",
    "pills",
    "segmented_control",
    "expander",
    "tabs",
    "popover",
    "metric",
    "progress",
    "spinner",
    "status",
    "Page",
    "dialog",
    "feedback",
}
TEXT_KEYWORDS = {"label", "body", "help", "placeholder", "text", "title", "caption"}


def _page_files() -> list[Path]:
    files: list[Path] = []
    for source in PAGE_SOURCES:
        path = ROOT / source
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += sorted(path.rglob("*.py"))
    return files


def _has_words(text: str) -> bool:
    return any(ch.isalpha() for ch in text)


def _bare_literals(node: ast.AST) -> list[str]:
    """Literal text with letters in an argument: plain strings, f-string parts, list items."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if _has_words(node.value) else []
    if isinstance(node, ast.JoinedStr):
        return [
            part.value
            for part in node.values
            if isinstance(part, ast.Constant) and isinstance(part.value, str) and _has_words(part.value)
        ]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [text for item in node.elts for text in _bare_literals(item)]
    if isinstance(node, ast.BinOp):
        return _bare_literals(node.left) + _bare_literals(node.right)
    return []


def bare_literals_in(source: str, filename: str = "<page>") -> list[str]:
    """`file:line: text` for every literal passed as display text to a Streamlit call."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if not (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DISPLAY_CALLS
        ):
            continue
        arguments = list(node.args[:1]) + [kw.value for kw in node.keywords if kw.arg in TEXT_KEYWORDS]
        if node.func.attr in ("tabs", "metric"):
            arguments = list(node.args[:2]) + [kw.value for kw in node.keywords if kw.arg in TEXT_KEYWORDS]
        for argument in arguments:
            found += [f"{filename}:{node.lineno}: {text!r}" for text in _bare_literals(argument)]
    return found


def _catalog_keys_used(source: str) -> set[str]:
    """Keys given literally to `t(...)`, `shell.t(...)` or `translate(...)`."""
    keys = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("t", "translate"):
                keys.add(node.args[0].value)
    return keys


def test_every_entry_has_both_languages_and_keys_are_unique():
    merged = i18n.catalog()
    assert merged and all(set(texts) >= {"zh", "en"} and texts["zh"] and texts["en"] for texts in merged.values())
    seen: dict[str, str] = {}
    for path in sorted(i18n.LOCALES_DIR.glob("*.json")):
        for key in json.loads(path.read_text(encoding="utf-8")):
            assert key not in seen, f"{key} in {seen.get(key)} and {path.name}"
            seen[key] = path.name
    assert set(seen) == set(merged)


def test_zh_and_en_have_the_same_placeholders():
    import string

    for key, texts in i18n.catalog().items():
        fields = {
            lang: {name for _, name, _, _ in string.Formatter().parse(texts[lang]) if name} for lang in i18n.LANGUAGES
        }
        assert fields["zh"] == fields["en"], key


def test_the_catalog_refuses_an_entry_missing_a_language(tmp_path, monkeypatch):
    (tmp_path / "area.json").write_text(json.dumps({"x.only_zh": {"zh": "只有中文"}}), encoding="utf-8")
    monkeypatch.setattr(i18n, "LOCALES_DIR", tmp_path)
    i18n.catalog.cache_clear()
    try:
        with pytest.raises(i18n.CatalogError, match="x.only_zh.*en"):
            i18n.catalog()
        (tmp_path / "area.json").write_text(json.dumps({"x.k": {"zh": "中", "en": "e"}}), encoding="utf-8")
        (tmp_path / "other.json").write_text(json.dumps({"x.k": {"zh": "中", "en": "e"}}), encoding="utf-8")
        i18n.catalog.cache_clear()
        with pytest.raises(i18n.CatalogError, match="twice"):
            i18n.catalog()
    finally:
        monkeypatch.undo()
        i18n.catalog.cache_clear()


def test_translate_fills_placeholders_and_rejects_unknown_keys():
    assert i18n.translate("group.name", "zh", group=2) == "专家组 2"
    assert i18n.translate("group.name", "en", group=2) == "Expert group 2"
    with pytest.raises(KeyError):
        i18n.translate("no.such.key", "zh")


def test_the_scan_catches_bare_literals():
    sample = (
        "import streamlit as st\n"
        "st.title('Rubric')\n"
        "st.sidebar.button(f'Save {n}')\n"
        "left.text_input(label='名字')\n"
        "st.tabs(['One', t('x')])\n"
        "st.title(t('ok'))\n"
        "st.markdown(f'**{t(\"ok\")}**')\n"
        "st.text(case.text)\n"
    )
    found = bare_literals_in(sample)
    assert [line.split(": ", 1)[1] for line in found] == ["'Rubric'", "'Save '", "'名字'", "'One'"]


def test_no_page_has_a_bare_literal():
    files = _page_files()
    assert any(path.parent.name == "admin" for path in files) and any(path.parent.name == "ui" for path in files)
    problems = []
    for path in files:
        problems += bare_literals_in(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert problems == []


def test_every_catalog_key_a_page_uses_exists():
    merged = i18n.catalog()
    missing = []
    for path in [
        *_page_files(),
        *sorted((ROOT / "ui").glob("*.py")),
        ROOT / "streamlit_app.py",
    ]:
        missing += [
            f"{path.relative_to(ROOT)}: {key}"
            for key in _catalog_keys_used(path.read_text(encoding="utf-8"))
            if key not in merged
        ]
    assert missing == []
