"""Replay of the round's bookkeeping that the rules read: feedback rounds, adjudication openings,
calibration samples and their draw, disagreement draws and leaderboard snapshots.

Each of these rows changes what a rule decides (a feedback round freezes labels, an opening closes a
checker's own labels, a calibration sample is the L of a calibrated score, a snapshot is a published
leaderboard), so a row deleted, inserted or changed by hand must show up in `audit verify`. Each
replayer is fed the log's entries in order and compares what the log says with the table:

- `feedback`, key `round ISO-TIME`, after {"open"}: the round's switch (no row: closed);
- `adjudication_opening`, after {"user", "responses": [[case_id, code], ...]}: openings, never removed;
- `calibration_sample`, key MODEL, after {"seed", "responses": [code, ...]}: the model's sample and seed;
- `disagreement_draw`, after {"judges": [a, b], "responses": [code, ...], "differing": [n, ...]};
- `leaderboard_snapshot`, key NAME, after {"payload_sha256"}: the stored payload's canonical JSON hash
  and who froze it;
- `reference_answer`, key CASE_ID, after {"sha256", "length"}: a case's reference answer, which a validation
  run grades as the answer that must pass its rubric; compared with the digest of the stored text itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlmodel import Session, col

from db.access.audit_digest import payload_hash
from db.access.audit_records import OPENING_ENTITY, round_key
from db.rules.anchors import text_sha256
from db.store.models import (
    AdjudicationOpening,
    CalibrationSample,
    Case,
    DisagreementDraw,
    FeedbackRound,
    LeaderboardSnapshot,
    ReferenceAnswer,
    Response,
    User,
)

Difference = Callable[[str], None]
ABSENT = "absent"


def _compare(differ: Difference, what: str, logged: dict, stored: dict, said: Callable[[Any], str] = str) -> int:
    for key in sorted(set(logged) | set(stored), key=str):
        log_value, db_value = logged.get(key), stored.get(key)
        if log_value != db_value:
            log_text = ABSENT if log_value is None else said(log_value)
            db_text = ABSENT if db_value is None else said(db_value)
            differ(f"{what} {key}: audit log says {log_text}, database has {db_text}")
    return len(stored)


def _codes(session: Session) -> dict[int, str]:
    rows = session.connection().execute(select(col(Response.id), col(Response.code)))
    return {int(response_id): str(code) for response_id, code in rows}


class FeedbackReplay:
    """Whether each round's feedback is open (it freezes the round's annotation labels)."""

    entities = ("feedback",)

    def __init__(self) -> None:
        self.state: dict[str, bool] = {}

    def feed(self, entity: str, action: str, key: str, after: dict | None) -> None:
        self.state[key] = bool((after or {}).get("open"))

    def compare(self, session: Session, differ: Difference) -> int:
        stored = {
            round_key(round_at): bool(is_open)
            for round_at, is_open in session.connection().execute(
                select(col(FeedbackRound.round_at), col(FeedbackRound.is_open))
            )
        }
        for key in sorted(set(self.state) | set(stored)):
            logged, now = self.state.get(key, False), stored.get(key, False)  # no row: closed
            if logged != now:
                differ(f"feedback {key}: audit log says {_open(logged)}, database has {_open(now)}")
        return len(stored)


def _open(value: bool) -> str:
    return "open" if value else "closed"


class OpeningReplay:
    """Which checker opened which response's adjudication (their own group's labels on it are closed)."""

    entities = (OPENING_ENTITY,)

    def __init__(self) -> None:
        self.state: set[tuple[str, str, str]] = set()

    def feed(self, entity: str, action: str, key: str, after: dict | None) -> None:
        after = after or {}
        user = str(after.get("user", key))
        self.state.update((user, str(case_id), str(code)) for case_id, code in after.get("responses", []))

    def compare(self, session: Session, differ: Difference) -> int:
        stored = {
            (username, case_id, code)
            for username, case_id, code in session.connection().execute(
                select(col(User.username), col(Case.case_id), col(Response.code))
                .select_from(AdjudicationOpening)
                .join(User, col(User.id) == col(AdjudicationOpening.user_id))
                .join(Response, col(Response.id) == col(AdjudicationOpening.response_id))
                .join(Case, col(Case.id) == col(Response.case_pk))
            )
        }
        for user, case_id, code in sorted(self.state - stored):
            differ(f"adjudication opening {case_id}/{code} by {user}: in the audit log but not in the database")
        for user, case_id, code in sorted(stored - self.state):
            differ(f"adjudication opening {case_id}/{code} by {user}: in the database but not in the audit log")
        return len(stored)


class CalibrationReplay:
    """Each model's calibration sample: the responses drawn and the seed they were drawn with."""

    entities = ("calibration_sample",)

    def __init__(self) -> None:
        self.state: dict[str, tuple[int, tuple[str, ...]]] = {}

    def feed(self, entity: str, action: str, key: str, after: dict | None) -> None:
        after = after or {}
        self.state[key] = (int(after.get("seed", 0)), tuple(sorted(str(code) for code in after.get("responses", []))))

    def compare(self, session: Session, differ: Difference) -> int:
        codes = _codes(session)
        drawn: dict[str, tuple[set[int], list[str]]] = {}
        rows = (
            session.connection()
            .execute(
                select(col(CalibrationSample.model), col(CalibrationSample.seed), col(CalibrationSample.response_id))
            )
            .all()
        )
        for model, seed, response_id in rows:
            seeds, sample = drawn.setdefault(model, (set(), []))
            seeds.add(int(seed))
            sample.append(codes.get(response_id, f"#{response_id}"))
        stored = {
            model: (min(seeds) if len(seeds) == 1 else -1, tuple(sorted(sample)))
            for model, (seeds, sample) in drawn.items()
        }

        def said(value: tuple[int, tuple[str, ...]]) -> str:
            seed, sample = value
            return f"seed {seed if seed >= 0 else 'mixed'}, {len(sample)} responses ({payload_hash(list(sample))[:12]})"

        _compare(differ, "calibration sample of", self.state, stored, said)
        return len(rows)


