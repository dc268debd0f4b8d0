"""Importers for cases, responses, labels and judge decisions (DESIGN §3.1–§3.4).

A file is read as a stream, one line at a time, validated, and written in chunks inside ONE
transaction: a file with any error lands nothing, and every error names the file, the line and
the field (`cases.jsonl line 4: rubrics has 29 criteria, 30 required`). Importing the same file
twice changes nothing; a changed record replaces the stored one and the old value goes to the
audit log.

Bulk rows (labels, judge decisions, criteria) go through the driver directly: executemany on
SQLite, COPY on PostgreSQL, so a 1.65 M-line labels file imports in well under a minute.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import secrets
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote

from sqlalchemy import and_, bindparam, func, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

from db import config, kept
from db.audit import AuditWriter
from db.contacts import EMAIL, ID_NUMBER, LANDLINE, MOBILE, find_contacts
from db.engine import session_scope
from db.errors import ClinConsensusError
from db.models import (NO_GROUP, Case, Criterion, JudgeDecision, Label, Response, Role, RubricStatus,
                       RubricVersion, Stage, User, utcnow)
from db.progress import Progress, no_progress
from db.taxonomy import get_taxonomy
from db.users import add_placeholder_user

KINDS = ("cases", "responses", "labels", "judge")
JUDGE_FORMATS = ("decisions", "local-judge", "official")
DIFFICULTIES = ("low", "medium", "high")
REGISTERS = ("lay", "professional")
STAGES = (Stage.annotation.value, Stage.check.value, Stage.adjudication.value)

#: Errors collected before reading stops; the first is the one-line reason.
MAX_ERRORS = 20
#: Contact-like findings listed one by one in the summary; the rest are counted.
MAX_LISTED_WARNINGS = 50
#: Rows validated before they are written (labels, judge decisions), and records (cases, responses).
ROW_CHUNK = 20_000
RECORD_CHUNK = 500
#: Ids per `IN (...)` lookup, well under SQLite's limit on bound parameters.
LOOKUP_BATCH = 500

_CASE_TABLE = Case.__table__
_RUBRIC_TABLE = RubricVersion.__table__
_CRITERION_TABLE = Criterion.__table__
_RESPONSE_TABLE = Response.__table__
_LABEL_TABLE = Label.__table__
_JUDGE_TABLE = JudgeDecision.__table__
_MISSING = object()


class ImportFailed(ClinConsensusError):
    """A file was refused and nothing landed; `errors[0]` is the one-line reason."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        super().__init__(self.errors[0])


# Summary -------------------------------------------------------------------------------------

@dataclass
class ImportSummary:
    kind: str
    source: str
    fmt: str | None = None
    records: int = 0
    inserted: int = 0
    replaced: int = 0
    unchanged: int = 0
    rubric_versions: int = 0
    criteria: int = 0
    unknown_task_labels: Counter = field(default_factory=Counter)
    unmapped_subjects: Counter = field(default_factory=Counter)
    placeholders: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    warning_count: int = 0
    relabel_needed: int = 0
    sha256: str = ""

    def noun(self) -> str:
        return {"cases": "cases", "responses": "responses", "labels": "labels"}.get(self.kind, "judge decisions")

    def lines(self) -> list[str]:
        shape = f" ({self.fmt})" if self.fmt else ""
        out = [f"{self.source}{shape}: {self.records:,} {self.noun()} read — {self.inserted:,} inserted, "
               f"{self.replaced:,} replaced, {self.unchanged:,} unchanged"]
        if self.rubric_versions:
            out.append(f"rubrics: {self.rubric_versions:,} new approved versions, {self.criteria:,} criteria")
        if self.unknown_task_labels:
            listed = ", ".join(f"{label} ({count})" for label, count in self.unknown_task_labels.most_common())
            out.append(f"task labels the taxonomy does not know, kept as given: {listed}")
        if self.unmapped_subjects:
            listed = ", ".join(f"{label} ({count})" for label, count in self.unmapped_subjects.most_common())
            out.append(f"first specialty labels with no macro-category (sliced under 'other'): {listed}")
        if self.placeholders:
            out.append(f"unknown usernames created as inactive accounts (no login until an admin sets a password): "
                       f"{', '.join(self.placeholders)}")
        if self.relabel_needed:
            out.append(f"warning: {self.relabel_needed:,} replaced responses already have labels made on the old text")
        if self.warning_count:
            out.append(f"warning: {self.warning_count:,} contact-like strings found — review them manually "
                       f"before any release:")
            out.extend(f"  {warning}" for warning in self.warnings)
            if self.warning_count > len(self.warnings):
                out.append(f"  … and {self.warning_count - len(self.warnings):,} more")
        return out


# Reading -------------------------------------------------------------------------------------

def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


#: Every phone or ID number `find_contacts` knows has three digits, a digit or separator, four digits
#: somewhere; text without that and without "@" is skipped, which saves most of the scanning time.
_DIGIT_GROUP = re.compile(r"\d\d\d[\d\- ]\d\d\d\d")
_raw_decode = json.JSONDecoder().raw_decode

#: How a warning names each kind of contact-like string.
CONTACT_KINDS = {ID_NUMBER: "an ID-card number", MOBILE: "a mobile phone number", LANDLINE: "a landline number",
                 EMAIL: "an e-mail address"}


class _Problems:
    """Errors and contact-like warnings of one file, each prefixed with the file and the line."""

    def __init__(self, source: str, summary: ImportSummary) -> None:
        self.source = source
        self.summary = summary
        self.errors: list[str] = []
        self.stopped = False

    def at(self, line: int | None, message: str) -> None:
        where = f"{self.source} line {line}" if line else self.source
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(f"{where}: {message}")
        else:
            self.stop()

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.errors.append(f"{self.source}: stopped after {MAX_ERRORS} errors")

    @property
    def full(self) -> bool:
        return len(self.errors) >= MAX_ERRORS

    def scan(self, line: int, field_name: str, text: str | None) -> None:
        if not text or ("@" not in text and _DIGIT_GROUP.search(text) is None):
            return
        for kind, masked in find_contacts(text):
            self.summary.warning_count += 1
            if len(self.summary.warnings) < MAX_LISTED_WARNINGS:
                self.summary.warnings.append(f"{self.source} line {line}: {field_name} contains "
                                             f"{CONTACT_KINDS.get(kind, kind)} ({masked})")

    def raise_if_any(self) -> None:
        if self.errors:
            raise ImportFailed(self.errors)


