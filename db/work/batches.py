"""The judge cache as a batch file reads it: which items wait for a re-ask, and the re-asked answers written back.

An answer a batch brought back unreadable is kept in `judge_result` like an online parse failure
(`parse_ok` false, its raw output, `attempts` = the requests it took). A batch answers one round per
file, so a failure with `attempts` at most `MAX_REASKS` is re-asked by the next batch export (the
prompt, the unreadable answer, the re-ask); an online failure has spent every round (attempts ≥ 3)
and is never asked again. The re-ask's answer replaces the row's answer in place: one row per item.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, bindparam, select, update
from sqlalchemy.engine import Connection
from sqlmodel import Session, SQLModel

from db.work.judge_runs import Answer

#: Re-asks after an unreadable answer, online and by batch (the first answer and two more).
MAX_REASKS = 2
LOOKUP_BATCH = 500
_RESULT = SQLModel.metadata.tables["judge_result"]
_DECISION = SQLModel.metadata.tables["judge_decision"]


@dataclass(frozen=True)
class CachedJudgement:
    """What the cache holds of one item: whether it parsed, the requests it took, its raw answer."""

    parse_ok: bool
    attempts: int
    raw_output: str
    response_id: int = 0
    criterion_id: str = ""
    met: bool | None = None

    def next_round(self) -> int | None:
        """The round a batch asks next (1 or 2: a re-ask), None when the item is answered for good."""
        if self.parse_ok or self.attempts > MAX_REASKS:
            return None
        return max(self.attempts, 1)


def judge_states(connection: Connection, keys: list[str]) -> dict[str, CachedJudgement]:
    """cache key → what the cache holds, for the keys answered before."""
    found: dict[str, CachedJudgement] = {}
    for start in range(0, len(keys), LOOKUP_BATCH):
        batch = keys[start : start + LOOKUP_BATCH]
        query = select(
            _RESULT.c.cache_key,
            _RESULT.c.parse_ok,
            _RESULT.c.attempts,
            _RESULT.c.raw_output,
            _RESULT.c.response_id,
            _RESULT.c.criterion_id,
            _RESULT.c.met,
        ).where(_RESULT.c.cache_key.in_(batch))
        for row in connection.execute(query):
            found[row.cache_key] = CachedJudgement(
                bool(row.parse_ok),
                int(row.attempts or 1),
                row.raw_output or "",
                row.response_id,
                row.criterion_id,
                None if row.met is None else bool(row.met),
            )
    return found


def decided(connection: Connection, judge: str, response_ids: list[int]) -> dict[tuple[int, str], bool]:
    """(response, criterion) → met of `judge`'s decisions on those responses."""
    found: dict[tuple[int, str], bool] = {}
    ids = sorted(set(response_ids))
    for start in range(0, len(ids), LOOKUP_BATCH):
        query = select(_DECISION.c.response_id, _DECISION.c.criterion_id, _DECISION.c.met).where(
            and_(_DECISION.c.judge == judge, _DECISION.c.response_id.in_(ids[start : start + LOOKUP_BATCH]))
        )
        for row in connection.execute(query):
            found[(row.response_id, row.criterion_id)] = bool(row.met)
    return found


def write_reasked(session: Session, run_id: int, answers: list[Answer]) -> int:
    """Re-asked answers into their items' cache rows (only where the row still waits for that round).

    Returns the rows written; an answer whose row moved on since (another import) changes nothing."""
    if not answers:
        return 0
    statement = (
        update(_RESULT)
        .where(
            and_(
                _RESULT.c.cache_key == bindparam("key"),
                _RESULT.c.parse_ok.is_(False),
                _RESULT.c.attempts == bindparam("previous"),
            )
        )
        .values(
            run_id=bindparam("new_run"),
            raw_output=bindparam("new_raw_output"),
            parse_ok=bindparam("new_parse_ok"),
            met=bindparam("new_met"),
            attempts=bindparam("new_attempts"),
            prompt_tokens=_RESULT.c.prompt_tokens + bindparam("new_prompt_tokens"),
            completion_tokens=_RESULT.c.completion_tokens + bindparam("new_completion_tokens"),
        )
    )
    rows = [
        {
            "key": answer.cache_key,
            "new_run": run_id,
            "previous": answer.attempts - 1,
            "new_raw_output": answer.raw_output,
            "new_parse_ok": answer.parse_ok,
            "new_met": answer.met,
            "new_attempts": answer.attempts,
            "new_prompt_tokens": answer.prompt_tokens,
            "new_completion_tokens": answer.completion_tokens,
        }
        for answer in answers
    ]
    result = session.connection().execute(statement, rows)
    return int(result.rowcount or 0)
