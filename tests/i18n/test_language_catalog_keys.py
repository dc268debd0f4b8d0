"""Refusals and audit words reach the page in the reader's language.

Every refusal the data layer raises names its catalog entry (`key`, `params` of db.rules.errors) with every
placeholder filled; every audit entity and action the data layer writes has a catalog name; and
`ui.widgets.error_text` shows the entry, not the English message, with user text escaped.
"""

from __future__ import annotations

import ast
import string
from pathlib import Path

import pytest

import i18n
from db.access.audit import AUDIT_ACTIONS, AUDIT_ENTITIES
from db.rules.enums import JudgeRunStatus

ROOT = Path(__file__).resolve().parents[2]
#: The data layer's refusals (db.rules.errors and their subclasses defined in db/).
REFUSALS = {"PermissionDenied", "NotFound", "ValidationFailed", "StaleEdit", "RubricChanged", "DatabaseBusy"}
#: Modules only the command line reaches (backups): their English message is what the reader gets.
COMMAND_LINE_ONLY = {"db/store/backup.py"}


def _db_sources() -> list[Path]:
    return [
        path
        for path in sorted((ROOT / "db").rglob("*.py"))
        if "migrations" not in path.parts and str(path.relative_to(ROOT)) not in COMMAND_LINE_ONLY
    ]


def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def _refusal_raises(path: Path):
    """Every refusal built in `path`: raised where it is decided, or returned by a policy's rule."""
    source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in REFUSALS:
            yield node.lineno, node


def test_the_scan_finds_the_refusals():
    # The scan must see the modules that refuse most, or the test below would pass on nothing.
    counted = {path.name: len(list(_refusal_raises(path))) for path in _db_sources()}
    assert counted["authoring.py"] >= 10 and counted["users.py"] >= 8 and counted["policies.py"] >= 12


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
    from db.rules.errors import PermissionDenied, ValidationFailed
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
    from db.access.users import SYSTEM_ACTOR, add_user
    from db.rules.errors import ValidationFailed
    from db.store.engine import session_scope
    from ui import widgets

    with session_scope(engine) as session, pytest.raises(ValidationFailed) as refused:
        add_user(session, username="x", role="annotator", group_no=1, password="long-enough-1", actor=SYSTEM_ACTOR)
    in_language("zh")
    shown = widgets.error_text(refused.value)
    assert shown == i18n.translate(
        "error.generic", "zh", reason=i18n.translate(refused.value.key, "zh", **refused.value.params)
    )
    assert not any("a" <= ch.lower() <= "z" for ch in shown.replace("_", ""))  # no English left


# Import messages -----------------------------------------------------------------------------------

#: Families of catalog entries the data layer names with a computed last part, and every part it may compute.
COMPUTED_KEYS = {
    "import.kind.": ["null", "boolean", "number", "string", "list", "object"],
    "import.stage.": ["annotation", "check", "adjudication"],
    "import.summary.noun.": ["cases", "responses", "labels", "judge"],
    "import.field.": [
        "missing",
        "string_type",
        "bool_type",
        "list_type",
        "list_of_strings",
        "object_type",
        "string_too_long",
        "string_pattern_mismatch",
        "too_long",
        "too_short",
        "extra_forbidden",
        "one_of",
        "rubric_size",
        "adjudication_group",
        "forbidden_key",
        "invisible_char",
        "unstorable_char",
        "other",
    ],
    "role.": ["admin", "annotator", "checker"],
}


def _said_keys() -> tuple[set[str], set[str]]:
    """Literal keys of `Said(...)` and `key=` in db/, and the prefixes of computed ones (f-strings)."""
    literal, computed = set(), set()
    for path in _db_sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            candidates = [kw.value for kw in node.keywords if kw.arg == "key"]
            if getattr(node.func, "id", None) == "Said" and len(node.args) > 1:
                candidates.append(node.args[1])
            candidates += [c for v in candidates if isinstance(v, ast.IfExp) for c in (v.body, v.orelse)]
            for value in candidates:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    literal.add(value.value)
                elif isinstance(value, ast.JoinedStr) and isinstance(value.values[0], ast.Constant):
                    computed.add(value.values[0].value)
    return literal, computed


def test_every_message_key_of_the_data_layer_is_in_the_catalog():
    from db.rules.contacts import EMAIL, ID_NUMBER, LANDLINE, MOBILE

    literal, computed = _said_keys()
    assert {"import.at_line", "import.summary.read", "import.case_unknown", "import.not_json"} <= literal
    families = dict(COMPUTED_KEYS, **{"import.contact.": [EMAIL, ID_NUMBER, MOBILE, LANDLINE]})
    assert computed <= set(families), computed - set(families)
    wanted = literal | {prefix + part for prefix, parts in families.items() for part in parts}
    assert sorted(key for key in wanted if key not in i18n.catalog()) == []


