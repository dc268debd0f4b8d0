"""Cases (docs/REFERENCE.md §3.1) with their rubrics: validated, stored, replaced with the old value audit-logged."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from db import counts
from db.access.audit_digest import CASE_COLUMNS
from db.access.audit_records import case_digests_entry
from db.importers import import_summary
from db.importers.import_summary import (
    _CASE_TABLE,
    _CRITERION_TABLE,
    _RUBRIC_TABLE,
    ImportSummary,
)
from db.importers.reading import _extra
from db.importers.writing import _batches, _BulkInserter, _dump_json, _Run
from db.rubrics.references import write_references
from db.rules.anchors import REFERENCE_FIELD, reference_problem
from db.rules.enums import RubricStatus
from db.rules.errors import Said
from db.rules.records import CaseRecord, LookAlikes, check
from db.rules.taxonomy import get_taxonomy

# Cases ---------------------------------------------------------------------------------------

#: Stored case columns compared on re-import (`register` is the column of the optional key): the columns the
#: audit log keeps a digest of, so a re-import and the replay judge a case by the same fields.
_CASE_COLUMNS = CASE_COLUMNS


def _check_case(record: dict, taxonomy, summary: ImportSummary) -> tuple[dict | None, list[str]]:
    """The case as the importer stores it, or None and the problems (rules: `db.rules.records.CaseRecord`)."""
    checked, errors = check(CaseRecord, record)
    extra = dict(checked.model_extra or {}) if checked is not None else {}
    reference = extra.pop(REFERENCE_FIELD, None)  # kept apart from the case's extras (db.rubrics.references)
    if reference is not None:
        problem = reference_problem(reference)
        if problem is not None:
            errors.append(problem)
    extra = _extra(extra, errors) if checked is not None else {}
    if checked is None or errors:
        return None, errors
    canonical_labels: list[str] = []
    for label in checked.task_labels:
        theme = taxonomy.canonical_theme(label)
        if theme is None:
            summary.unknown_task_labels[label] += 1
            theme = label
        if theme not in canonical_labels:
            canonical_labels.append(theme)
    if checked.subject_labels and taxonomy.macro_category(checked.subject_labels) == "other":
        summary.unmapped_subjects[checked.subject_labels[0]] += 1
    return {
        "case_id": checked.case_id,
        "difficulty": checked.difficulty,
        "task": checked.task,
        "task_labels": canonical_labels,
        "subject": checked.subject,
        "subject_labels": list(checked.subject_labels),
        "user_role": checked.user_role,
        "clinical_context": checked.clinical_context,
        "user_request": checked.user_request,
        "register": checked.register_,
        "extra": extra,
        "reference": reference,
        "criteria": [(item.criterion_id, item.criterion, list(item.tags or [])) for item in checked.rubrics],
    }, errors


def _stored_case(row) -> dict:
    return {column: row._mapping[column] for column in _CASE_COLUMNS}


def _import_cases(run: _Run, records: Iterator[tuple[int, dict]]) -> None:
    taxonomy = get_taxonomy()
    first_line: dict[str, int] = {}
    chunk: list[tuple[int, dict]] = []
    known = LookAlikes(run.connection.execute(select(_CASE_TABLE.c.case_id)).scalars())
    for line, record in records:
        case, errors = _check_case(record, taxonomy, run.summary)
        if case is not None and (other := known.clash(case["case_id"])) is not None:
            errors.append(known.said("case_id", case["case_id"], other))
            case = None
        for error in errors:
            run.problems.at(line, error)
        if case is None:
            continue
        known.add(case["case_id"])
        if case["case_id"] in first_line:
            run.problems.at(
                line,
                Said(
                    f"case_id {case['case_id']!r} repeats line {first_line[case['case_id']]}",
                    "import.case_repeats",
                    case_id=case["case_id"],
                    first=first_line[case["case_id"]],
                ),
            )
            continue
        first_line[case["case_id"]] = line
        run.summary.records += 1
        for name in ("clinical_context", "user_request"):
            run.problems.scan(line, name, case[name])
        for position, (_criterion_id, text, _tags) in enumerate(case["criteria"] or []):
            run.problems.scan(line, f"rubrics[{position}].criterion", text)
        chunk.append((line, case))
        if len(chunk) >= import_summary.RECORD_CHUNK:
            _write_cases(run, chunk)
            chunk = []
            run.progress(line, None, "lines")
    _write_cases(run, chunk)


def _write_cases(run: _Run, chunk: list[tuple[int, dict]]) -> None:
    if not chunk or not run.writing():
        return
    connection = run.connection
    ids = [case["case_id"] for _line, case in chunk]
    existing = {
        row.case_id: row for row in connection.execute(select(_CASE_TABLE).where(_CASE_TABLE.c.case_id.in_(ids)))
    }
    new_rows, audit_rows, changed_ids = [], [], set()
    written: list[tuple[str, dict]] = []  # (case_id, stored values): their digests go to the audit log
    for _line, case in chunk:
        stored = existing.get(case["case_id"])
        values = {column: case[column] for column in _CASE_COLUMNS}
        if stored is None:
            new_rows.append({"case_id": case["case_id"], "created_at": run.now, **values})
            written.append((case["case_id"], values))
            continue
        before = _stored_case(stored)
        changed = {column: value for column, value in values.items() if before[column] != value}
        if changed:
            connection.execute(update(_CASE_TABLE).where(_CASE_TABLE.c.id == stored.id).values(**changed))
            changed_ids.add(case["case_id"])
            written.append((case["case_id"], values))
            audit_rows.append(
                {
                    "action": "update",
                    "entity": "case",
                    "entity_key": case["case_id"],
                    "before": {column: before[column] for column in changed},
                    "after": changed,
                }
            )
    if new_rows:
        connection.execute(insert(_CASE_TABLE), new_rows)
    digests = case_digests_entry(run.source, written)
    run.audit(audit_rows + ([digests] if digests else []))

    case_pk: dict[str, int] = dict(
        connection.execute(select(_CASE_TABLE.c.case_id, _CASE_TABLE.c.id).where(_CASE_TABLE.c.case_id.in_(ids))).all()
    )
    references = {
        case_pk[case["case_id"]]: (case["case_id"], case["reference"]) for _l, case in chunk if case["reference"]
    }
    if references:
        _written, reference_audit = write_references(connection, run.actor, references)
        run.audit(reference_audit)
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
    latest = _newest_rubrics(connection, [pk for _case, pk in cases])
    stored = _stored_criteria(connection, [version_id for version_id, _version in latest.values()])
    plan = _plan_rubrics(run, cases, latest, stored)
    if not plan.versions:
        return plan.renewed
    connection.execute(insert(_RUBRIC_TABLE), plan.versions)
    version_id = _new_version_ids(connection, plan.versions)
    rows = [
        (version_id[pk], position, criterion_id, text, _dump_json(tags))
        for case, pk in cases
        if case["case_id"] in plan.renewed
        for position, (criterion_id, text, tags) in enumerate(case["criteria"], 1)
    ]
    _BulkInserter(run, _CRITERION_TABLE, ["rubric_version_id", "position", "criterion_id", "text", "tags"]).insert(rows)
    run.summary.rubric_versions += len(plan.versions)
    run.summary.criteria += len(rows)
    run.audit(plan.audit_rows)
    counts.refresh_cases(run.session, plan.touched)  # their current rubric changed, with its criteria written above
    return plan.renewed


def _newest_rubrics(connection: Connection, pks: list[int]) -> dict[int, tuple[int, int]]:
    """case pk → (id, version) of its newest rubric version, for the cases that have one."""
    latest: dict[int, tuple[int, int]] = {}
    for batch in _batches(pks):
        for row in connection.execute(
            select(_RUBRIC_TABLE.c.case_pk, _RUBRIC_TABLE.c.id, _RUBRIC_TABLE.c.version).where(
                _RUBRIC_TABLE.c.case_pk.in_(batch)
            )
        ):
            if row.case_pk not in latest or row.version > latest[row.case_pk][1]:
                latest[row.case_pk] = (row.id, row.version)
    return latest


def _stored_criteria(connection: Connection, version_ids: list[int]) -> dict[int, list[tuple[str, str, list[str]]]]:
    """rubric version id → its criteria (criterion id, text, tags), in rubric order."""
    stored: dict[int, list[tuple[str, str, list[str]]]] = {}
    for batch in _batches(version_ids):
        for criterion in connection.execute(
            select(
                _CRITERION_TABLE.c.rubric_version_id,
                _CRITERION_TABLE.c.criterion_id,
                _CRITERION_TABLE.c.text,
                _CRITERION_TABLE.c.tags,
            )
            .where(_CRITERION_TABLE.c.rubric_version_id.in_(batch))
            .order_by(_CRITERION_TABLE.c.rubric_version_id, _CRITERION_TABLE.c.position)
        ):
            stored.setdefault(criterion.rubric_version_id, []).append(
                (criterion.criterion_id, criterion.text, list(criterion.tags or []))
            )
    return stored


@dataclass
class _RubricPlan:
    """The rubric versions an import adds, their audit entries, and the cases (by case_id and pk) that get one."""

    versions: list[dict] = field(default_factory=list)
    audit_rows: list[dict] = field(default_factory=list)
    renewed: set[str] = field(default_factory=set)
    touched: set[int] = field(default_factory=set)


def _plan_rubrics(
    run: _Run,
    cases: list[tuple[dict, int]],
    latest: dict[int, tuple[int, int]],
    stored: dict[int, list[tuple[str, str, list[str]]]],
) -> _RubricPlan:
    """A new approved version for each case whose criteria differ from its newest version's (or that has none)."""
    plan = _RubricPlan()
    for case, pk in cases:
        current = latest.get(pk)
        before = None
        if current is not None:
            old = stored.get(current[0], [])
            if old == case["criteria"]:
                continue
            before = {"version": current[1], "criteria": _criteria_snapshot(old)}
        version = current[1] + 1 if current else 1
        plan.versions.append(
            {
                "case_pk": pk,
                "version": version,
                "status": RubricStatus.approved.value,
                "created_at": run.now,
                "lock_version": 1,
            }
        )
        plan.renewed.add(case["case_id"])
        plan.touched.add(pk)
        plan.audit_rows.append(
            {
                "action": "import",
                "entity": "rubric",
                "entity_key": case["case_id"],
                "before": before,
                "after": {
                    "version": version,
                    "status": RubricStatus.approved.value,
                    "criteria": _criteria_snapshot(case["criteria"]),
                },
            }
        )
    return plan


def _new_version_ids(connection: Connection, versions: list[dict]) -> dict[int, int]:
    """case pk → id of the rubric version just inserted for it."""
    wanted = {(v["case_pk"], v["version"]) for v in versions}
    version_id = {}
    for batch in _batches(sorted({v["case_pk"] for v in versions})):
        for row in connection.execute(
            select(_RUBRIC_TABLE.c.id, _RUBRIC_TABLE.c.case_pk, _RUBRIC_TABLE.c.version).where(
                _RUBRIC_TABLE.c.case_pk.in_(batch)
            )
        ):
            if (row.case_pk, row.version) in wanted:
                version_id[row.case_pk] = row.id
    return version_id
