"""Replaying the audit log against the database: the log must explain the whole current state.

The keyed chain (db.access.audit) proves the log was not rewritten by someone without the key; the sealed
head (db.access.audit_seal) that no entry was cut from its end; an export's anchor that the database was not
restored from before that export; and the replay that the tables agree with the log. Every entry is
read once, in order, in bounded memory, and fed to the replayers: labels (db.access.audit_replay_labels),
rubric versions and criteria, assignments (here), accounts (with the names pages show), sign-in sessions,
case and response texts and judge decisions (db.access.audit_replay_state), and the round's bookkeeping the
rules read: feedback rounds, adjudication openings, calibration samples, disagreement draws, leaderboard
snapshots and reference answers (db.access.audit_replay_work). Labels are compared with their rubric version
too. The result must equal the current rows exactly, so a row edited, inserted or deleted directly, a deleted
tail, a log emptied or rebuilt each shows up as a named difference: entity, key, what the log says and what
the database has.

Rubric entries: `rubric`, key `CASE vN` (authoring, audit) or `CASE` with after.version (imports):
status and criteria; `rubrics`, after {"rows": [{case, version, status, criteria}]} (bulk inserts).
Assignment entries: `assignment`, key `rubric:CASE` or `label:CASE/CODE/groupN`: the assignee.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from db.access.audit import AuditHead, ChainCheck, check_anchor, log_entries
from db.access.audit_key import audit_key
from db.access.audit_replay_labels import LABEL_ENTITIES, LabelReplay, RubricVersions
from db.access.audit_replay_state import JudgeReplay, SessionReplay, TextReplay, UserReplay
from db.access.audit_replay_work import (
    CalibrationReplay,
    DisagreementReplay,
    FeedbackReplay,
    OpeningReplay,
    ReferenceReplay,
    SnapshotReplay,
)
from db.access.audit_seal import seal_problem
from db.rules.enums import NO_GROUP
from db.store.collector import collector_paused
from db.store.models import Assignment, Case, Criterion, Response, RubricVersion, User, table_of

#: Differences listed at most (the count is always exact).
MAX_LISTED = 200


@dataclass
class ReplayReport:
    differences: list[str] = field(default_factory=list)
    n_differences: int = 0
    labels: int = 0
    rubric_versions: int = 0
    assignments: int = 0
    #: rows compared of users, sessions, texts (cases and responses), judge_decisions and the bookkeeping
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.n_differences == 0

    def add(self, text: str) -> None:
        self.n_differences += 1
        if len(self.differences) < MAX_LISTED:
            self.differences.append(text)


def bulk_label_row(
    case_id: str,
    model: str,
    criterion_id: str,
    stage: str,
    group_no: int | None,
    met: bool,
    username: str,
    note: str | None,
) -> list:
    """One row of a `labels` entry (the form bulk writers use)."""
    return [case_id, model, criterion_id, stage, int(group_no or NO_GROUP), bool(met), username, note or None]


# Rubrics ------------------------------------------------------------------------------------


def _criteria_tuple(criteria: list[dict]) -> tuple:
    return tuple(
        (
            c["criterion_id"].strip(),
            (c.get("text", c.get("criterion")) or "").strip(),
            tuple(dict.fromkeys(c.get("tags") or [])),
        )
        for c in criteria
    )


class RubricReplay:
    entities = ("rubric", "rubrics")

    def __init__(self, versions: RubricVersions) -> None:
        self.state: dict[tuple[str, int], dict[str, Any]] = {}
        #: each case's current version as the log has it so far (read by the label replay)
        self.versions = versions

    def feed(self, entity: str, action: str, key: str, after: dict | None) -> None:
        after = after or {}
        if entity == "rubrics":
            for row in after.get("rows", []):
                self.state[(row["case"], int(row["version"]))] = {
                    "status": row["status"],
                    "criteria": _criteria_tuple(row["criteria"]),
                }
                self.versions.set_status(row["case"], int(row["version"]), row["status"])
            return
        if " v" in key:
            case_id, version = key.rsplit(" v", 1)
            rubric_key = (case_id, int(version))
        else:
            rubric_key = (key, int(after["version"]))
        current = self.state.setdefault(rubric_key, {"status": None, "criteria": None})
        if "status" in after:
            current["status"] = after["status"]
            self.versions.set_status(rubric_key[0], rubric_key[1], after["status"])
        if "criteria" in after:
            current["criteria"] = _criteria_tuple(after["criteria"])


def _stored_rubrics(session: Session) -> dict[tuple[str, int], dict[str, Any]]:
    rubric, case, criterion = table_of(RubricVersion), table_of(Case), table_of(Criterion)
    versions = {
        rid: (case_id, version, status)
        for rid, case_id, version, status in session.connection().execute(
            select(rubric.c.id, case.c.case_id, rubric.c.version, rubric.c.status).join(
                case, case.c.id == rubric.c.case_pk
            )
        )
    }
    criteria: dict[int, list] = {}
    for rid, cid, text, tags in session.connection().execute(
        select(criterion.c.rubric_version_id, criterion.c.criterion_id, criterion.c.text, criterion.c.tags).order_by(
            criterion.c.rubric_version_id, criterion.c.position
        )
    ):
        criteria.setdefault(rid, []).append((cid.strip(), (text or "").strip(), tuple(dict.fromkeys(tags or []))))
    return {
        (case_id, version): {"status": status, "criteria": tuple(criteria.get(rid, []))}
        for rid, (case_id, version, status) in versions.items()
    }


# Assignments --------------------------------------------------------------------------------


class AssignmentReplay:
    entities = ("assignment",)

    def __init__(self) -> None:
        self.state: dict[str, str | None] = {}

    def feed(self, entity: str, action: str, key: str, after: dict | None) -> None:
        self.state[key] = (after or {}).get("user")


def _stored_assignments(session: Session) -> dict[str, str | None]:
    assignment, case, response, user = table_of(Assignment), table_of(Case), table_of(Response), table_of(User)
    rows = session.connection().execute(
        select(assignment.c.kind, case.c.case_id, response.c.code, assignment.c.group_no, user.c.username)
        .join(case, case.c.id == assignment.c.case_pk)
        .join(user, user.c.id == assignment.c.user_id)
        .outerjoin(response, response.c.id == assignment.c.response_id)
    )
    out = {}
    for kind, case_id, code, group, username in rows:
        key = f"{kind}:{case_id}" + (f"/{code}/group{group}" if code is not None else "")
        out[key] = username
    return out


# The replay ---------------------------------------------------------------------------------


#: The replayers compared by `compare(session, differ)`, with what they count in `ReplayReport.counts`.
_STATE_REPLAYS = (
    "users",
    "sessions",
    "texts",
    "judge_decisions",
    "feedback_rounds",
    "adjudication_openings",
    "calibration_samples",
    "disagreement_draws",
    "leaderboard_snapshots",
    "reference_answers",
)


def _replayers(session: Session) -> dict[str, Any]:
    versions = RubricVersions()
    return {
        "labels": LabelReplay(session, versions),
        "rubrics": RubricReplay(versions),
        "assignments": AssignmentReplay(),
        "users": UserReplay(),
        "sessions": SessionReplay(),
        "texts": TextReplay(),
        "judge_decisions": JudgeReplay(),
        "feedback_rounds": FeedbackReplay(),
        "adjudication_openings": OpeningReplay(),
        "calibration_samples": CalibrationReplay(),
        "disagreement_draws": DisagreementReplay(),
        "leaderboard_snapshots": SnapshotReplay(),
        "reference_answers": ReferenceReplay(),
    }


def _feed(replayers: dict[str, Any]) -> Callable[[Any], None]:
    by_entity: dict[str, Any] = {}
    for replayer in replayers.values():
        for entity in getattr(replayer, "entities", LABEL_ENTITIES):
            by_entity[entity] = replayer
    labels = replayers["labels"]

    def feed(row: Any) -> None:
        replayer = by_entity.get(row.entity)
        if replayer is None:
            return
        if replayer is labels:
            labels.feed(row.entity, row.entity_key, row.actor, row.after)
        elif isinstance(replayer, SnapshotReplay):
            if row.action == "create":
                replayer.feed_entry(row.entity_key, row.actor, row.after)
        else:
            replayer.feed(row.entity, row.action, row.entity_key, row.after)

    return feed


def _compare(session: Session, replayers: dict[str, Any], report: ReplayReport) -> None:
    report.labels = replayers["labels"].compare(report.add)
    report.rubric_versions = _compare_rubrics(session, replayers["rubrics"].state, report)
    report.assignments = _compare_assignments(session, replayers["assignments"].state, report)
    for name in _STATE_REPLAYS:
        report.counts[name] = replayers[name].compare(session, report.add)


def replay(session: Session) -> ReplayReport:
    """Every row the log explains compared with what the audit log says it is (no chain check)."""
    with collector_paused():
        replayers = _replayers(session)
        feed = _feed(replayers)
        for row in log_entries(session):
            feed(row)
        report = ReplayReport()
        _compare(session, replayers, report)
    return report


def _compare_rubrics(session: Session, logged_rubrics: dict, report: ReplayReport) -> int:
    stored_rubrics = _stored_rubrics(session)
    for rubric_key in sorted(set(logged_rubrics) | set(stored_rubrics)):
        log_value, db_value = logged_rubrics.get(rubric_key), stored_rubrics.get(rubric_key)
        where = f"rubric {rubric_key[0]} v{rubric_key[1]}"
        if log_value is None or db_value is None:
            report.add(
                f"{where}: "
                + (
                    "in the database but not in the audit log"
                    if log_value is None
                    else "in the audit log but not in the database"
                )
            )
            continue
        if log_value["status"] is not None and log_value["status"] != db_value["status"]:
            report.add(f"{where}: audit log says status {log_value['status']}, database has {db_value['status']}")
        if log_value["criteria"] is not None and log_value["criteria"] != db_value["criteria"]:
            changed = [
                db[0] if db else log[0]
                for log, db in _zip_longest(log_value["criteria"], db_value["criteria"])
                if log != db
            ]
            report.add(f"{where}: criteria differ from the audit log ({', '.join(changed[:5])})")
    return len(stored_rubrics)


def _compare_assignments(session: Session, logged_assignments: dict, report: ReplayReport) -> int:
    stored_assignments = _stored_assignments(session)
    for assignment_key in sorted(set(logged_assignments) | set(stored_assignments)):
        log_user, db_user = logged_assignments.get(assignment_key), stored_assignments.get(assignment_key)
        if log_user != db_user:
            logged_text, stored_text = log_user or "absent", db_user or "absent"
            report.add(f"assignment {assignment_key}: audit log says {logged_text}, database has {stored_text}")
    return len(stored_assignments)


def _zip_longest(a: tuple, b: tuple) -> list[tuple]:
    size = max(len(a), len(b))
    return [(a[i] if i < len(a) else None, b[i] if i < len(b) else None) for i in range(size)]


@dataclass
class AuditVerification:
    """`audit verify`: the keyed chain, the sealed head, the replay, and (optionally) an export's anchor."""

    entries: int
    problems: list[str]
    replay: ReplayReport

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_audit(session: Session, *, anchor: AuditHead | None = None) -> AuditVerification:
    """One pass over the log (chain and replay together), then the tables, the seal and the anchor."""
    chain = ChainCheck(audit_key())
    with collector_paused():
        replayers = _replayers(session)
        feed = _feed(replayers)
        for row in log_entries(session):
            chain.feed(row)
            feed(row)
        report = ReplayReport()
        _compare(session, replayers, report)
    problems = []
    if chain.first_bad_id is not None:
        problems.append(f"audit chain broken at entry {chain.first_bad_id}: {chain.reason}")
    sealed = seal_problem(session, entries=chain.entries, last_hash=chain.prev, key=chain.key)
    if sealed:
        problems.append(sealed)
    if anchor is not None:
        reason = check_anchor(session, anchor)
        if reason:
            problems.append(f"anchor: {reason}")
    problems += report.differences
    if report.n_differences > len(report.differences):
        problems.append(f"... and {report.n_differences - len(report.differences):,} more differences")
    return AuditVerification(chain.entries, problems, report)


def anchor_from_manifest(manifest: dict) -> AuditHead:
    """The audit head an export recorded in its manifest (`audit_head`: {count, hash})."""
    head = manifest.get("audit_head") if isinstance(manifest, dict) else None
    if not isinstance(head, dict) or not isinstance(head.get("count"), int) or not isinstance(head.get("hash"), str):
        raise ValueError("audit_head: the manifest records no audit head (count and hash)")
    return AuditHead(head["count"], head["hash"])