def _lines_in(lang: str, monkeypatch, lines) -> list[str]:
    from ui import widgets

    monkeypatch.setattr(widgets, "t", lambda key, **values: i18n.translate(key, lang, **values))
    return [widgets.said(line) for line in lines]


def _english_words(text: str) -> list[str]:
    """English words outside code spans and file names (what a Chinese reader should not meet)."""
    import re

    text = re.sub(r"`[^`]*`", " ", text.replace("\\", ""))
    text = re.sub(r"[\w.-]+\.jsonl?|CC-\d+|model-[a-z]+|0x[0-9a-f]+|'[^']*'", " ", text)
    return [word for word in re.findall(r"[A-Za-z]{3,}", text) if word not in ("JSON", "UTF", "null")]


def test_a_refused_file_is_explained_in_chinese_and_in_english(engine, tmp_path, monkeypatch):
    import json

    from db.importers import ImportFailed, import_file
    from tests.support.import_samples import case_record

    good = case_record("CC-0001")
    lines = [
        json.dumps(good, ensure_ascii=False),
        json.dumps(case_record("CC-0002", difficulty="extreme"), ensure_ascii=False),
        json.dumps({k: v for k, v in case_record("CC-0003").items() if k != "task"}, ensure_ascii=False),
        json.dumps(case_record("CC-0004", task=5), ensure_ascii=False),
        json.dumps(case_record("CC-0005", surprise=1), ensure_ascii=False),  # kept with the case
        "[1, 2]",
        "{not json",
        json.dumps(good, ensure_ascii=False),
    ]
    path = tmp_path / "bad_cases.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8") + b"\n\xff\xfe\n")
    with pytest.raises(ImportFailed) as refused:
        import_file(engine, "cases", path)
    errors = refused.value.errors
    assert len(errors) == 7  # one per bad line (an extra key is kept, not refused); the command line's English
    assert errors[0].startswith("bad_cases.jsonl line 2: difficulty must be")

    chinese = _lines_in("zh", monkeypatch, errors)
    for shown in chinese:
        assert shown.startswith("bad\\_cases\\.jsonl 第 ") and _english_words(shown) == [], shown
    assert any("`difficulty`" in shown for shown in chinese)
    assert any(i18n.translate("import.kind.number", "zh") in shown for shown in chinese)  # task=5
    english = _lines_in("en", monkeypatch, errors)
    assert all(shown.startswith("bad\\_cases\\.jsonl line ") for shown in english)
    assert english[1].replace("\\", "") == "bad_cases.jsonl line 3: `task` is missing"


def test_an_import_summary_reads_in_the_readers_language(engine, tmp_path, monkeypatch):
    import json

    from db.importers import import_file
    from tests.support.import_samples import case_record

    path = tmp_path / "cases.jsonl"
    records = [case_record("CC-0001"), case_record("CC-0002", clinical_context="请联系 13812345678 复诊。")]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n", encoding="utf-8")
    summary = import_file(engine, "cases", path)
    assert summary.lines()[0].startswith("cases.jsonl: 2 cases read — 2 inserted")  # the command line's English
    chinese = _lines_in("zh", monkeypatch, summary.lines())
    assert chinese[0].replace("\\", "") == i18n.translate(
        "import.summary.read",
        "zh",
        file="cases.jsonl",
        records="2",
        what=i18n.translate("import.summary.noun.cases", "zh"),
        inserted="2",
        replaced="0",
        unchanged="0",
    )
    assert any(i18n.translate("import.contact.mobile_phone", "zh") in line for line in chinese)
    assert all(_english_words(line) == [] for line in chinese), chinese


def test_the_uploader_states_our_limit_and_streamlit_enforces_the_same(app_database):
    import tomllib

    from db.rules.limits import MAX_UPLOAD_MB
    from tests.support.apptest_helpers import open_page, signed_in
    from tests.support.factories import make_user

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["server"]["maxUploadSize"] == MAX_UPLOAD_MB
    from db.store.engine import session_scope

    with session_scope(app_database) as session:
        make_user(session, "boss", role="admin", group_no=None)
    for lang in i18n.LANGUAGES:
        app = open_page(signed_in(app_database, "boss", lang=lang), "admin-import")
        [uploader] = [node for node in _tree_nodes(app) if getattr(node, "type", None) == "file_uploader"]
        assert uploader.proto.max_upload_size_mb == MAX_UPLOAD_MB
        stated = i18n.translate("language.upload_limit", lang, mb=MAX_UPLOAD_MB)
        assert stated in [caption.value for caption in app.caption]
        assert uploader.proto.help == i18n.translate("admin.import.file.help", lang, mb=MAX_UPLOAD_MB)
        assert f"{MAX_UPLOAD_MB} MB" in stated and f"{MAX_UPLOAD_MB} MB" in uploader.proto.help


def _tree_nodes(app):
    stack = [app._tree]
    while stack:
        node = stack.pop()
        yield node
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            stack.extend(children.values())
