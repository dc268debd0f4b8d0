"""User text inside Markdown-rendering labels, escaped so it shows as typed (no Streamlit import)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# Every ASCII punctuation character may be backslash-escaped in CommonMark; escaping all of them
# also defuses Streamlit's own extensions (`:color[…]`, `:material/…:`, emoji shortcodes, `$math$`).
_MARKDOWN_SPECIAL = re.compile(r"([!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])")
# GFM turns bare addresses into links even when their punctuation is escaped; an invisible
# word joiner inside "://", "www." and before "@" keeps them plain text that reads the same.
_AUTOLINK_PARTS = re.compile(r"(?<=\\:)(?=\\/\\/)|(?<=www)(?=\\\.)|(?=\\@)", re.IGNORECASE)
WORD_JOINER = "\u2060"

#: `t` bound to a language: a catalog key and its values in, the text out.
Translator = Callable[..., str]


def plain(text: Any) -> str:
    """`text` escaped for a Markdown-rendering label: shown as typed, never as markup."""
    value = "" if text is None else str(text)
    value = _MARKDOWN_SPECIAL.sub(r"\\\1", value)
    value = _AUTOLINK_PARTS.sub(WORD_JOINER, value)
    # A label is one line; a newline would start a new Markdown block.
    return " ".join(value.split())