class DisagreementReplay:
    """Responses drawn where two judges disagree: the pair and how many criteria differed, per response."""

    entities = ("disagreement_draw",)

    def __init__(self) -> None:
        self.state: dict[str, tuple[str, str, int]] = {}

    def feed(self, entity: str, action: str, key: str, after: dict | None) -> None:
        after = after or {}
        judge_a, judge_b = after.get("judges", ["?", "?"])
        for code, differing in zip(after.get("responses", []), after.get("differing", [])):
            self.state[str(code)] = (judge_a, judge_b, int(differing))

    def compare(self, session: Session, differ: Difference) -> int:
        codes = _codes(session)
        stored = {
            codes.get(response_id, f"#{response_id}"): (judge_a, judge_b, int(n))
            for response_id, judge_a, judge_b, n in session.connection().execute(
                select(
                    col(DisagreementDraw.response_id),
                    col(DisagreementDraw.judge_a),
                    col(DisagreementDraw.judge_b),
                    col(DisagreementDraw.n_differing),
                )
            )
        }

        def said(value: tuple[str, str, int]) -> str:
            return f"{value[0]}/{value[1]} differing on {value[2]}"

        return _compare(differ, "disagreement draw", self.state, stored, said)


class SnapshotReplay:
    """Each leaderboard snapshot's payload (its canonical JSON's hash, whatever fields it has) and who froze it."""

    entities = ("leaderboard_snapshot",)

    def __init__(self) -> None:
        self.state: dict[str, tuple[str, str]] = {}

    def feed_entry(self, key: str, actor: str, after: dict | None) -> None:
        self.state[key] = (str((after or {}).get("payload_sha256")), actor)

    def compare(self, session: Session, differ: Difference) -> int:
        stored = {}
        for name, created_by, payload in session.connection().execute(
            select(col(LeaderboardSnapshot.name), col(LeaderboardSnapshot.created_by), col(LeaderboardSnapshot.payload))
        ):
            try:
                digest = payload_hash(payload)
            except (TypeError, ValueError):
                digest = "unreadable"
            stored[name] = (digest, created_by)

        def said(value: tuple[str, str]) -> str:
            return f"payload sha256 {value[0][:16]}… frozen by {value[1]}"

        return _compare(differ, "leaderboard snapshot", self.state, stored, said)


class ReferenceReplay:
    """Each case's reference answer, by the sha256 and length of its text (the text itself is not logged)."""

    entities = ("reference_answer",)

    def __init__(self) -> None:
        self.state: dict[str, tuple[str, int]] = {}

    def feed(self, entity: str, action: str, key: str, after: dict | None) -> None:
        after = after or {}
        self.state[key] = (str(after.get("sha256", "")), int(after.get("length", -1)))

    def compare(self, session: Session, differ: Difference) -> int:
        rows = session.connection().execute(
            select(col(Case.case_id), col(ReferenceAnswer.text)).join(
                Case, col(Case.id) == col(ReferenceAnswer.case_pk)
            )
        )
        stored = {str(case_id): (text_sha256(text), len(text)) for case_id, text in rows}

        def said(value: tuple[str, int]) -> str:
            return f"sha256 {value[0][:12]}… ({value[1]:,} characters)"

        return _compare(differ, "reference answer", self.state, stored, said)
