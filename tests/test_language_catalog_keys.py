"""Refusals and audit words reach the page in the reader's language.

Every refusal the data layer raises names its catalog entry (`key`, `params` of db.errors) with every
placeholder filled; every audit entity and action the data layer writes has a catalog name; and
`ui.widgets.error_text` shows the entry, not the English message, with user text escaped.
"""

from __future__ import annotations

import ast
import string
from pathlib import Path

import pytest

import i18n
from db.audit import AUDIT_ACTIONS, AUDIT_ENTITIES
from db.enums import JudgeRunStatus

ROOT = Path(__file__).resolve().parent.parent
#: The data layer's refusals (db.errors and their subclasses defined in db/).
REFUSALS = {"PermissionDenied", "NotFound", "ValidationFailed", "StaleEdit", "RubricChanged", "DatabaseBusy"}
#: Modules only the command line reaches (backups): their English message is what the reader gets.
COMMAND_LINE_ONLY = {"db/backup.py"}


def _db_sources() -> list[Path]:
    return [
        path
        for path in sorted((ROOT / "db").rglob("*.py"))
        if "migrations" not in path.parts and str(path.relative_to(ROOT)) not in COMMAND_LINE_ONLY
    ]


def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def _refusal_raises(path: Path):
    source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Raise)
            and isinstance(node.exc, ast.Call)
            and getattr(node.exc.func, "id", None) in REFUSALS
        ):
            yield node.lineno, node.exc


def test_the_scan_finds_the_refusals():
    # The scan must see the modules that refuse most, or the test below would pass on nothing.
    counted = {path.name: len(list(_refusal_raises(path))) for path in _db_sources()}
    assert counted["rubrics.py"] >= 10 and counted["users.py"] >= 8 and counted["label_check.py"] >= 6


def test_every_refusal_names_a_catalog_entry_with_its_placeholders_filled():
    catalog = i18n.catalog()
    problems = []
    for path in _db_sources():
        for lineno, call in _refusal_raises(path):
            where = f"{path.relative_to(ROOT)}:{lineno}"
            keywords = {keyword.arg: keyword.value for keyword in call.keywords}
            key = keywords.get("key")
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                problems.append(f"{where}: no literal key=")
                continue
            if key.value not in catalog:
                problems.append(f"{where}: {key.value} is not in the catalog")
                continue
            params = keywords.get("params")
            given = set()
            if isinstance(params, ast.Dict):
                given = {k.value for k in params.keys if isinstance(k, ast.Constant)}
            elif params is not None:
                problems.append(f"{where}: params must be a literal dict")
            for lang in i18n.LANGUAGES:
                missing = _placeholders(catalog[key.value][lang]) - given
                if missing:
                    problems.append(f"{where}: {key.value} ({lang}) needs {sorted(missing)}")
    assert problems == []


def _written_audit_words() -> tuple[set[str], set[str]]:
    """Every literal `action=`/`entity=` (keyword or dict key) the data layer writes to the audit log."""
    actions, entities = set(), set()
    for path in _db_sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            pairs = []
            if isinstance(node, ast.Call):
                pairs = [(keyword.arg, keyword.value) for keyword in node.keywords]
            elif isinstance(node, ast.Dict):
                pairs = [(k.value, v) for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)]
            for name, value in pairs:
                texts = []
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    texts = [value.value]
                elif isinstance(value, ast.IfExp):
                    texts = [v.value for v in (value.body, value.orelse) if isinstance(v, ast.Constant)]
                if name == "action":
                    actions.update(texts)
                elif name == "entity":
                    entities.update(texts)
    return actions, entities


def test_every_audit_word_the_data_layer_writes_is_listed_and_named_in_both_languages():
    actions, entities = _written_audit_words()
    assert {"import", "replace", "approve", "deactivate", "reassign"} <= actions  # the scan sees the writers
    assert {"user", "rubric", "label", "judge_decision"} <= entities
    # The importers write the kind as the entity, the judge runner its status as the action.
    assert set(AUDIT_ACTIONS) >= actions | {status.value for status in JudgeRunStatus if status != "pending"}
    assert set(AUDIT_ENTITIES) >= entities | {"cases", "responses", "labels", "judge", "check", "adjudication"}
    catalog = i18n.catalog()
    missing = [f"workbench.audit_action.{a}" for a in AUDIT_ACTIONS if f"workbench.audit_action.{a}" not in catalog]
    missing += [f"workbench.audit_entity.{e}" for e in AUDIT_ENTITIES if f"workbench.audit_entity.{e}" not in catalog]
    assert missing == []


@pytest.fixture
def in_language(monkeypatch):
    from ui import widgets

    def use(lang: str):
        monkeypatch.setattr(widgets, "t", lambda key, **values: i18n.translate(key, lang, **values))

    return use


def test_error_text_shows_the_catalog_entry_in_the_readers_language(in_language):
    from db.errors import PermissionDenied, ValidationFailed
    from ui import widgets

    refusal = PermissionDenied("you cannot check your own labels", key="errors.check_own")
    in_language("zh")
    assert widgets.error_text(refusal) == i18n.translate(
        "error.generic", "zh", reason=i18n.translate("errors.check_own", "zh")
    )
    assert "check your own" not in widgets.error_text(refusal)
    in_language("en")
    assert "You cannot check your own labels." in widgets.error_text(refusal)

    # Codes among the parameters are named; user text is escaped for Markdown, kept as is for plain text.
    in_language("zh")
    role = PermissionDenied("role checker may not do this", key="errors.role_may_not", params={"role": "checker"})
    shown = widgets.error_text(role)
    assert i18n.translate("role.checker", "zh") in shown and "checker" not in shown
    named = ValidationFailed("x", key="errors.user_unknown", params={"username": "a_b*c"})
    assert "a\\_b\\*c" in widgets.error_text(named)
    assert "a_b*c" in widgets.error_text(named, markdown=False)
    # An error without a key still says why, as its message.
    assert "plain reason" in widgets.error_text(ValidationFailed("plain reason"))


def test_a_real_refusal_reads_in_chinese(engine, in_language):
    from db.engine import session_scope
    from db.errors import ValidationFailed
    from db.users import add_user
    from ui import widgets

    with session_scope(engine) as session, pytest.raises(ValidationFailed) as refused:
        add_user(session, username="x", role="annotator", group_no=1, password="long-enough-1", actor="t")
    in_language("zh")
    shown = widgets.error_text(refused.value)
    assert shown == i18n.translate(
        "error.generic", "zh", reason=i18n.translate(refused.value.key, "zh", **refused.value.params)
    )
    assert not any("a" <= ch.lower() <= "z" for ch in shown.replace("_", ""))  # no English left
