"""Cases (DESIGN §3.1) with their rubrics: validated, stored, replaced with the old value audit-logged."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import insert, select, update

from db import config
from db.importers import common
from db.importers.common import (
    _CASE_TABLE,
    _CRITERION_TABLE,
    _MISSING,
    _RUBRIC_TABLE,
    DIFFICULTIES,
    REGISTERS,
    ImportSummary,
)
from db.importers.reading import _extra, _kind_of, _text, _text_list
from db.importers.writing import _batches, _BulkInserter, _dump_json, _Run
from db.models import RubricStatus
from db.taxonomy import get_taxonomy

# Cases ---------------------------------------------------------------------------------------

CASE_FIELDS = (
    "case_id",
    "difficulty",
    "task",
    "task_labels",
    "subject",
    "subject_labels",
    "user_role",
    "clinical_context",
    "user_request",
    "rubrics",
)
OPTIONAL_CASE_FIELDS = ("register",)
#: Stored case columns compared on re-import (`register` is the column of the optional key).
_CASE_COLUMNS = (
    "difficulty",
    "task",
    "task_labels",
    "subject",
    "subject_labels",
    "user_role",
    "clinical_context",
    "user_request",
    "register",
    "extra",
)


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
    known = set(CASE_FIELDS) | set(OPTIONAL_CASE_FIELDS)
    extra = _extra({key: value for key, value in record.items() if key not in known}, errors)
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
    return {
        "case_id": case_id,
        "difficulty": difficulty,
        "task": task,
        "task_labels": canonical_labels,
        "subject": subject,
        "subject_labels": list(subject_labels),
        "user_role": user_role,
        "clinical_context": clinical_context,
        "user_request": user_request,
        "register": register,
        "extra": extra,
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
        for position, (_criterion_id, text, _tags) in enumerate(case["criteria"] or []):
            run.problems.scan(line, f"rubrics[{position}].criterion", text)
        chunk.append((line, case))
        if len(chunk) >= common.RECORD_CHUNK:
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
    run.audit(audit_rows)

    case_pk = dict(
        connection.execute(select(_CASE_TABLE.c.case_id, _CASE_TABLE.c.id).where(_CASE_TABLE.c.case_id.in_(ids))).all()
    )
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
        for row in connection.execute(
            select(_RUBRIC_TABLE.c.case_pk, _RUBRIC_TABLE.c.id, _RUBRIC_TABLE.c.version).where(
                _RUBRIC_TABLE.c.case_pk.in_(batch)
            )
        ):
            if row.case_pk not in latest or row.version > latest[row.case_pk][1]:
                latest[row.case_pk] = (row.id, row.version)
    stored_criteria: dict[int, list[tuple[str, str, list[str]]]] = {}
    for batch in _batches([version_id for version_id, _version in latest.values()]):
        for row in connection.execute(
            select(
                _CRITERION_TABLE.c.rubric_version_id,
                _CRITERION_TABLE.c.criterion_id,
                _CRITERION_TABLE.c.text,
                _CRITERION_TABLE.c.tags,
            )
            .where(_CRITERION_TABLE.c.rubric_version_id.in_(batch))
            .order_by(_CRITERION_TABLE.c.rubric_version_id, _CRITERION_TABLE.c.position)
        ):
            stored_criteria.setdefault(row.rubric_version_id, []).append(
                (row.criterion_id, row.text, list(row.tags or []))
            )

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
        versions.append(
            {
                "case_pk": pk,
                "version": version,
                "status": RubricStatus.approved.value,
                "created_at": run.now,
                "lock_version": 1,
            }
        )
        renewed.add(case["case_id"])
        audit_rows.append(
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
    if not versions:
        return renewed
    connection.execute(insert(_RUBRIC_TABLE), versions)
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
    rows = [
        (version_id[pk], position, criterion_id, text, _dump_json(tags))
        for case, pk in cases
        if case["case_id"] in renewed
        for position, (criterion_id, text, tags) in enumerate(case["criteria"], 1)
    ]
    _BulkInserter(run, _CRITERION_TABLE, ["rubric_version_id", "position", "criterion_id", "text", "tags"]).insert(rows)
    run.summary.rubric_versions += len(versions)
    run.summary.criteria += len(rows)
    run.audit(audit_rows)
    return renewed