def _json_lines(stream: BinaryIO, problems: _Problems, digest) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line; bad lines are reported and skipped."""
    number = 0
    errors = problems.errors
    for raw in stream:
        number += 1
        digest.update(raw)
        if len(errors) >= MAX_ERRORS:
            problems.stop()
            return
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            problems.at(number, f"not valid UTF-8 (byte 0x{raw[error.start]:02x} at byte {error.start + 1} "
                                f"of the line)")
            continue
        if number == 1 and text.startswith("\ufeff"):
            text = text[1:]
        if not text or text.isspace():
            continue
        try:
            # The decoder's raw_decode skips json.loads' wrapping; anything unusual (leading blanks,
            # trailing data, an error) goes through json.loads for its standard message.
            try:
                record, end = _raw_decode(text)
                if end != len(text) and not text[end:].isspace():
                    record = json.loads(text)
            except json.JSONDecodeError:
                record = json.loads(text)
        except json.JSONDecodeError as error:
            problems.at(number, f"not valid JSON ({error.msg} at column {error.colno})")
            continue
        if type(record) is not dict:
            problems.at(number, f"each line must be a JSON object, found {_kind_of(record)}")
            continue
        yield number, record


def _present(record: dict, name: str, key: str, errors: list[str], optional: bool) -> Any:
    """The value of `key`, or _MISSING (reported unless the field is optional, where null counts as absent)."""
    value = record.get(key, _MISSING)
    if value is _MISSING or (optional and value is None):
        if not optional:
            errors.append(f"{name} is missing")
        return _MISSING
    return value


def _text(record: dict, key: str, errors: list[str], *, max_length: int | None = None, blank_ok: bool = False,
          optional: bool = False, prefix: str = "") -> str | None:
    name = prefix + key
    value = _present(record, name, key, errors, optional)
    if value is _MISSING:
        return None
    if type(value) is not str:
        errors.append(f"{name} must be a string, found {_kind_of(value)}")
        return None
    if not blank_ok and (not value or value.isspace()):
        errors.append(f"{name} is blank")
        return None
    if max_length is not None and len(value) > max_length:
        errors.append(f"{name} is longer than {max_length} characters")
        return None
    return value


def _text_list(record: dict, key: str, errors: list[str], *, prefix: str = "", optional: bool = False
               ) -> list[str] | None:
    name = prefix + key
    value = _present(record, name, key, errors, optional)
    if value is _MISSING:
        return None
    if type(value) is not list:
        errors.append(f"{name} must be a list of strings, found {_kind_of(value)}")
        return None
    for index, item in enumerate(value):
        if type(item) is not str:
            errors.append(f"{name}[{index}] must be a string, found {_kind_of(item)}")
            return None
        if not item or item.isspace():
            errors.append(f"{name}[{index}] is blank")
            return None
    return value


def _boolean(record: dict, key: str, errors: list[str], prefix: str = "") -> bool | None:
    value = record.get(key, _MISSING)
    if value is _MISSING:
        errors.append(f"{prefix}{key} is missing")
        return None
    if type(value) is not bool:
        errors.append(f"{prefix}{key} must be true or false, found {_kind_of(value)}")
        return None
    return value


# Writing -------------------------------------------------------------------------------------

def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
#: Rows per write to the COPY stream.
_COPY_BLOCK = 5_000
#: A chunk at least this large makes an import a bulk load (see `_BulkInserter`).
BULK_ROWS = ROW_CHUNK // 2
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

    def __init__(self, run: "_Run", table, columns: list[str], copy_line=None) -> None:
        self.run = run
        self.copy_line = copy_line or _copy_line
        self.table = table
        self.dialect = run.connection.dialect.name
        self.dropped_keys: list[tuple[str, str]] | None = None
        names = ", ".join(_quote(c) for c in columns)
        if self.dialect == "postgresql":
            self.statement = f"COPY {_quote(table.name)} ({names}) FROM STDIN"
        else:
            marks = ", ".join("?" for _ in columns)
            self.statement = f"INSERT INTO {_quote(table.name)} ({names}) VALUES ({marks})"

    def insert(self, rows: list[tuple]) -> None:
        if not rows:
            return
        if len(rows) >= BULK_ROWS:
            self.run.bulk_mode(self)
        cursor = self.run.connection.connection.dbapi_connection.cursor()
        try:
            if self.dialect == "postgresql":
                with cursor.copy(self.statement) as copy:
                    copy_line = self.copy_line
                    for block in _batches(rows, _COPY_BLOCK):
                        copy.write("".join([copy_line(row) for row in block]))
            else:
                cursor.executemany(self.statement, rows)
        finally:
            cursor.close()

    def drop_foreign_keys(self) -> None:
        if self.dialect != "postgresql" or self.dropped_keys is not None:
            return
        connection = self.run.connection
        self.dropped_keys = [(row[0], row[1]) for row in connection.exec_driver_sql(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = %(table)s::regclass AND contype = 'f'", {"table": _quote(self.table.name)})]
        for name, _definition in self.dropped_keys:
            connection.exec_driver_sql(f"ALTER TABLE {_quote(self.table.name)} DROP CONSTRAINT {_quote(name)}")

    def restore_foreign_keys(self) -> None:
        for name, definition in self.dropped_keys or []:
            self.run.connection.exec_driver_sql(
                f"ALTER TABLE {_quote(self.table.name)} ADD CONSTRAINT {_quote(name)} {definition}")
        self.dropped_keys = None


def db_time(connection: Connection, moment: datetime):
    """`moment` as a bulk insert hands it to the driver (SQLite stores text, COPY reads ISO 8601)."""
    if connection.dialect.name == "postgresql":
        return moment.isoformat()
    processor = _LABEL_TABLE.c.created_at.type._cached_bind_processor(connection.dialect)
    return processor(moment) if processor else moment


def _dump_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _batches(items: list, size: int = LOOKUP_BATCH) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


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

    def bulk_mode(self, inserter: _BulkInserter) -> None:
        """A large load is under way: relax per-row checks that a final pass does faster."""
        if inserter not in self.bulk_inserters:
            self.bulk_inserters.append(inserter)
            inserter.drop_foreign_keys()
        if self.connection.dialect.name == "sqlite" and self.sqlite_cache is None:
            driver = self.connection.connection.dbapi_connection
            self.sqlite_cache = driver.execute("PRAGMA cache_size").fetchone()[0]
            driver.execute(f"PRAGMA cache_size=-{BULK_SQLITE_CACHE_KIB}")

    def finish_bulk(self) -> None:
        for inserter in self.bulk_inserters:
            inserter.restore_foreign_keys()

    def release(self) -> None:
        # The connection goes back to the pool: leave it as it was found.
        if self.sqlite_cache is not None:
            self.connection.connection.dbapi_connection.execute(f"PRAGMA cache_size={self.sqlite_cache}")
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


# Cases ---------------------------------------------------------------------------------------

CASE_FIELDS = ("case_id", "difficulty", "task", "task_labels", "subject", "subject_labels", "user_role",
               "clinical_context", "user_request", "rubrics")
OPTIONAL_CASE_FIELDS = ("register",)
#: Stored case columns compared on re-import (`register` is the column of the optional key).
_CASE_COLUMNS = ("difficulty", "task", "task_labels", "subject", "subject_labels", "user_role",
                 "clinical_context", "user_request", "register", "extra")


def _check_case(record: dict, taxonomy, summary: ImportSummary) -> tuple[dict | None, list[str]]:
    errors: list[str] = []
    case_id = _text(record, "case_id", errors, max_length=64)
    difficulty = record.get("difficulty", _MISSING)
    if difficulty is _MISSING:
        errors.append("difficulty is missing")
    elif difficulty not in DIFFICULTIES:
        errors.append(f"difficulty must be low, medium or high, found {difficulty!r}")
    task = _text(record, "task", errors, max_length=128, blank_ok=True)
    task_labels = _text_list(record, "task_labels", errors)
    subject = _text(record, "subject", errors, max_length=128, blank_ok=True)
    subject_labels = _text_list(record, "subject_labels", errors)
    user_role = _text(record, "user_role", errors, max_length=128, blank_ok=True)
    clinical_context = _text(record, "clinical_context", errors)
    user_request = _text(record, "user_request", errors)
    register = record.get("register")
    if register is not None and register not in REGISTERS:
        errors.append(f"register must be lay or professional, found {register!r}")
    criteria = _check_rubric(record, errors)
    if errors:
        return None, errors

    canonical_labels: list[str] = []
    for label in task_labels:
        theme = taxonomy.canonical_theme(label)
        if theme is None:
            summary.unknown_task_labels[label] += 1
            theme = label
        if theme not in canonical_labels:
            canonical_labels.append(theme)
    if subject_labels and taxonomy.macro_category(subject_labels) == "other":
        summary.unmapped_subjects[subject_labels[0]] += 1
    known = set(CASE_FIELDS) | set(OPTIONAL_CASE_FIELDS)
    return {
        "case_id": case_id, "difficulty": difficulty, "task": task, "task_labels": canonical_labels,
        "subject": subject, "subject_labels": list(subject_labels), "user_role": user_role,
        "clinical_context": clinical_context, "user_request": user_request, "register": register,
        "extra": {key: value for key, value in record.items() if key not in known},
        "criteria": criteria,
    }, errors


def _check_rubric(record: dict, errors: list[str]) -> list[tuple[str, str, list[str]]] | None:
    rubrics = record.get("rubrics", _MISSING)
    if rubrics is _MISSING:
        errors.append("rubrics is missing")
        return None
    if type(rubrics) is not list:
        errors.append(f"rubrics must be a list, found {_kind_of(rubrics)}")
        return None
    size = config.RUBRIC_SIZE
    if rubrics and len(rubrics) != size:
        errors.append(f"rubrics has {len(rubrics)} criteria, {size} required (or none, to author them in the app)")
        return None
    criteria: list[tuple[str, str, list[str]]] = []
    first_index: dict[str, int] = {}
    for index, item in enumerate(rubrics):
        prefix = f"rubrics[{index}]."
        if type(item) is not dict:
            errors.append(f"rubrics[{index}] must be an object, found {_kind_of(item)}")
            continue
        criterion_id = _text(item, "criterion_id", errors, max_length=64, prefix=prefix)
        text = _text(item, "criterion", errors, prefix=prefix)
        tags = _text_list(item, "tags", errors, prefix=prefix, optional=True)
        if criterion_id is not None:
            if criterion_id in first_index:
                errors.append(f"{prefix}criterion_id {criterion_id!r} repeats rubrics[{first_index[criterion_id]}]")
                continue
            first_index[criterion_id] = index
        if criterion_id is not None and text is not None:
            criteria.append((criterion_id, text, list(tags or [])))
    return criteria


def _stored_case(row) -> dict:
    return {column: row._mapping[column] for column in _CASE_COLUMNS}


def _import_cases(run: _Run, records: Iterator[tuple[int, dict]]) -> None:
    taxonomy = get_taxonomy()
    first_line: dict[str, int] = {}
    chunk: list[tuple[int, dict]] = []
    for line, record in records:
        case, errors = _check_case(record, taxonomy, run.summary)
        for error in errors:
            run.problems.at(line, error)
        if case is None:
            continue
        if case["case_id"] in first_line:
            run.problems.at(line, f"case_id {case['case_id']!r} repeats line {first_line[case['case_id']]}")
            continue
        first_line[case["case_id"]] = line
        run.summary.records += 1
        for name in ("clinical_context", "user_request"):
            run.problems.scan(line, name, case[name])
        for position, (criterion_id, text, _tags) in enumerate(case["criteria"] or []):
            run.problems.scan(line, f"rubrics[{position}].criterion", text)
        chunk.append((line, case))
        if len(chunk) >= RECORD_CHUNK:
            _write_cases(run, chunk)
            chunk = []
            run.progress(line, None, "lines")
    _write_cases(run, chunk)


def _write_cases(run: _Run, chunk: list[tuple[int, dict]]) -> None:
    if not chunk or not run.writing():
        return
    connection = run.connection
    ids = [case["case_id"] for _line, case in chunk]
    existing = {row.case_id: row for row in connection.execute(
        select(_CASE_TABLE).where(_CASE_TABLE.c.case_id.in_(ids)))}
    new_rows, audit_rows, changed_ids = [], [], set()
    for _line, case in chunk:
        stored = existing.get(case["case_id"])
        values = {column: case[column] for column in _CASE_COLUMNS}
        if stored is None:
            new_rows.append({"case_id": case["case_id"], "created_at": run.now, **values})
            continue
        before = _stored_case(stored)
        changed = {column: value for column, value in values.items() if before[column] != value}
        if changed:
            connection.execute(update(_CASE_TABLE).where(_CASE_TABLE.c.id == stored.id).values(**changed))
            changed_ids.add(case["case_id"])
            audit_rows.append({"action": "update", "entity": "case", "entity_key": case["case_id"],
                               "before": {column: before[column] for column in changed}, "after": changed})
    if new_rows:
        connection.execute(insert(_CASE_TABLE), new_rows)
    run.audit(audit_rows)

    case_pk = dict(connection.execute(select(_CASE_TABLE.c.case_id, _CASE_TABLE.c.id)
                                      .where(_CASE_TABLE.c.case_id.in_(ids))).all())
    changed_ids |= _write_rubrics(run, [(case, case_pk[case["case_id"]]) for _line, case in chunk if case["criteria"]])
    run.summary.inserted += len(new_rows)
    existing_ids = set(existing)
    run.summary.replaced += len(changed_ids & existing_ids)
    run.summary.unchanged += len(existing_ids - changed_ids)


def _criteria_snapshot(criteria: list[tuple[str, str, list[str]]]) -> list[dict]:
    return [{"criterion_id": c, "criterion": text, "tags": tags} for c, text, tags in criteria]


def _write_rubrics(run: _Run, cases: list[tuple[dict, int]]) -> set[str]:
    """A new approved version for each case whose rubric differs from its newest version.

    Returns the case_ids that got one. A case imported without criteria keeps whatever rubric it has.
    """
    if not cases:
        return set()
    connection = run.connection
    pks = [pk for _case, pk in cases]
    latest: dict[int, tuple[int, int]] = {}
    for batch in _batches(pks):
        for row in connection.execute(select(_RUBRIC_TABLE.c.case_pk, _RUBRIC_TABLE.c.id, _RUBRIC_TABLE.c.version)
                                      .where(_RUBRIC_TABLE.c.case_pk.in_(batch))):
            if row.case_pk not in latest or row.version > latest[row.case_pk][1]:
                latest[row.case_pk] = (row.id, row.version)
    stored_criteria: dict[int, list[tuple[str, str, list[str]]]] = {}
    for batch in _batches([version_id for version_id, _version in latest.values()]):
        for row in connection.execute(select(_CRITERION_TABLE.c.rubric_version_id, _CRITERION_TABLE.c.criterion_id,
                                             _CRITERION_TABLE.c.text, _CRITERION_TABLE.c.tags)
                                      .where(_CRITERION_TABLE.c.rubric_version_id.in_(batch))
                                      .order_by(_CRITERION_TABLE.c.rubric_version_id, _CRITERION_TABLE.c.position)):
            stored_criteria.setdefault(row.rubric_version_id, []).append(
                (row.criterion_id, row.text, list(row.tags or [])))

    versions, audit_rows, renewed = [], [], set()
    for case, pk in cases:
        current = latest.get(pk)
        before = None
        if current is not None:
            old = stored_criteria.get(current[0], [])
            if old == case["criteria"]:
                continue
            before = {"version": current[1], "criteria": _criteria_snapshot(old)}
        version = current[1] + 1 if current else 1
        versions.append({"case_pk": pk, "version": version, "status": RubricStatus.approved.value,
                         "created_at": run.now, "lock_version": 1})
        renewed.add(case["case_id"])
        audit_rows.append({"action": "import", "entity": "rubric", "entity_key": case["case_id"], "before": before,
                           "after": {"version": version, "status": RubricStatus.approved.value,
                                     "criteria": _criteria_snapshot(case["criteria"])}})
    if not versions:
        return renewed
    connection.execute(insert(_RUBRIC_TABLE), versions)
    wanted = {(v["case_pk"], v["version"]) for v in versions}
    version_id = {}
    for batch in _batches(sorted({v["case_pk"] for v in versions})):
        for row in connection.execute(select(_RUBRIC_TABLE.c.id, _RUBRIC_TABLE.c.case_pk, _RUBRIC_TABLE.c.version)
                                      .where(_RUBRIC_TABLE.c.case_pk.in_(batch))):
            if (row.case_pk, row.version) in wanted:
                version_id[row.case_pk] = row.id
    rows = [(version_id[pk], position, criterion_id, text, _dump_json(tags))
            for case, pk in cases if case["case_id"] in renewed
            for position, (criterion_id, text, tags) in enumerate(case["criteria"], 1)]
    _BulkInserter(run, _CRITERION_TABLE,
                  ["rubric_version_id", "position", "criterion_id", "text", "tags"]).insert(rows)
    run.summary.rubric_versions += len(versions)
    run.summary.criteria += len(rows)
    run.audit(audit_rows)
    return renewed


# Responses -----------------------------------------------------------------------------------

def _case_pks(connection: Connection) -> dict[str, int]:
    return dict(connection.execute(select(_CASE_TABLE.c.case_id, _CASE_TABLE.c.id)).all())


def _import_responses(run: _Run, records: Iterator[tuple[int, dict]]) -> None:
    case_pk = _case_pks(run.connection)
    codes = set(run.connection.execute(select(_RESPONSE_TABLE.c.code)).scalars())
    first_line: dict[tuple[str, str], int] = {}
    chunk: list[tuple[int, int, str, str]] = []
    for line, record in records:
        errors: list[str] = []
        case_id = _text(record, "case_id", errors, max_length=64)
        model = _text(record, "model", errors, max_length=128)
        text = _text(record, "response", errors)
        if case_id is not None and case_id not in case_pk:
            errors.append(f"case_id {case_id!r} is not a known case (import the cases first)")
        for error in errors:
            run.problems.at(line, error)
        if errors:
            continue
        key = (case_id, model)
        if key in first_line:
            run.problems.at(line, f"model {model!r} for case_id {case_id!r} repeats line {first_line[key]}")
            continue
        first_line[key] = line
        run.summary.records += 1
        run.problems.scan(line, "response", text)
        chunk.append((line, case_pk[case_id], model, text))
        if len(chunk) >= RECORD_CHUNK:
            _write_responses(run, chunk, codes)
            chunk = []
            run.progress(line, None, "lines")
    _write_responses(run, chunk, codes)


def _write_responses(run: _Run, chunk: list[tuple[int, int, str, str]], codes: set[str]) -> None:
    if not chunk or not run.writing():
        return
    connection = run.connection
    pks = sorted({pk for _line, pk, _model, _text in chunk})
    existing = {}
    for row in connection.execute(select(_RESPONSE_TABLE.c.id, _RESPONSE_TABLE.c.case_pk, _RESPONSE_TABLE.c.model,
                                         _RESPONSE_TABLE.c.text).where(_RESPONSE_TABLE.c.case_pk.in_(pks))):
        existing[(row.case_pk, row.model)] = row
    case_ids = {pk: case_id for case_id, pk in connection.execute(
        select(_CASE_TABLE.c.case_id, _CASE_TABLE.c.id).where(_CASE_TABLE.c.id.in_(pks)))}
    new_rows, audit_rows, replaced_ids = [], [], []
    for _line, pk, model, text in chunk:
        stored = existing.get((pk, model))
        if stored is None:
            new_rows.append({"case_pk": pk, "model": model, "text": text, "length": len(text),
                             "code": new_response_code(codes), "created_at": run.now})
        elif stored.text == text:
            run.summary.unchanged += 1
        else:
            connection.execute(update(_RESPONSE_TABLE).where(_RESPONSE_TABLE.c.id == stored.id)
                               .values(text=text, length=len(text)))
            replaced_ids.append(stored.id)
            audit_rows.append({"action": "replace", "entity": "response", "entity_key": f"{case_ids[pk]}/{model}",
                               "before": {"text": stored.text, "length": len(stored.text)},
                               "after": {"text": text, "length": len(text)}})
    if new_rows:
        connection.execute(insert(_RESPONSE_TABLE), new_rows)
    run.summary.inserted += len(new_rows)
    run.summary.replaced += len(replaced_ids)
    if replaced_ids:
        run.summary.relabel_needed += connection.execute(
            select(func.count(func.distinct(_LABEL_TABLE.c.response_id)))
            .where(_LABEL_TABLE.c.response_id.in_(replaced_ids))).scalar_one()
    run.audit(audit_rows)


# Shared by labels and judge decisions --------------------------------------------------------

@dataclass
class _Targets:
    """Lookups for rows that point at a response and a criterion of its case's current rubric."""

    response: dict[tuple[str, str], tuple[int, int]]       # (case_id, model) -> (response id, case pk)
    criteria: dict[int, dict[str, int]]                    # case pk -> criterion_id -> position
    rubric_version: dict[int, int]                         # case pk -> current rubric version id
    known_cases: set[str]

    @classmethod
    def load(cls, connection: Connection) -> "_Targets":
        case_pk = _case_pks(connection)
        case_id_of = {pk: case_id for case_id, pk in case_pk.items()}
        response = {(case_id_of[row.case_pk], row.model): (row.id, row.case_pk) for row in connection.execute(
            select(_RESPONSE_TABLE.c.id, _RESPONSE_TABLE.c.case_pk, _RESPONSE_TABLE.c.model))}
        # The current rubric of a case is its newest approved version (what the analysis reads).
        newest = (select(_RUBRIC_TABLE.c.case_pk, func.max(_RUBRIC_TABLE.c.version).label("version"))
                  .where(_RUBRIC_TABLE.c.status == RubricStatus.approved.value)
                  .group_by(_RUBRIC_TABLE.c.case_pk).subquery())
        rubric_version = dict(connection.execute(
            select(_RUBRIC_TABLE.c.case_pk, _RUBRIC_TABLE.c.id).join(
                newest, and_(_RUBRIC_TABLE.c.case_pk == newest.c.case_pk,
                             _RUBRIC_TABLE.c.version == newest.c.version))).all())
        case_of_version = {version_id: pk for pk, version_id in rubric_version.items()}
        criteria: dict[int, dict[str, int]] = {}
        for batch in _batches(list(case_of_version), 5_000):
            for row in connection.execute(select(_CRITERION_TABLE.c.rubric_version_id, _CRITERION_TABLE.c.criterion_id,
                                                 _CRITERION_TABLE.c.position)
                                          .where(_CRITERION_TABLE.c.rubric_version_id.in_(batch))):
                criteria.setdefault(case_of_version[row.rubric_version_id], {})[row.criterion_id] = row.position
        return cls(response, criteria, rubric_version, set(case_pk))

    def locate(self, case_id: str, model: str, criterion_id: str, errors: list[str]
               ) -> tuple[int, int, int] | None:
        """(response id, case pk, criterion position), or None with the reason in `errors`."""
        found = self.response.get((case_id, model))
        if found is None:
            if case_id not in self.known_cases:
                errors.append(f"case_id {case_id!r} is not a known case")
            else:
                errors.append(f"model {model!r} has no response to case_id {case_id!r} (import the responses first)")
            return None
        response_id, case_pk = found
        positions = self.criteria.get(case_pk)
        if positions is None:
            errors.append(f"criterion_id {criterion_id!r}: case {case_id!r} has no approved rubric")
            return None
        position = positions.get(criterion_id)
        if position is None:
            errors.append(f"criterion_id {criterion_id!r} is not in the current rubric of case {case_id!r}")
            return None
        return response_id, case_pk, position


