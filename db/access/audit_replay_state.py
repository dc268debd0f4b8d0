"""Replay of accounts, sign-in sessions, case and response texts and judge decisions against the tables.

Each replayer is fed the log's entries in order (`feed`) and then compares what the log says with
what is stored (`compare`), naming each difference: entity, key, logged vs stored. Texts and judge
decisions are compared as digests (db/access/audit_digest.py), so the log stays small.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlmodel import Session, col

from db.access.audit_digest import CASE_COLUMNS, case_digest, joined_decisions_digest, password_digest, response_digest
from db.access.audit_records import stored_time
from db.access.audit_replay_labels import driver_blocks
from db.store.models import Case, LoginSession, Response, User, table_of

Difference = Callable[[str], None]
#: What the log says of something it never named.
ABSENT = "absent"
_UNKNOWN = object()  # a field an older entry did not record: not compared
_STREAM_ROWS = 20_000


def _said(value: Any) -> str:
    return ABSENT if value is None else str(value)


class UserReplay:
    """Role, group, active flag, password (as a digest of its hash), linked identity and the name pages show
    of every account."""

    entities = ("user",)
    fields = ("role", "group", "active", "password", "identity", "display_name")

    def __init__(self) -> None:
        self.state: dict[str, dict[str, Any]] = {}

    def feed(self, entity: str, action: str, key: str, after: dict | None) -> None:
        after = after or {}
        current = self.state.setdefault(key, dict.fromkeys(self.fields, _UNKNOWN))
        for field in self.fields:
            if field in after:
                current[field] = after[field]

    def compare(self, session: Session, differ: Difference) -> int:
        stored = {
            name: {
                "role": role,
                "group": group,
                "active": bool(active),
                "password": password_digest(hashed),
                "identity": identity,
                "display_name": display_name,
            }
            for name, role, group, active, hashed, identity, display_name in session.connection().execute(
                select(
                    col(User.username),
                    col(User.role),
                    col(User.group_no),
                    col(User.is_active),
                    col(User.password_hash),
                    col(User.oidc_identity),
                    col(User.display_name),
                )
            )
        }
        for name in sorted(set(self.state) | set(stored)):
            logged, row = self.state.get(name), stored.get(name)
            if logged is None or row is None:
                differ(
                    f"user {name}: "
                    + (
                        "in the database but not in the audit log"
                        if logged is None
                        else "in the audit log but not in the database"
                    )
                )
                continue
            for field in self.fields:
                if logged[field] is not _UNKNOWN and logged[field] != row[field]:
                    differ(
                        f"user {name}: {field}: audit log says {_said(logged[field])}, database has {_said(row[field])}"
                    )
        return len(stored)


class SessionReplay:
    """Sign-in sessions: every row of login_session opened in the log (and not closed or revoked since)."""

    entities = ("session",)

    def __init__(self) -> None:
        self.state: dict[str, tuple[str, str, str]] = {}

    def feed(self, entity: str, action: str, key: str, after: dict | None) -> None:
        if action == "open" and after:
            self.state[key] = (after["user"], after["created_at"], after["expires_at"])
        else:
            self.state.pop(key, None)

    def compare(self, session: Session, differ: Difference) -> int:
        stored = {
            token_hash: (username or "?", stored_time(created), stored_time(expires))
            for token_hash, username, created, expires in session.connection().execute(
                select(
                    col(LoginSession.token_hash),
                    col(User.username),
                    col(LoginSession.created_at),
                    col(LoginSession.expires_at),
                ).outerjoin(User, col(User.id) == col(LoginSession.user_id))
            )
        }
        for key in sorted(set(self.state) | set(stored)):
            logged, row = self.state.get(key), stored.get(key)
            if logged != row:
                differ(f"session {key[:12]}…: audit log says {_session(logged)}, database has {_session(row)}")
        return len(stored)


def _session(value: tuple[str, str, str] | None) -> str:
    return ABSENT if value is None else f"user {value[0]} from {value[1]} until {value[2]}"


class TextReplay:
    """The stored record of every case and the text of every response, as digests."""

    # a `cases` / `responses` entry that carries digests is read the same way (the file summaries carry none)
    entities = ("case_digests", "response_digests", "response", "cases", "responses")

    def __init__(self) -> None:
        self.cases: dict[str, str] = {}
        self.responses: dict[tuple[str, str], str] = {}

    def feed(self, entity: str, action: str, key: str, after: dict | None) -> None:
        after = after or {}
        if entity in ("case_digests", "cases"):
            self.cases.update((case_id, value) for case_id, value in after.get("digests", []))
        elif entity in ("response_digests", "responses"):
            self.responses.update(((case_id, model), value) for case_id, model, value in after.get("digests", []))
        elif "text" in after:  # a replaced response (before digests were logged with it)
            case_id, model = key.split("/", 1)
            self.responses[(case_id, model)] = response_digest(after["text"])

    def compare(self, session: Session, differ: Difference) -> int:
        table = table_of(Case)
        case_ids: dict[int, str] = {}
        for row in session.connection().execute(
            select(table.c.id, table.c.case_id, *[table.c[c] for c in CASE_COLUMNS])
        ):
            case_ids[row.id] = row.case_id
            self._check(differ, "case", row.case_id, self.cases.pop(row.case_id, None), case_digest(dict(row._mapping)))
        for case_id in sorted(self.cases):
            differ(f"case {case_id}: in the audit log but not in the database")
        streamed = {"stream_results": True, "yield_per": 1000}  # on this statement only, not the connection
        texts = session.connection().execute(
            select(col(Response.case_pk), col(Response.model), col(Response.text)), execution_options=streamed
        )
        count = 0
        for part in texts.partitions(1000):
            for case_pk, model, text in part:
                count += 1
                key = (case_ids.get(case_pk, "?"), model)
                self._check(differ, "response", "/".join(key), self.responses.pop(key, None), response_digest(text))
        for case_id, model in sorted(self.responses):
            differ(f"response {case_id}/{model}: in the audit log but not in the database")
        return len(case_ids) + count

    @staticmethod
    def _check(differ: Difference, what: str, key: str, logged: str | None, stored: str) -> None:
        if logged is None:
            differ(f"{what} {key}: text not in the audit log (database digest {stored})")
        elif logged != stored:
            differ(f"{what} {key}: text differs: audit log digest {logged}, database digest {stored}")


class JudgeReplay:
    """Every judge's decisions on every response, as one digest per (judge, response)."""

    entities = ("judge_decisions",)

    def __init__(self) -> None:
        self.state: dict[tuple[str, str, str], str] = {}

    def feed(self, entity: str, action: str, key: str, after: dict | None) -> None:
        for judge, case_id, model, value in (after or {}).get("digests", []):
            self.state[(judge, case_id, model)] = value

    def compare(self, session: Session, differ: Difference) -> int:
        names = {
            response_id: (case_id, model)
            for response_id, case_id, model in session.connection().execute(
                select(col(Response.id), col(Case.case_id), col(Response.model)).join(
                    Case, col(Case.id) == col(Response.case_pk)
                )
            )
        }
        postgres = session.get_bind().dialect.name == "postgresql"
        joined = (
            "string_agg(criterion_id || ':' || CAST(CAST(met AS INTEGER) AS TEXT), CHR(31))"
            if postgres
            else "group_concat(criterion_id || ':' || CAST(met AS INTEGER), CHAR(31))"
        )
        sql = f"SELECT judge, response_id, COUNT(*), {joined} FROM judge_decision GROUP BY judge, response_id"
        count = 0
        for block in driver_blocks(session, sql, 5000):
            for judge, response_id, n, decisions in block:
                count += n
                self._check(differ, judge, names.get(response_id, ("?", f"#{response_id}")), n, decisions)
        for judge, case_id, model in sorted(self.state):
            differ(f"judge decisions {judge}/{case_id}/{model}: in the audit log but not in the database")
        return count

    def _check(self, differ: Difference, judge: str, name: tuple[str, str], n: int, decisions: str) -> None:
        case_id, model = name
        stored = joined_decisions_digest(decisions)
        logged = self.state.pop((judge, case_id, model), None)
        where = f"judge decisions {judge}/{case_id}/{model}"
        if logged is None:
            differ(f"{where}: not in the audit log ({n} decisions in the database)")
        elif logged != stored:
            differ(f"{where}: differ from the audit log (digest {logged}, database {stored})")
