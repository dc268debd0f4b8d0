"""The one place with SQL in analysis: the database into the frames of `analysis.frames`, and the
data version that tells a cache those frames changed.

Frames (column names are the contract of the metric and export code):
- cases:     case_pk, case_id, difficulty, task, task_labels, subject, subject_labels, user_role,
             register, macro_category, n_criteria (+ clinical_context, user_request, extra with text=True)
- criteria:  case_pk, rubric_version_id, position, criterion_id, tags (+ text with text=True) — the
             current approved rubric of each case
- responses: response_id, case_pk, case_id, model, length (+ text with text=True)
- labels:    response_id, criterion_id, stage, group_no, met, user_id (+ note with notes=True) — the
             labels that count: made on their case's current rubric (db.store.current_rubric); a label on an
             older version is in no frame, so no figure or export can count it
- judge:     judge, response_id, criterion_id, met
- users:     user_id, username, role, group_no
- timings:   user_id, response_id, stage, active_ms, n_criteria (active time stored with each save)
- calibration: model, response_id (the calibration samples)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import SQLColumnExpression, Text, cast, literal_column, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from analysis.frames import Frames
from db.rules.enums import Stage
from db.rules.taxonomy import get_taxonomy
from db.store.current_rubric import counts_sql, current_versions
from db.store.models import CalibrationSample, Case, Criterion, DisagreementDraw, Label, LabelTiming, Response, User


def _read(engine: Engine, statement) -> pd.DataFrame:
    # Read-only: on SQLite a plain BEGIN, so a long report or export never holds the write lock.
    with engine.connect().execution_options(sqlite_read_only=True) as connection:
        return pd.read_sql(statement, connection)


def _read_plain(engine: Engine, statement) -> pd.DataFrame:
    """`_read` for a statement of integer and text columns only, through the driver's cursor: the values are
    what the driver returns (no datetime or boolean to convert), without a SQLAlchemy row each (the 75,000
    criteria of the full scale in about half the time)."""
    sql = str(statement.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    names = [column.name for column in statement.selected_columns]
    return pd.DataFrame.from_records(list(_fetch_all(engine, sql)), columns=names)


def load_cases(engine: Engine, *, text: bool = False) -> pd.DataFrame:
    columns: list[SQLColumnExpression[Any]] = [
        col(Case.id).label("case_pk"),
        col(Case.case_id),
        col(Case.difficulty),
        col(Case.task),
        col(Case.task_labels),
        col(Case.subject),
        col(Case.subject_labels),
        col(Case.user_role),
        col(Case.register_override).label("register_override"),
    ]
    if text:
        columns += [col(Case.clinical_context), col(Case.user_request), col(Case.extra)]
    cases = _read(engine, select(*columns).order_by(col(Case.id)))
    taxonomy = get_taxonomy()
    cases["task_labels"] = cases["task_labels"].map(_as_list)
    cases["subject_labels"] = cases["subject_labels"].map(_as_list)
    if text:
        cases["extra"] = cases["extra"].map(lambda value: _as_json(value) or {})
    cases["register"] = [
        taxonomy.register(role, override) for role, override in zip(cases["user_role"], cases["register_override"])
    ]
    cases["macro_category"] = cases["subject_labels"].map(taxonomy.macro_category)
    return cases.drop(columns="register_override")


def load_register_overrides(engine: Engine) -> pd.DataFrame:
    """case_pk, register_override: the optional `register` key as imported (None where absent)."""
    return _read(
        engine,
        select(col(Case.id).label("case_pk"), col(Case.register_override).label("register_override")).order_by(
            col(Case.id)
        ),
    )


def load_criteria(engine: Engine, *, text: bool = False) -> pd.DataFrame:
    # Tags as stored text, parsed once per distinct value (most criteria share a handful of tag lists).
    columns: list[SQLColumnExpression[Any]] = [
        col(Criterion.rubric_version_id),
        col(Criterion.position),
        col(Criterion.criterion_id),
        cast(col(Criterion.tags), Text).label("tags"),
    ]
    if text:
        columns.append(col(Criterion.text))
    current = current_versions().subquery()
    statement = select(*columns, current.c.case_pk).join(
        current, col(Criterion.rubric_version_id) == current.c.rubric_version_id
    )
    criteria = _read_plain(engine, statement)
    codes, distinct = pd.factorize(criteria["tags"])
    parsed = np.empty(len(distinct) + 1, dtype=object)
    for index, value in enumerate([*distinct, None]):
        parsed[index] = _as_list(value)
    criteria["tags"] = parsed[codes]
    return criteria.sort_values(["case_pk", "position"], ignore_index=True)


def load_criterion_texts(engine: Engine, case_ids) -> pd.DataFrame:
    """case_id, criterion_id, text of the current approved criteria of the named cases (for listing flagged ones)."""
    wanted = sorted({str(case_id) for case_id in case_ids})
    current = current_versions().subquery()
    parts = [pd.DataFrame(columns=["case_id", "criterion_id", "text"])]
    for start in range(0, len(wanted), 2000):
        statement = (
            select(col(Case.case_id), col(Criterion.criterion_id), col(Criterion.text))
            .join(current, col(Criterion.rubric_version_id) == current.c.rubric_version_id)
            .join(Case, col(Case.id) == current.c.case_pk)
            .where(col(Case.case_id).in_(wanted[start : start + 2000]))
        )
        parts.append(_read(engine, statement))
    return pd.concat(parts, ignore_index=True)


def load_responses(engine: Engine, *, text: bool = False) -> pd.DataFrame:
    columns = [
        col(Response.id).label("response_id"),
        col(Response.case_pk),
        col(Case.case_id),
        col(Response.model),
        col(Response.length),
    ]
    if text:
        columns.append(col(Response.text))
    statement = (
        select(*columns)
        .join(Case, col(Response.case_pk) == col(Case.id))
        .order_by(col(Response.case_pk), col(Response.model))
    )
    return _read(engine, statement)


def load_labels(engine: Engine, *, notes: bool = False) -> pd.DataFrame:
    columns: list[SQLColumnExpression[Any]] = [
        col(Label.response_id),
        col(Label.criterion_id),
        col(Label.stage),
        col(Label.group_no),
        col(Label.met),
        col(Label.user_id),
    ]
    if notes:
        columns.append(col(Label.note))
    labels = _read(engine, select(*columns).where(counts_sql(col(Label.rubric_version_id))))
    labels["met"] = labels["met"].astype(bool)
    return labels


_STAGES = np.array([Stage.annotation.value, Stage.check.value, Stage.adjudication.value, "unknown"], dtype=object)


def _met(column: str, dialect: str) -> str:
    """SQL for a boolean column as 0 or 1: SQLite stores booleans as those integers, PostgreSQL needs the cast."""
    return column if dialect == "sqlite" else f"CAST({column} AS INTEGER)"


def _packed_label(dialect: str) -> str:
    """One integer per label row (response, stage, group, met): with the criterion id, two values a row instead
    of five keep reading 1.8 M labels to about a second of CPU. Plain SQL, read through the driver's cursor."""
    return (
        "label.response_id * 64 + (CASE label.stage WHEN 'annotation' THEN 0 WHEN 'check' THEN 1 "
        f"WHEN 'adjudication' THEN 2 ELSE 3 END) * 16 + label.group_no * 2 + {_met('label.met', dialect)}"
    )


