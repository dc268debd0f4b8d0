"""Writing in bulk inside one transaction: executemany on SQLite, COPY on PostgreSQL; the run context."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlmodel import Session

from db.access.audit import AuditWriter
from db.importers import import_summary
from db.importers.import_summary import _LABEL_TABLE, LOOKUP_BATCH, ImportSummary
from db.importers.reading import _Problems
from db.rules.progress_report import Progress

# Writing -------------------------------------------------------------------------------------


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
#: Rows per write to the COPY stream.
_COPY_BLOCK = 5_000
#: A chunk at least this large makes an import a bulk load (see `_BulkInserter`).
#: SQLite page cache for the importing connection during a bulk load (KiB), restored afterwards.
BULK_SQLITE_CACHE_KIB = 262_144


def _copy_value(value: Any) -> str:
    if value is None:
        return "\\N"
    kind = type(value)
    if kind is str:
        return value.translate(_COPY_ESCAPES)
    if kind is bool:
        return "t" if value else "f"
    if kind is int:
        return str(value)
    if kind is datetime:
        return value.isoformat()
    return str(value).translate(_COPY_ESCAPES)


def _copy_line(row: tuple) -> str:
    """One row in COPY's text format."""
    return "\t".join([_copy_value(value) for value in row]) + "\n"


class _BulkInserter:
    """Plain rows straight to the driver: executemany on SQLite, COPY on PostgreSQL.

    Rows are tuples in `columns` order holding values the driver stores as they are: ints, strings,
    bools, None, timestamps from `db_time`, JSON already serialised.

    PostgreSQL checks a foreign key with one query per inserted row, which costs more than the
    rest of a 1.65 M-row load together. Every reference has been looked up already, so a bulk
    load drops the table's foreign keys inside the import transaction and adds them back at the
    end, where PostgreSQL validates all rows in one pass (a failure rolls the whole import back).
    The table is locked for the rest of the import meanwhile.
    """

    def __init__(self, run: _Run, table, columns: list[str], copy_line=None) -> None:
        self.run = run
        self.copy_line = copy_line or _copy_line
        self.table = table
        self.dialect = run.connection.dialect.name
        self.dropped_keys: list[tuple[str, str]] | None = None
        self.analyzed = False
        names = ", ".join(_quote(c) for c in columns)
        if self.dialect == "postgresql":
            self.statement = f"COPY {_quote(table.name)} ({names}) FROM STDIN"
        else:
            marks = ", ".join("?" for _ in columns)
            self.statement = f"INSERT INTO {_quote(table.name)} ({names}) VALUES ({marks})"

    def insert(self, rows: list[tuple]) -> None:
        if not rows:
            return
        if len(rows) >= import_summary.BULK_ROWS:
            self.run.bulk_mode(self)
        cursor = _driver_connection(self.run.connection).cursor()
        try:
            if self.dialect == "postgresql":
                with cursor.copy(self.statement) as copy:
                    copy_line = self.copy_line
                    for block in _batches(rows, _COPY_BLOCK):
                        copy.write("".join([copy_line(row) for row in block]))
                if not self.analyzed and len(rows) >= import_summary.BULK_ROWS:
                    # The import reads back what it wrote, by key (the audit digests of judge decisions). A table
                    # PostgreSQL has no statistics of (new in this transaction) looks to it as if one judge's name
                    # picked out a few rows, so each read went through all of that judge's rows: an import grew
                    # with the square of the data. Statistics of the first large chunk (ANALYZE sees this
                    # transaction's rows and costs a sample of them) keep the reads to the keys asked for.
                    cursor.execute(f"ANALYZE {_quote(self.table.name)}")
                    self.analyzed = True
            else:
                cursor.executemany(self.statement, rows)
        finally:
            cursor.close()

    def drop_foreign_keys(self) -> None:
        if self.dialect != "postgresql" or self.dropped_keys is not None:
            return
        connection = self.run.connection
        self.dropped_keys = [
            (row[0], row[1])
            for row in connection.exec_driver_sql(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = %(table)s::regclass AND contype = 'f'",
                {"table": _quote(self.table.name)},
            )
        ]
        for name, _definition in self.dropped_keys:
            connection.exec_driver_sql(f"ALTER TABLE {_quote(self.table.name)} DROP CONSTRAINT {_quote(name)}")

    def restore_foreign_keys(self) -> None:
        for name, definition in self.dropped_keys or []:
            self.run.connection.exec_driver_sql(
                f"ALTER TABLE {_quote(self.table.name)} ADD CONSTRAINT {_quote(name)} {definition}"
            )
        self.dropped_keys = None


def db_time(connection: Connection, moment: datetime):
    """`moment` as a bulk insert hands it to the driver (SQLite stores text, COPY reads ISO 8601)."""
    if connection.dialect.name == "postgresql":
        return moment.isoformat()
    processor = _LABEL_TABLE.c.created_at.type._cached_bind_processor(connection.dialect)
    return processor(moment) if processor else moment


def _driver_connection(connection: Connection) -> DBAPIConnection:
    """The driver's connection under `connection`: bulk loads and pragmas talk to it directly."""
    driver = connection.connection.dbapi_connection
    assert driver is not None  # None only once the pool has invalidated it; an import holds it open
    return driver


def _dump_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, allow_nan=False)


def _batches(items: list, size: int = LOOKUP_BATCH) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass
class _Run:
    """What every importer needs while it runs."""

    session: Session
    connection: Connection
    source: str
    actor: str
    summary: ImportSummary
    problems: _Problems
    progress: Progress
    now: datetime
    stored_now: Any
    bulk_inserters: list = field(default_factory=list)
    sqlite_cache: int | None = None
    #: Annotation labels of a round whose feedback was opened may be changed (audited): `--override-freeze`.
    override_freeze: bool = False

    def bulk_mode(self, inserter: _BulkInserter) -> None:
        """A large load is under way: relax per-row checks that a final pass does faster."""
        if inserter not in self.bulk_inserters:
            self.bulk_inserters.append(inserter)
            inserter.drop_foreign_keys()
        if self.connection.dialect.name == "sqlite" and self.sqlite_cache is None:
            driver = _driver_connection(self.connection)
            self.sqlite_cache = driver.execute("PRAGMA cache_size").fetchone()[0]
            driver.execute(f"PRAGMA cache_size=-{BULK_SQLITE_CACHE_KIB}")

    def finish_bulk(self) -> None:
        for inserter in self.bulk_inserters:
            inserter.restore_foreign_keys()

    def release(self) -> None:
        # The connection goes back to the pool: leave it as it was found.
        if self.sqlite_cache is not None:
            _driver_connection(self.connection).execute(f"PRAGMA cache_size={self.sqlite_cache}")
            self.sqlite_cache = None

    def audit(self, rows: list[dict]) -> None:
        # A fresh writer each time: other writers (placeholder accounts) may have moved the chain's tail.
        if rows:
            AuditWriter(self.session, self.actor).record_many(rows)

    def writing(self) -> bool:
        return not self.problems.errors


def new_response_code(taken: set[str]) -> str:
    """A fresh opaque response code, unique among `taken` (which it joins).

    Random rather than derived from case and model: a code anyone could recompute from a
    model's name would unblind the annotators.
    """
    while True:
        code = "R" + secrets.token_hex(5).upper()
        if code not in taken:
            taken.add(code)
            return code
