"""What writers put in the audit log so `audit verify` can replay texts, sessions and judge decisions.

Bulk writers log digests (db/access/audit_digest.py), one entry per written chunk: `case_digests`,
`response_digests` and `judge_decisions` entries whose `after` holds {"digests": [...]}. Sign-in
sessions are logged one entry each (`session`: open, close, revoke), keyed by the token's hash (the
token itself is never stored).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.engine import Connection

from db.access.audit_digest import case_digest, decisions_digest, response_digest
from db.store.models import Case, JudgeDecision, LoginSession, Response, table_of

#: A checker opened the adjudication of responses: after {"user", "responses": [[case_id, code], ...]}.
OPENING_ENTITY = "adjudication_opening"

_CASE = table_of(Case)
_RESPONSE = table_of(Response)
_DECISION = table_of(JudgeDecision)
_BATCH = 500


def round_key(round_at: datetime) -> str:
    """The audit key of a labeling round's feedback switch (its time as the database returns it)."""
    return f"round {round_at.isoformat()}"


def stored_time(at: datetime) -> str:
    """A timestamp as both databases hand it back (UTC, no zone, microseconds)."""
    return at.replace(tzinfo=None).isoformat(timespec="microseconds")


def case_digests_entry(source: str, cases: Iterable[tuple[str, dict[str, Any]]]) -> dict | None:
    """One entry naming the stored record of every case written (case_id, column values)."""
    digests = [[case_id, case_digest(values)] for case_id, values in cases]
    return _digests_entry("case_digests", source, digests)


def response_digests_entry(source: str, responses: Iterable[tuple[str, str, str]]) -> dict | None:
    """One entry naming the text of every response written (case_id, model, text)."""
    digests = [[case_id, model, response_digest(text)] for case_id, model, text in responses]
    return _digests_entry("response_digests", source, digests)


def judge_digests_entry(connection: Connection, source: str, pairs: Iterable[tuple[str, int]]) -> dict | None:
    """One entry naming, for each (judge, response id) written, all that judge's decisions on it as stored now."""
    wanted = sorted(set(pairs))
    decisions: dict[tuple[str, int], list[tuple[str, bool]]] = {pair: [] for pair in wanted}
    names: dict[int, tuple[str, str]] = {}
    for judge in sorted({judge for judge, _ in wanted}):
        response_ids = [response_id for name, response_id in wanted if name == judge]
        for start in range(0, len(response_ids), _BATCH):
            batch = response_ids[start : start + _BATCH]
            for response_id, criterion_id, met in connection.execute(
                select(_DECISION.c.response_id, _DECISION.c.criterion_id, _DECISION.c.met).where(
                    and_(_DECISION.c.judge == judge, _DECISION.c.response_id.in_(batch))
                )
            ):
                decisions[(judge, response_id)].append((criterion_id, bool(met)))
    response_ids = sorted({response_id for _, response_id in wanted})
    for start in range(0, len(response_ids), _BATCH):
        for response_id, case_id, model in connection.execute(
            select(_RESPONSE.c.id, _CASE.c.case_id, _RESPONSE.c.model)
            .join(_CASE, _CASE.c.id == _RESPONSE.c.case_pk)
            .where(_RESPONSE.c.id.in_(response_ids[start : start + _BATCH]))
        ):
            names[response_id] = (case_id, model)
    digests = [
        [judge, *names[response_id], decisions_digest(decisions[(judge, response_id)])]
        for judge, response_id in wanted
        if response_id in names
    ]
    return _digests_entry("judge_decisions", source, digests)


def _digests_entry(entity: str, source: str, digests: list[list]) -> dict | None:
    if not digests:
        return None
    return {
        "action": "import",
        "entity": entity,
        "entity_key": source[:255],
        "before": None,
        "after": {"digests": digests},
    }


def session_entry(action: str, row: LoginSession, username: str) -> dict:
    """A sign-in session opened, closed or revoked, as `AuditWriter.record` takes it."""
    state = {"user": username, "created_at": stored_time(row.created_at), "expires_at": stored_time(row.expires_at)}
    opened = action == "open"
    return {
        "action": action,
        "entity": "session",
        "entity_key": row.token_hash,
        "before": None if opened else state,
        "after": state if opened else None,
    }