def _packed_judge(dialect: str) -> str:
    return f"response_id * 2 + {_met('met', dialect)}"


#: Above this many distinct values a text column is read as text: a CASE of more branches costs more
#: per row than the text (30 criterion ids and a few judges are the usual).
MAX_CODED_VALUES = 256
#: A code takes this many bits of the packed integer; the largest code says "a value not in the list".
_CODE_BITS = 9
_NOT_LISTED = (1 << _CODE_BITS) - 1


def _coded(column: str, values: list[str]) -> str:
    """SQL for `column` as the index of its value in `values`, `_NOT_LISTED` for any other value.

    The values come from the database itself (`_distinct`); quotes are doubled as SQL strings need."""
    branches = " ".join(
        "WHEN '{}' THEN {}".format(value.replace("'", "''"), index) for index, value in enumerate(values)
    )
    return f"(CASE {column} {branches} ELSE {_NOT_LISTED} END)" if values else str(_NOT_LISTED)


def _with_codes(packed: str, coded: list[tuple[str, list[str]]], dialect: str) -> str:
    """SQL for the integer `packed` with the codes of each (column, values) appended in turn, `_CODE_BITS`
    each: one integer a row crosses from the database, where three columns cost three joins and parses.

    64-bit arithmetic: PostgreSQL computes in the columns' 32-bit integers otherwise, and a response id of 70,000
    (the paper's scale is 27,500) times 2 ** 15 is out of their range. SQLite's integers are 64-bit."""
    if dialect != "sqlite":
        packed = f"CAST({packed} AS BIGINT)"
    for column, values in coded:
        packed = f"({packed}) * {1 << _CODE_BITS} + {_coded(column, values)}"
    return packed