def _table_has_rows(connection: Connection, table) -> bool:
    return connection.execute(select(table.c.id).limit(1)).first() is not None


# Labels --------------------------------------------------------------------------------------

_LABEL_COLUMNS = ["response_id", "criterion_id", "stage", "group_no", "met", "user_id", "note", "rubric_version_id",
                  "created_at", "updated_at", "lock_version"]
_STAGE_INDEX = {stage: index for index, stage in enumerate(STAGES)}


def _label_copy_line(row: tuple) -> str:
    """`_copy_line` for label rows, whose types are known (most of the time of a bulk load is here)."""
    response_id, criterion_id, stage, group, met, user_id, note, version_id, created, updated, lock = row
    note_text = "\\N" if note is None else note.translate(_COPY_ESCAPES)
    return (f"{response_id}\t{criterion_id.translate(_COPY_ESCAPES)}\t{stage}\t{group}\t{'t' if met else 'f'}\t"
            f"{user_id}\t{note_text}\t{version_id}\t{created}\t{updated}\t{lock}\n")


def _check_label(record: dict, targets: _Targets) -> tuple[tuple | None, list[str]]:
    """The row as (case_id, model, criterion_id, stage, group, met, annotator, note, response id, case pk,
    criterion position), or None and the errors.

    The first test accepts a well-formed row in one expression (most of a 1.65 M-line file);
    anything it does not accept goes through the field-by-field checks that name the problem.
    """
    get = record.get
    case_id, model, criterion_id, annotator = get("case_id"), get("model"), get("criterion_id"), get("annotator")
    met, stage, group, note = get("met"), get("stage"), get("group"), get("note")
    if (type(case_id) is str and type(model) is str and type(criterion_id) is str and type(annotator) is str
            and type(met) is bool and (note is None or type(note) is str)
            and ((stage == "annotation" or stage == "check") and type(group) is int and (group == 1 or group == 2)
                 or stage == "adjudication" and group is None)
            and 0 < len(case_id) <= 64 and 0 < len(model) <= 128 and 0 < len(criterion_id) <= 64
            and 0 < len(annotator) <= 64 and not case_id.isspace() and not model.isspace()
            and not criterion_id.isspace() and not annotator.isspace()):
        found = targets.response.get((case_id, model))
        if found is not None:
            position = targets.criteria.get(found[1], {}).get(criterion_id)
            if position is not None:
                return (case_id, model, criterion_id, stage, NO_GROUP if group is None else group, met, annotator,
                        note or None, found[0], found[1], position), []
    return _diagnose_label(record, targets)


