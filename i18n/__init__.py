"""One catalog for every user-visible string, in Chinese (default) and English.

The catalog is assembled from `i18n/locales/*.json` (one file per area, so each area edits its
own); every entry is `"key": {"zh": "…", "en": "…"}`. Keys are unique across files.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

LOCALES_DIR = Path(__file__).with_name("locales")
LANGUAGES = ("zh", "en")
DEFAULT_LANGUAGE = "zh"


class CatalogError(Exception):
    pass


@lru_cache(maxsize=1)
def catalog() -> dict[str, dict[str, str]]:
    merged: dict[str, dict[str, str]] = {}
    for path in sorted(LOCALES_DIR.glob("*.json")):
        entries = json.loads(path.read_text(encoding="utf-8"))
        for key, texts in entries.items():
            if key in merged:
                raise CatalogError(f"{path.name}: key {key!r} is defined twice")
            missing = [lang for lang in LANGUAGES if not texts.get(lang)]
            if missing:
                raise CatalogError(f"{path.name}: key {key!r} lacks {', '.join(missing)}")
            merged[key] = texts
    return merged


def translate(key: str, lang: str = DEFAULT_LANGUAGE, **values) -> str:
    """The text of `key` in `lang`, with `{name}` placeholders filled from `values`."""
    texts = catalog().get(key)
    if texts is None:
        raise KeyError(f"no catalog entry {key!r}")
    text = texts.get(lang) or texts[DEFAULT_LANGUAGE]
    return text.format(**values) if values else text
