"""Which modules of the product write `label` rows: one, the label writer (db/label_rows/write.py), which every save
(annotation, check, adjudication) and the label importer's bulk load go through. This test fails when any other
module starts writing labels."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("db", "analysis", "ui", "annotate", "review", "dashboards", "admin", "cli", "judge", "demo", "i18n")

#: The one module that writes label rows.
LABEL_WRITERS = {
    "db/label_rows/write.py",
}

#: Names a module binds to the label table (the model, or its Core table), anywhere in it.
_TABLE = r"(\w+)\s*(?::[^=]*)?=\s*(?:SQLModel\.metadata\.tables\[[\"']label[\"']\]|table_of\(Label\))"
_TABLE_NAMES = re.compile(rf"^\s*{_TABLE}", re.M)
#: Those bound at a module's top level, which other modules may import.
_SHARED_TABLE_NAMES = re.compile(rf"^{_TABLE}", re.M)


def writes_labels(source: str, table_names: set[str] = frozenset()) -> bool:
    """Whether a module's source inserts, updates or deletes label rows (a statement on the table, a new Label
    row object, or the importers' bulk inserter on the label table). Raw SQL on `label` counts too.
    `table_names`: the names other modules bind to the table (a module may import one)."""
    names = {"Label", *table_names, *_TABLE_NAMES.findall(source)}
    alternatives = "|".join(sorted(map(re.escape, names)))
    statement = re.compile(rf"\b(?:insert|update|delete)\(\s*(?:{alternatives})\b")
    new_row = re.compile(r"(?<!class )\bLabel\(")
    bulk = re.compile(rf"\b\w*[Ii]nserter\w*\([^)]*\b(?:{alternatives})\b")
    raw_sql = re.compile(r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|COPY)\s+\"?label\"?\b", re.I)
    return any(pattern.search(source) for pattern in (statement, new_row, bulk, raw_sql))


def label_writers() -> set[str]:
    sources = {
        path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
        for room in PRODUCT
        for path in (ROOT / room).rglob("*.py")
        if "migrations" not in path.parts  # revisions write what their own schema needs, frozen
    }
    table_names = {name for source in sources.values() for name in _SHARED_TABLE_NAMES.findall(source)}
    return {name for name, source in sources.items() if writes_labels(source, table_names)}


def test_no_module_but_the_known_writers_writes_label_rows():
    assert label_writers() == LABEL_WRITERS


def test_the_scan_sees_each_way_of_writing_a_label():
    assert writes_labels("from db.store.models import Label\nsession.add(Label(response_id=1))")
    assert writes_labels("_T = SQLModel.metadata.tables['label']\nsession.execute(update(_T).values(met=True))")
    assert writes_labels("T = table_of(Label)\nconnection.execute(delete(T))")
    assert writes_labels("_BulkInserter(run, _LABEL_TABLE, cols)", {"_LABEL_TABLE"})
    assert writes_labels("LABEL_TABLE = SQLModel.metadata.tables['label']\nreturn inserter_for(LABEL_TABLE, COLUMNS)")
    assert writes_labels('connection.exec_driver_sql("UPDATE label SET met = 1")')
    assert not writes_labels("select(Label).where(col(Label.met))")
    assert not writes_labels("class Label(SQLModel, table=True):\n    pass")