def _diagnose_label(record: dict, targets: _Targets) -> tuple[tuple | None, list[str]]:
    errors: list[str] = []
    case_id = _text(record, "case_id", errors, max_length=64)
    model = _text(record, "model", errors, max_length=128)
    criterion_id = _text(record, "criterion_id", errors, max_length=64)
    met = _boolean(record, "met", errors)
    stage = record.get("stage", _MISSING)
    group = record.get("group", None)
    if stage is _MISSING:
        errors.append("stage is missing")
    elif type(stage) is not str or stage not in _STAGE_INDEX:
        errors.append(f"stage must be annotation, check or adjudication, found {stage!r}")
    elif stage == "adjudication":
        if group is not None:
            errors.append(f"group must be null for an adjudication, found {group!r}")
        group = NO_GROUP
    elif group is None:
        errors.append(f"group is {'missing' if 'group' not in record else 'null'}: {stage} labels belong "
                      f"to expert group 1 or 2")
    elif type(group) is not int or group not in (1, 2):
        errors.append(f"group must be 1 or 2, found {group!r}")
    annotator = _text(record, "annotator", errors, max_length=64)
    note = _text(record, "note", errors, optional=True, blank_ok=True)
    if errors:
        return None, errors
    located = targets.locate(case_id, model, criterion_id, errors)
    if located is None:
        return None, errors
    response_id, case_pk, position = located
    return (case_id, model, criterion_id, stage, group, met, annotator, note or None, response_id, case_pk,
            position), errors


