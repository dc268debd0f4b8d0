"""Replaying the audit log against the database: the log must explain every label, rubric and assignment.

The keyed chain (db.audit) proves the log was not rewritten by someone without the key; the
replay proves the tables agree with it. Each entry that sets a label, a rubric version or an
assignment is applied in order; the result must equal the current rows exactly. So a label
edited directly, a deleted tail (its changes are missing from the log), a log emptied or
rebuilt, a row inserted without an entry — each shows up as a named difference.

Entries understood here (their writers):
- `label` / `check` / `adjudication`, key `CASE/MODEL/CRITERION/STAGE/GROUP` (checker saves,
  label imports replacing a row): the label's met, note and user;
- `label`, key `CASE/CODE/annotation/gN`, after {"labels": {criterion: {met, note}}} (the annotator's
  save of a response; the user is the entry's actor);
- `labels`, after {"rows": [[case, model, criterion, stage, group, met, user, note], ...]}
  (bulk inserts: imports and the demo);
- `rubric`, key `CASE vN` (authoring, audit) or `CASE` with after.version (imports): status and criteria;
- `rubrics`, after {"rows": [{case, version, status, criteria}]} (bulk inserts of the demo);
- `assignment`, key `rubric:CASE` or `label:CASE/CODE/groupN`: the assignee.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlmodel import Session, col

from db.audit import AuditHead, check_anchor, verify_chain
from db.models import NO_GROUP, Assignment, AuditLog, Case, Criterion, Label, Response, RubricVersion, User

#: Differences listed at most (the count is always exact).
MAX_LISTED = 200

LabelKey = tuple[str, str, str, str, int]  # case_id, model, criterion_id, stage, group_no


@dataclass
class ReplayReport:
    differences: list[str] = field(default_factory=list)
    n_differences: int = 0
    labels: int = 0
    rubric_versions: int = 0
    assignments: int = 0

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


def _entries(session: Session, entities: tuple[str, ...], batch: int = 5000) -> Iterator[AuditLog]:
    last_id = 0
    while True:
        rows = (
            session.execute(
                select(AuditLog)
                .where(col(AuditLog.id) > last_id, col(col(AuditLog.entity)).in_(entities))
                .order_by(col(AuditLog.id))
                .limit(batch)
            )
            .scalars()
            .all()
        )
        if not rows:
            return
        yield from rows
        last_id = rows[-1].id


def _group(text: str) -> int:
    return NO_GROUP if text in ("-", "", "None") else int(text)


# Labels -------------------------------------------------------------------------------------


def _logged_labels(session: Session, model_of_code: dict[tuple[str, str], str]) -> dict[LabelKey, tuple]:
    state: dict[LabelKey, tuple] = {}
    for entry in _entries(session, ("label", "check", "adjudication", "labels")):
        after = entry.after or {}
        if entry.entity == "labels":
            for case_id, model, cid, stage, group, met, user, note in after.get("rows", []):
                state[(case_id, model, cid, stage, int(group))] = (bool(met), user, note or None)
        elif entry.entity == "label" and "labels" in after:
            case_id, code, stage, group = entry.entity_key.rsplit("/", 3)
            model = model_of_code.get((case_id, code), f"?{code}")
            for cid, value in after["labels"].items():
                state[(case_id, model, cid, stage, int(group.lstrip("g")))] = (
                    bool(value["met"]),
                    entry.actor,
                    value.get("note") or None,
                )
        else:
            head, cid, stage, group = entry.entity_key.rsplit("/", 3)
            case_id, model = head.split("/", 1)
            user = after.get("user", after.get("annotator"))
            state[(case_id, model, cid, stage, _group(group))] = (bool(after["met"]), user, after.get("note") or None)
    return state


def _stored_labels(session: Session) -> dict[LabelKey, tuple]:
    table = Label.__table__
    rows = session.execute(
        select(
            col(col(Case.case_id)),
            col(col(Response.model)),
            table.c.criterion_id,
            table.c.stage,
            table.c.group_no,
            table.c.met,
            col(col(User.username)),
            table.c.note,
        )
        .join(Response, col(col(Response.id)) == table.c.response_id)
        .join(Case, col(col(Case.id)) == col(col(Response.case_pk)))
        .join(User, col(col(User.id)) == table.c.user_id)
    )
    return {
        (case_id, model, cid, stage, int(group)): (bool(met), user, note or None)
        for case_id, model, cid, stage, group, met, user, note in rows
    }


def _describe_label(value: tuple | None) -> str:
    if value is None:
        return "absent"
    met, user, note = value
    return f"met={str(met).lower()} by {user}" + (f" note={note!r}" if note else "")


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


def _logged_rubrics(session: Session) -> dict[tuple[str, int], dict[str, Any]]:
    state: dict[tuple[str, int], dict[str, Any]] = {}
    for entry in _entries(session, ("rubric", "rubrics")):
        after = entry.after or {}
        if entry.entity == "rubrics":
            for row in after.get("rows", []):
                state[(row["case"], int(row["version"]))] = {
                    "status": row["status"],
                    "criteria": _criteria_tuple(row["criteria"]),
                }
            continue
        if " v" in entry.entity_key:
            case_id, version = entry.entity_key.rsplit(" v", 1)
            key = (case_id, int(version))
        else:
            key = (entry.entity_key, int(after["version"]))
        current = state.setdefault(key, {"status": None, "criteria": None})
        if "status" in after:
            current["status"] = after["status"]
        if "criteria" in after:
            current["criteria"] = _criteria_tuple(after["criteria"])
    return state


def _stored_rubrics(session: Session) -> dict[tuple[str, int], dict[str, Any]]:
    versions = {
        rid: (case_id, version, status)
        for rid, case_id, version, status in session.execute(
            select(
                col(RubricVersion.id),
                col(col(Case.case_id)),
                col(col(RubricVersion.version)),
                col(col(RubricVersion.status)),
            ).join(Case, col(col(Case.id)) == col(col(RubricVersion.case_pk)))
        )
    }
    criteria: dict[int, list] = {}
    for rid, cid, text, tags in session.execute(
        select(
            col(Criterion.rubric_version_id),
            col(col(Criterion.criterion_id)),
            col(col(Criterion.text)),
            col(col(Criterion.tags)),
        ).order_by(col(col(Criterion.rubric_version_id)), col(col(Criterion.position)))
    ):
        criteria.setdefault(rid, []).append((cid.strip(), (text or "").strip(), tuple(dict.fromkeys(tags or []))))
    return {
        (case_id, version): {"status": status, "criteria": tuple(criteria.get(rid, []))}
        for rid, (case_id, version, status) in versions.items()
    }


# Assignments --------------------------------------------------------------------------------


def _logged_assignments(session: Session) -> dict[str, str | None]:
    return {entry.entity_key: (entry.after or {}).get("user") for entry in _entries(session, ("assignment",))}


def _stored_assignments(session: Session) -> dict[str, str | None]:
    rows = session.execute(
        select(
            col(Assignment.kind),
            col(col(Case.case_id)),
            col(col(Response.code)),
            col(col(Assignment.group_no)),
            col(col(User.username)),
        )
        .join(Case, col(col(Case.id)) == col(col(Assignment.case_pk)))
        .join(User, col(col(User.id)) == col(col(Assignment.user_id)))
        .outerjoin(Response, col(col(Response.id)) == col(col(Assignment.response_id)))
    )
    out = {}
    for kind, case_id, code, group, username in rows:
        key = f"{kind}:{case_id}" + (f"/{code}/group{group}" if code is not None else "")
        out[key] = username
    return out


# The replay ---------------------------------------------------------------------------------


def replay(session: Session) -> ReplayReport:
    """Every label, rubric version and assignment compared with what the audit log says it is."""
    report = ReplayReport()
    model_of_code = {
        (case_id, code): model
        for case_id, code, model in session.execute(
            select(col(Case.case_id), col(col(Response.code)), col(col(Response.model))).join(
                Case, col(col(Case.id)) == col(col(Response.case_pk))
            )
        )
    }
    logged, stored = _logged_labels(session, model_of_code), _stored_labels(session)
    report.labels = len(stored)
    for key in sorted(set(logged) | set(stored), key=lambda k: tuple(map(str, k))):
        if logged.get(key) != stored.get(key):
            case_id, model, cid, stage, group = key
            where = f"label {case_id}/{model}/{cid}/{stage}/{group if group != NO_GROUP else '-'}"
            report.add(
                f"{where}: audit log says {_describe_label(logged.get(key))}, "
                f"database has {_describe_label(stored.get(key))}"
            )
    logged_rubrics, stored_rubrics = _logged_rubrics(session), _stored_rubrics(session)
    report.rubric_versions = len(stored_rubrics)
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
    logged_assignments, stored_assignments = _logged_assignments(session), _stored_assignments(session)
    report.assignments = len(stored_assignments)
    for assignment_key in sorted(set(logged_assignments) | set(stored_assignments)):
        log_user, db_user = logged_assignments.get(assignment_key), stored_assignments.get(assignment_key)
        if log_user != db_user:
            logged_text, stored_text = log_user or "absent", db_user or "absent"
            report.add(f"assignment {assignment_key}: audit log says {logged_text}, database has {stored_text}")
    return report


def _zip_longest(a: tuple, b: tuple) -> list[tuple]:
    size = max(len(a), len(b))
    return [(a[i] if i < len(a) else None, b[i] if i < len(b) else None) for i in range(size)]


@dataclass
class AuditVerification:
    """`audit verify`: the keyed chain, the replay, and (optionally) an export's anchor."""

    entries: int
    problems: list[str]
    replay: ReplayReport

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_audit(session: Session, *, anchor: AuditHead | None = None) -> AuditVerification:
    chain = verify_chain(session)
    problems = []
    if not chain.ok:
        problems.append(f"audit chain broken at entry {chain.first_bad_id}: {chain.reason}")
    if anchor is not None:
        reason = check_anchor(session, anchor)
        if reason:
            problems.append(f"anchor: {reason}")
    report = replay(session)
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