def _split_codes(packed: np.ndarray, count: int) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """The packed integer before the codes and the `count` codes (in the order `_with_codes` appended them);
    None when a value was not listed (written between reading the list and the rows)."""
    codes = []
    for _ in range(count):
        codes.append(packed & _NOT_LISTED)
        packed = packed >> _CODE_BITS
    if any(bool((code == _NOT_LISTED).any()) for code in codes):
        return None
    return packed, codes[::-1]


def _packed_labels_sql(engine: Engine, *, users: bool, criteria: list[str] | None = None) -> str:
    """The packed read of the labels that count, as plain SQL for the driver's cursor: c0 the packed integer
    (with `criteria`, the criterion id's index in that list appended, `_with_codes`), then the criterion id as
    text when no list is given, then with `users` the user id.

    The rule is db.store.current_rubric's SQL form (a semi-join against the current versions, one per case):
    measured at full scale it costs no more CPU than reading every label, where carrying each label's
    version into numpy and filtering there cost half as much again.
    """
    dialect = engine.dialect.name
    columns: list[Any]
    if criteria is None:
        columns = [literal_column(_packed_label(dialect)).label("c0"), col(Label.criterion_id).label("c1")]
    else:
        packed = _with_codes(_packed_label(dialect), [("label.criterion_id", criteria)], dialect)
        columns = [literal_column(packed).label("c0")]
    if users:
        columns.append(col(Label.user_id).label(f"c{len(columns)}"))
    statement = select(*columns).where(counts_sql(Label.rubric_version_id))
    return str(statement.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))


def _packed_judge_sql(dialect: str, judges: list[str] | None = None, criteria: list[str] | None = None) -> str:
    """The packed read of the judge decisions: with both lists one integer a row (judge and criterion id as
    their indexes appended), else the integer, the judge and the criterion id as text."""
    if judges is None or criteria is None:
        return f"SELECT {_packed_judge(dialect)} AS c0, judge AS c1, criterion_id AS c2 FROM judge_decision"
    packed = _with_codes(_packed_judge(dialect), [("judge", judges), ("criterion_id", criteria)], dialect)
    return f"SELECT {packed} AS c0 FROM judge_decision"


def _distinct(engine: Engine, sql: str) -> list[str] | None:
    """The values `sql` selects, or None when there are too many to read as codes."""
    values = [row[0] for row in _fetch_all(engine, sql) if row[0] is not None]
    return values if len(values) <= MAX_CODED_VALUES else None


def _decoded(codes: np.ndarray, values: list[str], *, categorical: bool) -> np.ndarray | pd.Categorical[Any]:
    """The values of `codes`: an object array sharing one str object a value, or with `categorical` a
    Categorical of `values` (the codes kept, nothing to hash again)."""
    if categorical:
        return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(values))
    return np.asarray(values, dtype=object)[codes]