def _import_labels(run: _Run, records: Iterator[tuple[int, dict]]) -> None:
    connection = run.connection
    targets = _Targets.load(connection)
    users = {row.username: row.id for row in connection.execute(select(User.__table__.c.username, User.__table__.c.id))}
    had_labels = _table_has_rows(connection, _LABEL_TABLE)
    inserter = _BulkInserter(run, _LABEL_TABLE, _LABEL_COLUMNS, copy_line=_label_copy_line)
    problems, errors_so_far, stamp = run.problems, run.problems.errors, run.stored_now
    rubric_version, stage_index = targets.rubric_version, _STAGE_INDEX
    seen: set[int] = set()
    # Rows as the label table takes them; beside them, for replacements only, what the audit log names.
    rows: list[tuple] = []
    names: list[tuple[str, str, str]] = []
    count = 0
    for line, record in records:
        row, errors = _check_label(record, targets)
        if row is None:
            for error in errors:
                problems.at(line, error)
            continue
        case_id, model, criterion_id, stage, group, met, annotator, note, response_id, case_pk, position = row
        key = (((response_id << 16) | position) << 4) | (stage_index[stage] << 2) | group
        if key in seen:
            problems.at(line, f"criterion_id {criterion_id!r}: a second {stage} label for case_id {case_id!r}, "
                              f"model {model!r}{'' if group == NO_GROUP else f', group {group}'} (one per file)")
            continue
        seen.add(key)
        count += 1
        if note:
            problems.scan(line, "note", note)
        if errors_so_far:
            continue
        user_id = users.get(annotator)
        if user_id is None:
            role = Role.annotator.value if stage == Stage.annotation else Role.checker.value
            user_id = users[annotator] = add_placeholder_user(
                run.session, username=annotator, role=role, group_no=None if group == NO_GROUP else group,
                actor=run.actor).id
            run.summary.placeholders.append(annotator)
        rows.append((response_id, criterion_id, stage, group, met, user_id, note, rubric_version[case_pk],
                     stamp, stamp, 1))
        if had_labels:
            names.append((case_id, model, annotator))
        if len(rows) >= ROW_CHUNK:
            _write_labels(run, rows, names, inserter, had_labels)
            rows, names = [], []
            run.progress(line, None, "lines")
    run.summary.records += count
    _write_labels(run, rows, names, inserter, had_labels)


