"""Labels replayed from the audit log against the label table, in bounded memory (1.65 M rows at full scale).

Each label is a row of five integers (response, criterion, stage, group, packed value) in compact
arrays, for the log's rows in log order and for the table's rows as read; names (case/model, criterion
ids, usernames, notes) are interned once. The log's last row per key is its state; the two sides are
compared with sorted arrays, and only differences are turned back into names.

Entries understood (their writers):
- `label` / `check` / `adjudication`, key `CASE/MODEL/CRITERION/STAGE/GROUP` (checker saves, label
  imports replacing a row): the label's met, note and user;
- `label`, key `CASE/CODE/annotation/gN`, after {"labels": {criterion: {met, note}}} (the annotator's
  save of a response; the user is the entry's actor);
- `labels`, after {"rows": [[case, model, criterion, stage, group, met, user, note], ...]} (bulk inserts).

The rubric version a label is stamped with is not in these entries: every writer stamps the version
current when it writes (a save against another is refused, an import stamps the current one, none
when the case has no approved version), so the replay reads it from the log's own order: the case's
newest approved version at the label's last entry, as the rubric entries fed before it say
(`RubricVersions`). A label whose stamp was changed or cleared by hand differs from that.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlmodel import Session, col

from db.rules.enums import NO_GROUP
from db.store.models import Case, Response, RubricVersion, User

LABEL_ENTITIES = ("label", "check", "adjudication", "labels")
STAGES = ("annotation", "check", "adjudication")
_STAGE = {name: index for index, name in enumerate(STAGES)}
_STREAM_ROWS = 20_000
#: Before the first row: unequal to anything a row holds.
_NOTHING: Any = object()
# Packed in SQL as `_Rows` packs them, read through the driver's cursor: few Python objects per row.
_PACKED_LABELS_SQL = (
    "SELECT response_id * 16 + (CASE stage WHEN 'annotation' THEN 0 WHEN 'check' THEN 1 ELSE 2 END) * 4 + group_no, "
    "criterion_id, user_id * 2 + CAST(met AS INTEGER), note, COALESCE(rubric_version_id, 0) FROM label"
)


def driver_blocks(session: Session, sql: str, size: int) -> Iterator[Sequence[Any]]:
    """Rows of `sql` in blocks, through the driver's cursor (server-side on PostgreSQL: bounded memory)."""
    driver = session.connection().connection.dbapi_connection
    assert driver is not None
    postgres = session.get_bind().dialect.name == "postgresql"
    cursor = driver.cursor(name="audit_replay") if postgres else driver.cursor()
    try:
        cursor.execute(sql)
        while block := cursor.fetchmany(size):
            yield block
    finally:
        cursor.close()


class _Interned:
    """Strings to small integers and back (0 is None)."""

    def __init__(self) -> None:
        self.index: dict[str | None, int] = {None: 0}
        self.names: list[str | None] = [None]

    def __call__(self, value: str | None) -> int:
        found = self.index.get(value)
        if found is None:
            found = self.index[value] = len(self.names)
            self.names.append(value)
        return found


class RubricVersions:
    """Each case's current rubric version as the log has it so far (its newest approved version number),
    kept by the rubric replay as it is fed, and read by the label replay for each label entry."""

    def __init__(self) -> None:
        self.statuses: dict[str, dict[int, str]] = {}
        self.current: dict[str, int] = {}

    def set_status(self, case_id: str, version: int, status: str) -> None:
        statuses = self.statuses.setdefault(case_id, {})
        statuses[version] = status
        approved = [number for number, said in statuses.items() if said == "approved"]
        if approved:
            self.current[case_id] = max(approved)
        else:
            self.current.pop(case_id, None)


class _Rows:
    """Label rows as four integer columns: place (response, stage, group), criterion, value (note, user, met),
    and the rubric version's id (0: none).

    place = response·16 + stage·4 + group; value = note·2³³ + user·2 + met (the SQL below packs the same).
    """

    def __init__(self) -> None:
        self.columns = [array("q") for _ in range(4)]

    def add(self, response: int, criterion: int, stage: int, group: int, value: int, version: int) -> None:
        self.columns[0].append((response << 4) | (stage << 2) | group)
        self.columns[1].append(criterion)
        self.columns[2].append(value)
        self.columns[3].append(version)

    def arrays(self) -> list[np.ndarray]:
        return [
            np.frombuffer(column, dtype=np.int64) if len(column) else np.zeros(0, np.int64) for column in self.columns
        ]