def _coded_read(
    engine: Engine,
    coded_sql: str | None,
    text_sql: str,
    lists: list[list[str] | None],
    *,
    integers: int = 0,
    categorical: bool,
) -> tuple[np.ndarray, list[Any], list[np.ndarray]] | None:
    """(packed integers, the listed columns decoded, `integers` more integer columns), or None without rows.

    `coded_sql` selects c0 carrying the codes of `lists` (`_with_codes`) and the integers; it is read when
    every list is known. When a list is missing (too many values) or a value was not listed, `text_sql` is
    read instead: c0 the bare integer, then the listed columns as text, then the integers.
    """
    if coded_sql is not None and all(values is not None for values in lists):
        columns = _read_columns(engine, coded_sql, "i" * (1 + integers))
        if not columns:
            return None
        split = _split_codes(columns[0], len(lists))
        if split is not None:
            packed, codes = split
            decoded = [_decoded(code, values or [], categorical=categorical) for code, values in zip(codes, lists)]
            return packed, decoded, columns[1:]
    columns = _read_columns(engine, text_sql, "i" + "s" * len(lists) + "i" * integers)
    if not columns:
        return None
    return columns[0], columns[1 : 1 + len(lists)], columns[1 + len(lists) :]


_CRITERION_IDS_SQL = "SELECT DISTINCT criterion_id FROM criterion"
#: The judges' names, each found by one step down the index that starts with the judge (the unique
#: (judge, response_id, criterion_id)): a handful of index lookups where `SELECT DISTINCT judge` reads every
#: decision.
_JUDGES_SQL = (
    "WITH RECURSIVE judges(name) AS ("
    "SELECT min(judge) FROM judge_decision UNION ALL "
    "SELECT (SELECT min(judge) FROM judge_decision WHERE judge > judges.name) FROM judges WHERE judges.name IS NOT NULL"
    ") SELECT name FROM judges WHERE name IS NOT NULL"
)
#: Strings of a column are joined with this separator in the database: ids and names never hold a
#: control character (db.rules.records refuses them), so it cannot stand inside a value.
_UNIT_SEPARATOR = "\x1f"


def _fetch_all(engine: Engine, sql: str) -> Sequence[Any]:
    """Every row of `sql`, through the driver's cursor (no per-row SQLAlchemy objects)."""
    with engine.connect().execution_options(sqlite_read_only=True) as connection:
        cursor = connection.connection.cursor()
        try:
            cursor.execute(sql)
            return cursor.fetchall()
        finally:
            cursor.close()


def _read_columns(engine: Engine, sql: str, kinds: str) -> list[np.ndarray]:
    """Every column of `sql` (named c0, c1, …; `kinds`: "i" integer, "s" string, one letter a column) as a
    numpy array (integers as int64, strings as objects); [] when it has no row.

    The database joins each column into one text in a single pass (`group_concat` in SQLite, `string_agg`
    in PostgreSQL: every aggregate of one statement sees the rows in the same order), and numpy parses
    the integers in C: no Python tuple a row (docs/performance.md). A text longer than the database allows
    (about 1 GB) falls back to the rows.

    Not through a columnar driver with a SQLite library of its own (ADBC): two copies of SQLite in one
    process do not share their POSIX locks, so closing one's file released the other's locks under the
    server's open connections (sqlite.org "How To Corrupt An SQLite Database File", §2.2.1); pages then
    read stale queues.
    """
    sqlite = engine.dialect.name == "sqlite"
    aggregates = ["count(*)"]
    for index, kind in enumerate(kinds):
        if kind == "i":
            aggregates.append(f"group_concat(c{index}, ',')" if sqlite else f"string_agg(c{index}::text, ',')")
        else:
            aggregates.append(
                f"group_concat(ifnull(c{index}, ''), char(31))"
                if sqlite
                else f"string_agg(coalesce(c{index}, ''), chr(31))"
            )
    try:
        (joined,) = _fetch_all(engine, f"SELECT {', '.join(aggregates)} FROM ({sql}) AS packed")
    except engine.dialect.loaded_dbapi.Error as error:  # the driver's own errors: the cursor is the driver's
        if "too big" not in str(error) and "out of memory" not in str(error):
            raise
        return _columns_of_rows(_fetch_all(engine, sql))
    count, texts = int(joined[0]), joined[1:]
    if not count:
        return []
    columns = [
        np.fromstring(text, dtype=np.int64, sep=",") if kind == "i" else _shared_strings(text)
        for kind, text in zip(kinds, texts, strict=True)
    ]
    if any(len(column) != count for column in columns):  # a NULL integer would shorten its column
        raise RuntimeError(f"packed read: columns of {[len(column) for column in columns]} values for {count} rows")
    return columns