def _write_labels(run: _Run, rows: list[tuple], names: list[tuple[str, str, str]], inserter: _BulkInserter,
                  had_labels: bool) -> None:
    if not rows or not run.writing():
        return
    kept.touch(run.session, {row[0] for row in rows})
    if not had_labels:
        # Nothing was stored before this import and the file has no repeats: every row is new.
        inserter.insert(rows)
        run.summary.inserted += len(rows)
        return
    connection = run.connection
    existing: dict[tuple, Any] = {}
    for batch in _batches(sorted({row[0] for row in rows})):
        for stored in connection.execute(
                select(_LABEL_TABLE.c.id, _LABEL_TABLE.c.response_id, _LABEL_TABLE.c.criterion_id,
                       _LABEL_TABLE.c.stage, _LABEL_TABLE.c.group_no, _LABEL_TABLE.c.met, _LABEL_TABLE.c.user_id,
                       _LABEL_TABLE.c.note, _LABEL_TABLE.c.rubric_version_id)
                .where(_LABEL_TABLE.c.response_id.in_(batch))):
            existing[(stored.response_id, stored.criterion_id, stored.stage, stored.group_no)] = stored
    username_of: dict[int, str] | None = None
    new_rows, changes, audit_rows = [], [], []
    for row, (case_id, model, annotator) in zip(rows, names):
        response_id, criterion_id, stage, group, met, user_id, note, version_id = row[:8]
        stored = existing.get((response_id, criterion_id, stage, group))
        if stored is None:
            new_rows.append(row)
            continue
        if stored.met == met and stored.user_id == user_id and (stored.note or None) == note:
            run.summary.unchanged += 1
            continue
        if username_of is None:
            username_of = dict(connection.execute(select(User.__table__.c.id, User.__table__.c.username)).all())
        changes.append({"label_id": stored.id, "met": met, "user_id": user_id, "note": note,
                        "rubric_version_id": version_id, "updated_at": run.now})
        group_key = "-" if group == NO_GROUP else str(group)
        audit_rows.append({
            "action": "replace", "entity": "label",
            "entity_key": f"{case_id}/{model}/{criterion_id}/{stage}/{group_key}",
            "before": {"met": stored.met, "note": stored.note, "annotator": username_of.get(stored.user_id),
                       "rubric_version_id": stored.rubric_version_id},
            "after": {"met": met, "note": note, "annotator": annotator, "rubric_version_id": version_id},
        })
    inserter.insert(new_rows)
    if changes:
        connection.execute(
            update(_LABEL_TABLE).where(_LABEL_TABLE.c.id == bindparam("label_id"))
            .values(met=bindparam("met"), user_id=bindparam("user_id"), note=bindparam("note"),
                    rubric_version_id=bindparam("rubric_version_id"), updated_at=bindparam("updated_at"),
                    lock_version=_LABEL_TABLE.c.lock_version + 1),
            changes)
    run.summary.inserted += len(new_rows)
    run.summary.replaced += len(changes)
    run.audit(audit_rows)


# Judge decisions -----------------------------------------------------------------------------

_JUDGE_COLUMNS = ["judge", "response_id", "criterion_id", "met", "extra"]
#: Keys of a plain decision row; anything else is kept in JudgeDecision.extra.
_DECISION_KEYS = {"judge", "case_id", "model", "criterion_id", "met"}
#: Local-judge output rows echo the judge-items input; those keys are stored already
#: (case, response, criterion) and are not copied into every decision.
_LOCAL_JUDGE_KEYS = {"judge", "judge_model", "case_id", "model", "criterion_id", "criteria_met"}
_ECHOED_INPUT_KEYS = {"user_message", "response", "rubric_item"}
_JUDGE_NAME_KEYS = ("judge", "judge_model")


