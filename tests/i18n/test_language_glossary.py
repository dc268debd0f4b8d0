"""One vocabulary: every catalog entry uses the glossary's terms (i18n/glossary.json), never a synonym it replaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from i18n import LANGUAGES, catalog

GLOSSARY = Path(__file__).resolve().parents[2] / "i18n" / "glossary.json"


def _terms() -> list[dict]:
    return json.loads(GLOSSARY.read_text(encoding="utf-8"))["terms"]


def synonyms_in(text: str, lang: str) -> list[str]:
    """The replaced words `text` (in `lang`) still uses."""
    return [word for term in _terms() for word in term["replaces"][lang] if word in text]


def test_the_glossary_names_each_term_in_both_languages_once():
    terms = _terms()
    for lang in LANGUAGES:
        names = [term[lang] for term in terms]
        assert all(names) and len(names) == len(set(names)), lang
        replaced = [word for term in terms for word in term["replaces"][lang]]
        assert not set(replaced) & set(names), "a term cannot also be a synonym"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_catalog_entry_follows_the_glossary(lang):
    found = {key: synonyms_in(texts[lang], lang) for key, texts in catalog().items()}
    assert {key: words for key, words in found.items() if words} == {}


def test_a_synonym_is_caught():
    assert synonyms_in("命中标注：3 / 10", "zh") == ["命中标注"]
    assert synonyms_in("评测模型 A", "zh") == ["评测模型"]
    assert synonyms_in("Rubric writing 0/8", "en") == ["Rubric writing"]


@pytest.mark.parametrize(
    ("lang", "text"),
    [
        ("zh", "按 subject 分组"),
        ("zh", "时区：Asia/Shanghai"),
        ("zh", "日期（yyyy-mm-dd）"),
        ("zh", "MF1 热图"),
        ("zh", "数值：NaN"),
        ("en", "5 response(s) have criteria"),
        ("en", "1 warnings"),
    ],
)
def test_the_language_check_catches_the_phrases_readers_met(lang, text):
    from tests.support.language_leaks import Shown, leaks

    assert leaks([Shown("markdown", text)], lang)


def test_the_language_check_lets_proper_text_through():
    from tests.support.language_leaks import Shown, leaks

    assert not leaks([Shown("markdown", "5 responses have criteria; 1 warning")], "en")
    assert not leaks([Shown("markdown", "与金标准的宏 F1：0.512")], "zh")


def test_no_english_catalog_entry_dodges_its_plural():
    """ "5 response(s)" reads as a form to fill in; entries put the count after a label ("Rubrics waiting: 3")."""
    import re

    from i18n import catalog

    dodged = {key: texts["en"] for key, texts in catalog().items() if re.search(r"[A-Za-z]\(s\)", texts["en"])}
    assert dodged == {}
