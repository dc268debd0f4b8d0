"""Streamlit's own widget texts in the page's language.

Streamlit writes some texts of its widgets in English whatever the page: placeholders ("Choose an option"),
aria labels ("Help for …", "Remove …", "Open"), the uploader's button, the table toolbar and the chart
toolbar. It offers no setting for them, so a small component of ours (`chrome_language.js`) replaces exactly
those strings, whole values only, with the catalog's words (`chrome.*`: the English entry is Streamlit's own
string, the Chinese one ours) and restores them after a switch to English. Data never matches a whole
Streamlit string, so nothing a user typed or imported is rewritten.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from i18n import catalog, translate

_JS = (Path(__file__).with_name("chrome_language.js")).read_text(encoding="utf-8")
_component = st.components.v2.component("clinconsensus_chrome_language", js=_JS)

#: Catalog entries whose English text is Streamlit's own string with `{label}` in it (the widget's label).
PATTERN_PREFIX = "chrome.pattern."
EXACT_PREFIX = "chrome.text."


def chrome_texts(lang: str) -> dict[str, list[list[str]]]:
    """The pairs the component replaces on a page in `lang`: nothing on an English page (its originals come
    back), every `chrome.*` entry's (English, ours) otherwise."""
    if lang == "en":
        return {"exact": [], "patterns": []}
    exact, patterns = [], []
    for key, texts in sorted(catalog().items()):
        if key.startswith(EXACT_PREFIX):
            exact.append([texts["en"], translate(key, lang)])
        elif key.startswith(PATTERN_PREFIX):
            patterns.append([texts["en"], texts.get(lang) or texts["zh"]])
    return {"exact": exact, "patterns": patterns}


def speak_the_page_language(lang: str) -> None:
    """Mounts the component (renders nothing); call once per run."""
    _component(data={"lang": lang, **chrome_texts(lang)}, key="chrome_language")