def _judge_name(record: dict, option: str | None, errors: list[str]) -> str | None:
    for key in _JUDGE_NAME_KEYS:
        if key in record:
            return _text(record, key, errors, max_length=128)
    if option:
        return option
    errors.append("judge is missing (give the judge's name in the file or with --judge NAME)")
    return None


def _detect_judge_format(head: bytes) -> str:
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):
        return "official"
    first = head.split(b"\n", 1)[0]
    if b'"criteria_met"' in first:
        return "local-judge"
    return "decisions"


class _JudgeWriter:
    def __init__(self, run: _Run, targets: _Targets) -> None:
        self.run = run
        self.targets = targets
        self.had_rows = _table_has_rows(run.connection, _JUDGE_TABLE)
        self.inserter = _BulkInserter(run, _JUDGE_TABLE, _JUDGE_COLUMNS)
        self.seen: set[tuple[str, int]] = set()
        self.chunk: list[tuple] = []

    def add(self, line: int, judge: str, case_id: str, model: str, criterion_id: str, met: bool,
            extra: dict | None, where: str = "") -> None:
        errors: list[str] = []
        located = self.targets.locate(case_id, model, criterion_id, errors)
        if located is None:
            for error in errors:
                self.run.problems.at(line, where + error)
            return
        response_id, _case_pk, position = located
        key = (judge, (response_id << 16) | position)
        if key in self.seen:
            self.run.problems.at(line, f"{where}criterion_id {criterion_id!r}: a second decision of judge {judge!r} "
                                       f"for case_id {case_id!r}, model {model!r} (one per file)")
            return
        self.seen.add(key)
        self.run.summary.records += 1
        if self.run.writing():
            self.chunk.append((judge, response_id, criterion_id, met, extra or None, case_id, model))
            if len(self.chunk) >= ROW_CHUNK:
                self.flush()
                self.run.progress(line, None, "lines")

    def flush(self) -> None:
        chunk, self.chunk = self.chunk, []
        if not chunk or not self.run.writing():
            return
        connection = self.run.connection
        existing = {}
        if self.had_rows:
            response_ids = sorted({row[1] for row in chunk})
            for batch in _batches(response_ids):
                for stored in connection.execute(
                        select(_JUDGE_TABLE.c.id, _JUDGE_TABLE.c.judge, _JUDGE_TABLE.c.response_id,
                               _JUDGE_TABLE.c.criterion_id, _JUDGE_TABLE.c.met, _JUDGE_TABLE.c.extra)
                        .where(_JUDGE_TABLE.c.response_id.in_(batch))):
                    existing[(stored.judge, stored.response_id, stored.criterion_id)] = stored
        new_rows, changes, audit_rows = [], [], []
        for judge, response_id, criterion_id, met, extra, case_id, model in chunk:
            stored = existing.get((judge, response_id, criterion_id))
            if stored is None:
                new_rows.append((judge, response_id, criterion_id, met, _dump_json(extra)))
            elif stored.met == met and (stored.extra or None) == extra:
                self.run.summary.unchanged += 1
            else:
                changes.append({"decision_id": stored.id, "met": met, "extra": extra})
                audit_rows.append({"action": "replace", "entity": "judge_decision",
                                   "entity_key": f"{judge}/{case_id}/{model}/{criterion_id}",
                                   "before": {"met": stored.met, "extra": stored.extra},
                                   "after": {"met": met, "extra": extra}})
        self.inserter.insert(new_rows)
        if changes:
            connection.execute(update(_JUDGE_TABLE).where(_JUDGE_TABLE.c.id == bindparam("decision_id"))
                               .values(met=bindparam("met"), extra=bindparam("extra")), changes)
        self.run.summary.inserted += len(new_rows)
        self.run.summary.replaced += len(changes)
        self.run.audit(audit_rows)


def _import_judge_rows(run: _Run, records: Iterator[tuple[int, dict]], fmt: str, judge_option: str | None) -> None:
    writer = _JudgeWriter(run, _Targets.load(run.connection))
    met_key = "met" if fmt == "decisions" else "criteria_met"
    consumed = _DECISION_KEYS if fmt == "decisions" else _LOCAL_JUDGE_KEYS | _ECHOED_INPUT_KEYS
    for line, record in records:
        get = record.get
        judge = get("judge") if "judge" in record else get("judge_model") if "judge_model" in record else judge_option
        case_id, model, criterion_id, met = get("case_id"), get("model"), get("criterion_id"), get(met_key)
        # A plainly valid row (most of a large file) skips the field-by-field checks that name problems.
        if not (type(met) is bool and _plain(judge, 128) and _plain(case_id, 64) and _plain(model, 128)
                and _plain(criterion_id, 64)):
            errors: list[str] = []
            judge = _judge_name(record, judge_option, errors)
            case_id = _text(record, "case_id", errors, max_length=64)
            model = _text(record, "model", errors, max_length=128)
            criterion_id = _text(record, "criterion_id", errors, max_length=64)
            if fmt == "decisions" and "met" not in record and "criteria_met" in record:
                errors.append("met is missing (this looks like local-judge output: use --format local-judge)")
            else:
                met = _boolean(record, met_key, errors)
            if errors:
                for error in errors:
                    run.problems.at(line, error)
                continue
        extra = {key: value for key, value in record.items() if key not in consumed}
        writer.add(line, judge, case_id, model, criterion_id, met, extra)
    writer.flush()


def _plain(value: Any, max_length: int) -> bool:
    """A non-blank string of at most `max_length` characters."""
    return type(value) is str and 0 < len(value) <= max_length and not value.isspace()


_OFFICIAL_NAME = re.compile(r"^(?P<model>.+)_judge\.json$")


def model_of_judgement_file(name: str) -> str | None:
    """The model of an official `<model>_judge.json` (percent-escapes undone, as the export writes them)."""
    named = _OFFICIAL_NAME.match(Path(name).name)
    return unquote(named.group("model")) if named else None


