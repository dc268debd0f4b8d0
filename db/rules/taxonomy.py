"""The taxonomy of docs/REFERENCE.md §5, read from a JSON file an admin can edit without touching code.

`CLINCONSENSUS_TAXONOMY` names another file; the shipped one is `db/rules/taxonomy.json`.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from db.rules.config import get_settings

DEFAULT_TAXONOMY_FILE = Path(__file__).with_name("taxonomy.json")
LAY, PROFESSIONAL = "lay", "professional"
OTHER = "other"


def _key(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "").strip().casefold()


@dataclass(frozen=True)
class Taxonomy:
    raw: dict
    theme_by_key: dict[str, str] = field(default_factory=dict)
    family_of_theme: dict[str, str] = field(default_factory=dict)
    macro_by_specialty: dict[str, str] = field(default_factory=dict)
    professional_keywords: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, raw: dict) -> Taxonomy:
        theme_by_key: dict[str, str] = {}
        family_of_theme: dict[str, str] = {}
        for theme in raw["task_themes"]:
            family_of_theme[theme["id"]] = theme["family"]
            for name in [theme["id"], theme["en"], theme["zh"], *theme.get("aliases", [])]:
                theme_by_key[_key(name)] = theme["id"]
        macro_by_specialty = {
            _key(name): macro["id"]
            for macro in raw["macro_categories"]
            for name in [macro["id"], macro["en"], macro["zh"], *macro.get("specialties", [])]
        }
        keywords = tuple(_key(k) for k in raw["register"]["professional_keywords"])
        return cls(raw, theme_by_key, family_of_theme, macro_by_specialty, keywords)

    # Task themes -------------------------------------------------------------------------
    def canonical_theme(self, label: str) -> str | None:
        """The theme id for an id, English or Chinese name or alias; None when unknown."""
        return self.theme_by_key.get(_key(label))

    def theme_or_raw(self, label: str) -> str:
        """Canonical id where known, else the label as given (it is sliced under its raw name)."""
        return self.canonical_theme(label) or label

    def family(self, theme: str) -> str:
        """Capability family of a theme; a theme the taxonomy does not know is its own family."""
        canonical = self.canonical_theme(theme)
        return self.family_of_theme[canonical] if canonical else theme

    # Macro-category and register ---------------------------------------------------------
    def macro_category(self, subject_labels: list[str]) -> str:
        """From the FIRST specialty label (docs/REFERENCE.md §3.1); unmapped → "other"."""
        if not subject_labels:
            return OTHER
        return self.macro_by_specialty.get(_key(subject_labels[0]), OTHER)

    def register(self, user_role: str, override: str | None = None) -> str:
        if override in (LAY, PROFESSIONAL):
            return override
        role = _key(user_role)
        return PROFESSIONAL if any(keyword in role for keyword in self.professional_keywords) else LAY

    # Names for display -------------------------------------------------------------------
    def name(self, kind: str, item_id: str, lang: str = "zh") -> str:
        """Display name of an id in `kind` (task_themes, capability_families, macro_categories, …)."""
        entries = self.raw.get(kind, [])
        if kind == "register":
            entries = self.raw["register"]["values"]
        if kind == "macro_categories" and item_id == OTHER:
            return self.raw["other_macro_category"][lang]
        for entry in entries:
            if entry["id"] == item_id:
                return entry.get(lang, item_id)
        return item_id

    def failure_tags(self) -> list[dict]:
        return list(self.raw.get("failure_tags", []))


def taxonomy_file() -> Path:
    return get_settings().taxonomy or DEFAULT_TAXONOMY_FILE


@lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> Taxonomy:
    with open(path, encoding="utf-8") as handle:
        return Taxonomy.from_dict(json.load(handle))


def get_taxonomy() -> Taxonomy:
    """The taxonomy in force; re-read when its file changes."""
    path = taxonomy_file()
    return _load(str(path), path.stat().st_mtime)