class LabelReplay:
    def __init__(self, session: Session, versions: RubricVersions) -> None:
        self.session = session
        self.versions = versions
        #: (case_id, version number) -> rubric_version.id; versions the table lacks get negative ids
        self.version_ids: dict[tuple[str, int], int] = {}
        self.version_names: dict[int, str] = {0: "none"}
        for version_id, case_id, number in session.connection().execute(
            select(col(RubricVersion.id), col(Case.case_id), col(RubricVersion.version)).join(
                Case, col(Case.id) == col(RubricVersion.case_pk)
            )
        ):
            self.version_ids[(case_id, number)] = version_id
            self.version_names[version_id] = f"{case_id} v{number}"
        self.criteria, self.notes = _Interned(), _Interned()
        self.response_names: dict[int, tuple[str, str]] = {}
        self.response_of: dict[tuple[str, str], int] = {}
        self.response_of_code: dict[tuple[str, str], int] = {}
        for response_id, case_id, model, code in session.connection().execute(
            select(col(Response.id), col(Case.case_id), col(Response.model), col(Response.code)).join(
                Case, col(Case.id) == col(Response.case_pk)
            )
        ):
            self.response_names[response_id] = (case_id, model)
            self.response_of[(case_id, model)] = response_id
            self.response_of_code[(case_id, code)] = response_id
        self.user_of = {
            name: user_id for user_id, name in session.connection().execute(select(col(User.id), col(User.username)))
        }
        self.user_names = {user_id: name for name, user_id in self.user_of.items()}
        self.logged = _Rows()
        self._synthetic = 0

    # Names that are not in the database get ids of their own, so they still compare and can be named.
    def _response(self, case_id: str, model: str) -> int:
        found = self.response_of.get((case_id, model))
        if found is None:
            self._synthetic += 1
            found = self.response_of[(case_id, model)] = -self._synthetic
            self.response_names[found] = (case_id, model)
        return found

    def _user(self, username: str | None) -> int:
        found = self.user_of.get(username or "")
        if found is None:
            found = self.user_of[username or ""] = max(self.user_names, default=0) + 1
            self.user_names[found] = username or "?"
        return found

    def _version(self, case_id: str) -> int:
        """The id of the case's current rubric version at this point of the log (0: none)."""
        number = self.versions.current.get(case_id)
        if number is None:
            return 0
        found = self.version_ids.get((case_id, number))
        if found is None:
            found = self.version_ids[(case_id, number)] = -len(self.version_names)
            self.version_names[found] = f"{case_id} v{number}"
        return found

    def _value(self, met: object, username: str | None, note: str | None) -> int:
        return (self.notes(note or None) << 33) | (self._user(username) << 1) | int(bool(met))

    def feed(self, entity: str, entity_key: str, actor: str, after: dict | None) -> None:
        after = after or {}
        add = self.logged.add
        if entity == "labels":
            self._feed_bulk(after.get("rows", []))
        elif entity == "label" and "labels" in after:
            case_id, code, stage, group = entity_key.rsplit("/", 3)
            response_id = self.response_of_code.get((case_id, code))
            if response_id is None:
                response_id = self._response(case_id, f"?{code}")
            version = self._version(case_id)
            for cid, value in after["labels"].items():
                add(
                    response_id,
                    self.criteria(cid),
                    _STAGE[stage],
                    int(group.lstrip("g")),
                    self._value(value["met"], actor, value.get("note")),
                    version,
                )
        else:
            head, cid, stage, group = entity_key.rsplit("/", 3)
            case_id, model = head.split("/", 1)
            user = after.get("user", after.get("annotator"))
            group_no = NO_GROUP if group in ("-", "", "None") else int(group)
            add(
                self._response(case_id, model),
                self.criteria(cid),
                _STAGE[stage],
                group_no,
                self._value(after["met"], user, after.get("note")),
                self._version(case_id),
            )

    def _feed_bulk(self, rows: list) -> None:
        # The hot loop of a full-scale replay (one pass per logged label): names looked up locally, and the
        # place (response, stage, group) and the user looked up again only where they change from the row before
        # (a writer logs a response's criteria one after another).
        criteria, notes, users = self.criteria.index, self.notes.index, self.user_of
        p_add, c_add, v_add, r_add = (column.append for column in self.logged.columns)
        current_of: dict[str, int] = {}
        last_case = last_model = last_stage = last_group = last_user = _NOTHING
        place = version = user_part = 0
        for case_id, model, cid, stage, group, met, user, note in rows:
            if case_id != last_case or model != last_model or stage != last_stage or group != last_group:
                known = current_of.get(case_id)
                version = known if known is not None else current_of.setdefault(case_id, self._version(case_id))
                response = self.response_of.get((case_id, model))
                if response is None:
                    response = self._response(case_id, model)
                place = (response << 4) | (_STAGE[stage] << 2) | group
                last_case, last_model, last_stage, last_group = case_id, model, stage, group
            if user != last_user:
                user_id = users.get(user)
                if user_id is None:
                    user_id = self._user(user)
                user_part, last_user = user_id << 1, user
            criterion = criteria.get(cid)
            if criterion is None:
                criterion = self.criteria(cid)
            value = user_part | (1 if met else 0)
            if note:
                note_id = notes.get(note)
                value |= (note_id if note_id is not None else self.notes(note)) << 33
            p_add(place)
            c_add(criterion)
            v_add(value)
            r_add(version)

    def _stored_rows(self) -> _Rows:
        rows = _Rows()
        criteria, notes = self.criteria, self.notes
        p_add, c_add, v_add, r_add = (column.append for column in rows.columns)
        for block in driver_blocks(self.session, _PACKED_LABELS_SQL, _STREAM_ROWS):
            for place, cid, value, note, version in block:
                criterion = criteria.index.get(cid)
                if criterion is None:
                    criterion = criteria(cid)
                if note:
                    note_id = notes.index.get(note)
                    value |= (note_id if note_id is not None else notes(note)) << 33
                p_add(place)
                c_add(criterion)
                v_add(value)
                r_add(version)
        return rows

    def compare(self, add_difference: Callable[[str], None]) -> int:
        """Names every label whose logged state differs from the table; returns the labels stored."""
        stored_keys, stored_values, stored_versions = self._keyed(self._stored_rows())
        logged_keys, logged_values, logged_versions = self._keyed(self.logged, keep_last=True)
        self.logged = _Rows()
        both, in_log, in_db = np.intersect1d(logged_keys, stored_keys, assume_unique=True, return_indices=True)
        differing = both[
            (logged_values[in_log] != stored_values[in_db]) | (logged_versions[in_log] != stored_versions[in_db])
        ]
        self._logged_versions, self._stored_versions = logged_versions, stored_versions
        only_log = np.setdiff1d(logged_keys, stored_keys, assume_unique=True)
        only_db = np.setdiff1d(stored_keys, logged_keys, assume_unique=True)
        for key in np.sort(np.concatenate([differing, only_log, only_db])).tolist():
            add_difference(self._describe(key, logged_keys, logged_values, stored_keys, stored_values))
        return len(stored_keys)

    def _keyed(self, rows: _Rows, *, keep_last: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        place, criterion, value, version = rows.arrays()
        self._offset = (self._synthetic + 1) << 4  # synthetic responses have negative ids
        self._criteria = len(self.criteria.names)
        keys = (place + self._offset) * self._criteria + criterion
        order = np.argsort(keys, kind="stable")
        keys, value, version = keys[order], value[order], version[order]
        if keep_last and len(keys):
            last = np.append(keys[1:] != keys[:-1], True)
            keys, value, version = keys[last], value[last], version[last]
        return keys, value, version

    def _describe(self, key: int, logged_keys, logged_values, stored_keys, stored_values) -> str:
        criterion, place = key % self._criteria, key // self._criteria - self._offset
        response, stage, group = place >> 4, (place >> 2) & 3, place & 3
        case_id, model = self.response_names.get(response, ("?", f"#{response}"))
        where = f"label {case_id}/{model}/{self.criteria.names[criterion]}/{STAGES[stage]}/{group or '-'}"
        logged, stored = _lookup(key, logged_keys, logged_values), _lookup(key, stored_keys, stored_values)
        if logged is not None and logged == stored:
            logged_version = _lookup(key, logged_keys, self._logged_versions)
            stored_version = _lookup(key, stored_keys, self._stored_versions)
            return (
                f"{where}: rubric version: audit log says {self._version_said(logged_version)}, "
                f"database has {self._version_said(stored_version)}"
            )
        return f"{where}: audit log says {self._said(logged)}, database has {self._said(stored)}"

    def _version_said(self, version_id: int | None) -> str:
        return self.version_names.get(version_id or 0, f"#{version_id}")

    def _said(self, value: int | None) -> str:
        if value is None:
            return "absent"
        met, user, note = bool(value & 1), (value >> 1) & ((1 << 32) - 1), self.notes.names[value >> 33]
        return f"met={str(met).lower()} by {self.user_names.get(user, f'#{user}')}" + (
            f" note={note!r}" if note else ""
        )


def _lookup(key: int, keys: np.ndarray, values: np.ndarray) -> int | None:
    at = int(np.searchsorted(keys, key))
    return int(values[at]) if at < len(keys) and keys[at] == key else None