def _official_items(data: str, problems: _Problems) -> Iterator[tuple[int, Any]]:
    """(line, item) of each element of a top-level JSON list, without building the whole list twice."""
    decoder = json.JSONDecoder()
    whitespace = re.compile(r"[ \t\r\n]*")
    position = whitespace.match(data, 0).end()
    if not data.startswith("[", position):
        problems.at(1, "an official judgement file must be a JSON list of cases")
        return
    position = whitespace.match(data, position + 1).end()
    if data.startswith("]", position):
        return
    while True:
        line = data.count("\n", 0, position) + 1
        try:
            item, position = decoder.raw_decode(data, position)
        except json.JSONDecodeError as error:
            problems.at(error.lineno, f"not valid JSON ({error.msg} at column {error.colno})")
            return
        yield line, item
        position = whitespace.match(data, position).end()
        if data.startswith(",", position):
            position = whitespace.match(data, position + 1).end()
            continue
        if data.startswith("]", position):
            if data[whitespace.match(data, position + 1).end():]:
                problems.at(data.count("\n", 0, position) + 1, "not valid JSON (extra data after the list)")
            return
        problems.at(data.count("\n", 0, position) + 1, "not valid JSON (expected ',' or ']')")
        return


def _import_official(run: _Run, stream: BinaryIO, judge_option: str | None, digest) -> None:
    raw = stream.read()
    digest.update(raw)
    try:
        data = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        run.problems.at(line, f"not valid UTF-8 (byte 0x{raw[error.start]:02x})")
        return
    del raw
    file_model = model_of_judgement_file(run.source)
    if not judge_option:
        run.problems.at(None, "the judge's name is needed for an official judgement file (--judge NAME)")
        return
    writer = _JudgeWriter(run, _Targets.load(run.connection))
    seen_cases: dict[tuple[str, str], int] = {}
    for line, item in _official_items(data, run.problems):
        if type(item) is not dict:
            run.problems.at(line, f"each item must be an object, found {_kind_of(item)}")
            continue
        errors: list[str] = []
        case_id = _text(item, "case_id", errors, max_length=64)
        model = _text(item, "model", errors, max_length=128, optional=True) or file_model
        if model is None and not errors:
            errors.append("model is missing (name the file <model>_judge.json or give model in each item)")
        results = item.get("criteria_results", _MISSING)
        if results is _MISSING:
            errors.append("criteria_results is missing")
        elif type(results) is not list:
            errors.append(f"criteria_results must be a list, found {_kind_of(results)}")
        if errors:
            for error in errors:
                run.problems.at(line, error)
            continue
        if (case_id, model) in seen_cases:
            run.problems.at(line, f"case_id {case_id!r} repeats line {seen_cases[(case_id, model)]}")
            continue
        seen_cases[(case_id, model)] = line
        case_extra = {key: value for key, value in item.items()
                      if key not in {"case_id", "model", "criteria_results"}}
        for index, result in enumerate(results):
            prefix = f"criteria_results[{index}]."
            if type(result) is not dict:
                run.problems.at(line, f"criteria_results[{index}] must be an object, found {_kind_of(result)}")
                continue
            errors = []
            criterion_id = _text(result, "criterion_id", errors, max_length=64, prefix=prefix)
            met = _boolean(result, "criteria_met", errors, prefix=prefix)
            if errors:
                for error in errors:
                    run.problems.at(line, error)
                continue
            extra = {key: value for key, value in result.items() if key not in {"criterion_id", "criteria_met"}}
            if case_extra:
                extra["case"] = case_extra
            writer.add(line, judge_option, case_id, model, criterion_id, met, extra, where=prefix)
    writer.flush()


# Entry points --------------------------------------------------------------------------------

def import_file(engine: Engine, kind: str, path: str | Path, *, fmt: str | None = None, actor: str = "cli",
                progress: Progress = no_progress, judge: str | None = None) -> ImportSummary:
    """Import one file of `kind` (cases | responses | labels | judge) in one transaction.

    Raises ImportFailed (nothing written) on any bad line; returns what changed otherwise.
    `fmt` applies to judge files (decisions | local-judge | official; None: recognised from the
    content); `judge` names the judge where the file does not.
    """
    path = Path(path)
    if not path.is_file():
        raise ImportFailed([f"{path.name}: no such file"])
    with open(path, "rb") as stream:
        return import_stream(engine, kind, path.name, stream, fmt=fmt, actor=actor, progress=progress, judge=judge)


def import_stream(engine: Engine, kind: str, name: str, stream: BinaryIO | bytes, *, fmt: str | None = None,
                  actor: str = "cli", progress: Progress = no_progress, judge: str | None = None) -> ImportSummary:
    """As `import_file`, for an open binary stream or bytes (an uploaded file) called `name`."""
    if isinstance(stream, (bytes, bytearray)):
        stream = io.BytesIO(stream)
    if kind not in KINDS:
        raise ImportFailed([f"{name}: unknown kind {kind!r} (cases, responses, labels or judge)"])
    if kind != "judge" and fmt not in (None, "jsonl"):
        raise ImportFailed([f"{name}: --format {fmt} applies to judge files only"])
    if kind == "judge":
        if fmt is None:
            head = stream.peek(4096)[:4096] if hasattr(stream, "peek") else _peek(stream)
            fmt = _detect_judge_format(head)
        elif fmt not in JUDGE_FORMATS:
            raise ImportFailed([f"{name}: --format must be one of {', '.join(JUDGE_FORMATS)}, found {fmt!r}"])
    summary = ImportSummary(kind=kind, source=name, fmt=fmt if kind == "judge" else None)
    problems = _Problems(name, summary)
    digest = hashlib.sha256()

    class _Refused(Exception):
        pass

    try:
        with session_scope(engine) as session:
            connection = session.connection()
            now = utcnow()
            run = _Run(session=session, connection=connection, source=name, actor=actor, summary=summary,
                       problems=problems, progress=progress, now=now, stored_now=db_time(connection, now))
            try:
                if kind == "judge" and fmt == "official":
                    _import_official(run, stream, judge, digest)
                else:
                    records = _json_lines(stream, problems, digest)
                    if kind == "cases":
                        _import_cases(run, records)
                    elif kind == "responses":
                        _import_responses(run, records)
                    elif kind == "labels":
                        _import_labels(run, records)
                    else:
                        _import_judge_rows(run, records, fmt, judge)
                if problems.errors:
                    raise _Refused()
                run.finish_bulk()
            finally:
                run.release()
            summary.sha256 = digest.hexdigest()
            if summary.inserted or summary.replaced or summary.placeholders:
                run.audit([{"action": "import", "entity": kind, "entity_key": name[:255], "before": None,
                            "after": {"inserted": summary.inserted, "replaced": summary.replaced,
                                      "unchanged": summary.unchanged, "records": summary.records,
                                      "sha256": summary.sha256}}])
    except _Refused:
        problems.raise_if_any()
    except DBAPIError as error:
        reason = str(error.orig).strip().splitlines()[0] if error.orig is not None else str(error)
        raise ImportFailed([f"{name}: the database refused the import: {reason}"]) from error
    progress(summary.records, summary.records, "done")
    return summary


def _peek(stream: BinaryIO) -> bytes:
    position = stream.tell()
    head = stream.read(4096)
    stream.seek(position)
    return head