def _shared_strings(text: str) -> np.ndarray:
    """The values of a joined text column as an object array in which equal values are one str object.

    A column holds few distinct values (30 criterion ids, a handful of judges) in millions of rows: one
    object a value rather than a row keeps the read's memory to the pointers, and hashing the values
    later (factorizing) cheap.
    """
    codes, uniques = pd.factorize(np.array(text.split(_UNIT_SEPARATOR), dtype=object))
    return np.asarray(uniques, dtype=object)[codes]


def _columns_of_rows(rows: Sequence[Any]) -> list[np.ndarray]:
    """The columns of fetched rows (integers as int64, strings as objects)."""
    if not rows:
        return []
    columns = np.array(rows, dtype=object).T
    return [column.astype(np.int64) if isinstance(column[0], int) else column for column in columns]


def _objects(values: np.ndarray | pd.Categorical) -> pd.Series:
    # An object Series as is: a bare object array in a frame would become pandas' string dtype (a copy).
    if isinstance(values, pd.Categorical):
        return pd.Series(values, copy=False)
    return pd.Series(values, dtype=object, copy=False)


def _stages(codes: np.ndarray, *, categorical: bool) -> pd.Series:
    """The stage of each packed stage code (0 annotation, 1 check, 2 adjudication, 3 other)."""
    if categorical:
        return pd.Series(pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(_STAGES.tolist())), copy=False)
    return _objects(_STAGES[codes])


def _frame_of(data: dict) -> pd.DataFrame:
    """The frame of `data` (new arrays: no copy)."""
    # copy=False: copying and consolidating the columns doubled the peak of the read.
    return pd.DataFrame(data, copy=False)


def load_label_decisions(engine: Engine, *, users: bool = False, categorical: bool = False) -> pd.DataFrame:
    """The label frame without user_id and note (response_id, criterion_id, stage, group_no, met), read fast.

    Same rows and values as `load_labels(...)[those columns]` (strings as object columns); for the
    full-scale exports. With `users=True` also user_id: the frame of `load_labels()` (the report's).
    With `categorical=True` stage, and criterion_id when it was read as codes, are Categoricals of their few
    values, which the grid factorizes by their codes instead of hashing millions of strings.
    """
    # The criterion ids as codes: the 30 ids of a rubric, not 1.8 M strings, cross from the database.
    criteria = _distinct(engine, _CRITERION_IDS_SQL)
    read = _coded_read(
        engine,
        None if criteria is None else _packed_labels_sql(engine, users=users, criteria=criteria),
        _packed_labels_sql(engine, users=users),
        [criteria],
        integers=int(users),
        categorical=categorical,
    )
    if read is None:
        empty = {
            "response_id": np.array([], dtype=np.int64),
            "criterion_id": np.array([], dtype=object),
            "stage": np.array([], dtype=object),
            "group_no": np.array([], dtype=np.int64),
            "met": np.array([], dtype=bool),
        }
        if users:
            empty["user_id"] = np.array([], dtype=np.int64)
        return pd.DataFrame(empty)
    packed, (criterion_ids,), integers = read
    # Object columns as read: converting 1.8 M strings to pandas' string dtype costs more than the read.
    data = {
        "response_id": packed >> 6,
        "criterion_id": _objects(criterion_ids),
        "stage": _stages((packed >> 4) & 3, categorical=categorical),
        "group_no": (packed >> 1) & 7,
        "met": (packed & 1).astype(bool),
    }
    if users:
        data["user_id"] = integers[0]
    return _frame_of(data)


def load_label_notes(engine: Engine) -> pd.DataFrame:
    """response_id, criterion_id, stage, group_no, met, note of the labels that count and carry a note."""
    statement = (
        select(
            col(Label.response_id),
            col(Label.criterion_id),
            col(Label.stage),
            col(Label.group_no),
            col(Label.met),
            col(Label.note),
        )
        .where(col(Label.note).is_not(None))
        .where(col(Label.note) != "")
        .where(counts_sql(Label.rubric_version_id))
    )
    notes = _read(engine, statement)
    notes["met"] = notes["met"].astype(bool)
    return notes


