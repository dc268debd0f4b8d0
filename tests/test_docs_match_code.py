"""The map matches the house: every path and dotted name the docs cite exists, and the db rooms table is current.

docs/ARCHITECTURE.md, README.md and CONTRIBUTING.md name modules (`db/access/policies.py`) and objects
(`db.store.current_rubric.counts_sql`) in backticks; a move that forgets a doc fails here, as does a db
room whose docstring no longer matches the generated table (`python -m tools.architecture` rewrites it).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from tools import architecture

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["docs/ARCHITECTURE.md", "README.md", "CONTRIBUTING.md"]
#: Folders of the repository a doc may point into.
FOLDERS = (
    "db",
    "analysis",
    "ui",
    "annotate",
    "review",
    "dashboards",
    "admin",
    "cli",
    "demo",
    "judge",
    "i18n",
    "tests",
    "benchmarks",
    "tools",
    "docs",
    "deploy",
    ".streamlit",
)
#: Files a user writes on their own machine (the docs say how); the repository ships none of them.
WRITTEN_BY_USERS = {".streamlit/secrets.toml"}
#: What a run writes (screenshots, the browser tests' server log): absent from a fresh clone until the tests ran.
RUN_OUTPUTS = ("tests/artifacts",)
PACKAGES = (
    "db",
    "analysis",
    "ui",
    "annotate",
    "review",
    "dashboards",
    "admin",
    "cli",
    "demo",
    "judge",
    "i18n",
    "tools",
)
CODE = re.compile(r"`([^`\s]+)`")


def cited(text: str) -> list[str]:
    """The backticked words of a page, each cut at its first parenthesis or space-free call."""
    return [match.group(1).split("(")[0].rstrip(".,:;") for match in CODE.finditer(text)]


def cited_paths(text: str) -> set[str]:
    """Repository paths a page cites; a pattern such as `tests/db/<room>/` stands for many and is not one."""
    paths = {word for word in cited(text) if "/" in word and word.split("/")[0] in FOLDERS and "<" not in word}
    return {path for path in paths - WRITTEN_BY_USERS if not path.startswith(RUN_OUTPUTS)}


def cited_names(text: str) -> set[str]:
    return {
        word
        for word in cited(text)
        if "/" not in word
        and re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+", word)
        and word.split(".")[0] in PACKAGES
        and not word.endswith((".py", ".json", ".md", ".toml"))
    }


def resolves(dotted: str) -> bool:
    """A module, or an attribute reached from the longest importable module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_the_checks_see_a_missing_path_and_a_missing_name():
    text = "`db/rules/gold.py`, `db/no_such_room/x.py`, `db.rules.gold`, `db.rules.gold.no_such_rule`"
    assert {p for p in cited_paths(text) if not (ROOT / p).exists()} == {"db/no_such_room/x.py"}
    assert {n for n in cited_names(text) if not resolves(n)} == {"db.rules.gold.no_such_rule"}


@pytest.mark.parametrize("doc", DOCS)
def test_every_cited_path_exists(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    missing = sorted(path for path in cited_paths(text) if not any(ROOT.glob(path.rstrip("/"))))
    assert missing == []


@pytest.mark.parametrize("doc", DOCS)
def test_every_cited_module_and_object_exists(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert sorted(name for name in cited_names(text) if not resolves(name)) == []


def test_the_db_rooms_table_is_generated_from_the_code():
    text = architecture.DOC.read_text(encoding="utf-8")
    assert architecture.with_table(text) == text, "run `python -m tools.architecture`"
    rooms = {path.parent.name for path in (ROOT / "db").glob("*/__init__.py")}
    assert rooms == {room for layer in architecture.layers() for room in layer}
