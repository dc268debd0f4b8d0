"""The audit log page names every field an audit writer of db/ records, in both languages: the page reads
"标注版本", never lock_version. The fields are found by reading db/'s code: every literal key of a dict (or
`dict(...)` keyword) passed as `before=`/`after=`, or built in a function whose name says it makes an audit
record (snapshot, digest, record)."""

from __future__ import annotations

import ast
from pathlib import Path

from i18n import catalog, translate

ROOT = Path(__file__).resolve().parents[2]


def _keys(node: ast.AST) -> set[str]:
    found: set[str] = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Dict):
            found |= {key.value for key in inner.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)}
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "dict":
            found |= {keyword.arg for keyword in inner.keywords if keyword.arg}
    return found


def audited_fields() -> set[str]:
    fields: set[str] = set()
    for path in (ROOT / "db").rglob("*.py"):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg in ("before", "after"):
                fields |= _keys(node.value)
            elif isinstance(node, ast.FunctionDef) and any(w in node.name for w in ("snapshot", "digest", "record")):
                fields |= _keys(node)
    return fields


def test_the_scan_finds_the_label_fields():
    assert {"met", "note", "lock_version", "rubric_version_id", "role", "user"} <= audited_fields()


def test_every_audited_field_has_a_name_in_both_languages():
    names = catalog()
    unnamed = sorted(
        field
        for field in audited_fields()
        if f"review.audit_log.field.{field}" not in names and f"judge.column.{field}" not in names
    )
    assert not unnamed, unnamed
    assert translate("review.audit_log.field.lock_version", "zh") != "lock_version"