def load_judge(engine: Engine, *, categorical: bool = False) -> pd.DataFrame:
    """judge, response_id, criterion_id, met (strings as object columns, or with `categorical` as
    `load_label_decisions` reads them), read fast like the labels."""
    judges, criteria = _distinct(engine, _JUDGES_SQL), _distinct(engine, _CRITERION_IDS_SQL)
    read = _coded_read(
        engine,
        None if judges is None or criteria is None else _packed_judge_sql(engine.dialect.name, judges, criteria),
        _packed_judge_sql(engine.dialect.name),
        [judges, criteria],
        categorical=categorical,
    )
    if read is None:
        return pd.DataFrame(
            {
                "judge": np.array([], dtype=object),
                "response_id": np.array([], dtype=np.int64),
                "criterion_id": np.array([], dtype=object),
                "met": np.array([], dtype=bool),
            }
        )
    packed, (judge_names, criterion_ids), _ = read
    data = {
        "judge": _objects(judge_names),
        "response_id": packed >> 1,
        "criterion_id": _objects(criterion_ids),
        "met": (packed & 1).astype(bool),
    }
    return _frame_of(data)


def load_users(engine: Engine) -> pd.DataFrame:
    return _read(engine, select(col(User.id).label("user_id"), col(User.username), col(User.role), col(User.group_no)))


def load_timings(engine: Engine) -> pd.DataFrame:
    """user_id, response_id, stage, active_ms, n_criteria: the active time stored with each save."""
    columns: list[SQLColumnExpression[Any]] = [
        col(LabelTiming.user_id),
        col(LabelTiming.response_id),
        col(LabelTiming.stage),
        col(LabelTiming.active_ms),
        col(LabelTiming.n_criteria),
    ]
    timings = _read(engine, select(*columns).order_by(col(LabelTiming.id)))
    return timings.astype({"user_id": np.int64, "response_id": np.int64, "active_ms": np.int64, "n_criteria": np.int64})


def load_frames(engine: Engine, *, text: bool = False, notes: bool = False) -> Frames:
    cases = load_cases(engine, text=text)
    criteria = load_criteria(engine, text=text)
    cases["n_criteria"] = cases["case_pk"].map(criteria.groupby("case_pk").size()).fillna(0).astype(int)
    return Frames(
        cases=cases,
        criteria=criteria,
        responses=load_responses(engine, text=text),
        # Categoricals: the frames go to the grid (analysis.grid.prepare), which only factorizes these columns.
        labels=load_labels(engine, notes=True) if notes else load_label_decisions(engine, users=True, categorical=True),
        judge=load_judge(engine, categorical=True),
        users=load_users(engine),
        timings=load_timings(engine),
        calibration=load_calibration_samples(engine),
    )


def load_calibration_samples(engine: Engine) -> pd.DataFrame:
    """model, response_id of every calibration sample."""
    columns: list[SQLColumnExpression[Any]] = [col(CalibrationSample.model), col(CalibrationSample.response_id)]
    samples = _read(engine, select(*columns).order_by(col(CalibrationSample.id)))
    return samples.astype({"model": object, "response_id": np.int64})


def load_disagreement_draws(engine: Engine) -> pd.DataFrame:
    """response_id of every response drawn where two judges disagree (`assign disagreements`)."""
    drawn = _read(engine, select(col(DisagreementDraw.response_id)).order_by(col(DisagreementDraw.id)))
    return drawn.astype({"response_id": np.int64})


def _as_json(value):
    if isinstance(value, str):
        import json

        return json.loads(value)
    return value


def _as_list(value) -> list:
    value = _as_json(value)
    return list(value) if value is not None else []


# The audit head -----------------------------------------------------------------------------------


def audit_head(engine: Engine) -> dict:
    """The audit log's head ({count, hash}) for an export's manifest: `audit verify --anchor` checks it later."""
    from db.access.audit import audit_head as head_of
    from db.store.engine import session_scope

    with session_scope(engine, read_only=True) as session:
        return head_of(session).as_dict()
