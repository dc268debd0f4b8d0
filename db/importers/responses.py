"""Responses (docs/REFERENCE.md §3.2), each given a stable opaque code."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection
from sqlmodel import Session

from db.access.audit_records import response_digests_entry
from db.importers import import_summary
from db.importers.import_summary import _CASE_TABLE, _LABEL_TABLE, _RESPONSE_TABLE, ImportSummary
from db.importers.reading import _Problems
from db.importers.writing import _Run, db_time, new_response_code
from db.rules.errors import Said, ValidationFailed
from db.rules.progress_report import no_progress
from db.rules.records import LookAlikes, ResponseRecord, check
from db.store.models import utcnow

# Responses -----------------------------------------------------------------------------------


def _case_pks(connection: Connection) -> dict[str, int]:
    return dict(connection.execute(select(_CASE_TABLE.c.case_id, _CASE_TABLE.c.id)).all())


def _import_responses(run: _Run, records: Iterator[tuple[int, dict]]) -> None:
    case_pk = _case_pks(run.connection)
    codes = set(run.connection.execute(select(_RESPONSE_TABLE.c.code)).scalars())
    models = LookAlikes(run.connection.execute(select(_RESPONSE_TABLE.c.model).distinct()).scalars())
    first_line: dict[tuple[str, str], int] = {}
    chunk: list[tuple[int, int, str, str]] = []
    for line, record in records:
        checked, errors = check(ResponseRecord, record)
        if checked is not None and (other := models.clash(checked.model)) is not None:
            errors.append(models.said("model", checked.model, other))
        if checked is not None and checked.case_id not in case_pk:
            errors.append(
                Said(
                    f"case_id {checked.case_id!r} is not a known case (import the cases first)",
                    "import.case_unknown_first",
                    case_id=checked.case_id,
                )
            )
        for error in errors:
            run.problems.at(line, error)
        if checked is None or errors:
            continue
        case_id, model, text = checked.case_id, checked.model, checked.response
        key = (case_id, model)
        if key in first_line:
            run.problems.at(
                line,
                Said(
                    f"model {model!r} for case_id {case_id!r} repeats line {first_line[key]}",
                    "import.response_repeats",
                    model=model,
                    case_id=case_id,
                    first=first_line[key],
                ),
            )
            continue
        first_line[key] = line
        models.add(model)
        run.summary.records += 1
        run.problems.scan(line, "response", text)
        chunk.append((line, case_pk[case_id], model, text))
        if len(chunk) >= import_summary.RECORD_CHUNK:
            _write_responses(run, chunk, codes)
            chunk = []
            run.progress(line, None, "lines")
    _write_responses(run, chunk, codes)


def _write_responses(run: _Run, chunk: list[tuple[int, int, str, str]], codes: set[str]) -> None:
    if not chunk or not run.writing():
        return
    connection = run.connection
    pks = sorted({pk for _line, pk, _model, _text in chunk})
    existing = {}
    for row in connection.execute(
        select(_RESPONSE_TABLE.c.id, _RESPONSE_TABLE.c.case_pk, _RESPONSE_TABLE.c.model, _RESPONSE_TABLE.c.text).where(
            _RESPONSE_TABLE.c.case_pk.in_(pks)
        )
    ):
        existing[(row.case_pk, row.model)] = row
    case_ids = {
        pk: case_id
        for case_id, pk in connection.execute(
            select(_CASE_TABLE.c.case_id, _CASE_TABLE.c.id).where(_CASE_TABLE.c.id.in_(pks))
        )
    }
    new_rows, audit_rows, replaced_ids = [], [], []
    for _line, pk, model, text in chunk:
        stored = existing.get((pk, model))
        if stored is None:
            new_rows.append(
                {
                    "case_pk": pk,
                    "model": model,
                    "text": text,
                    "length": len(text),
                    "code": new_response_code(codes),
                    "created_at": run.now,
                }
            )
        elif stored.text == text:
            run.summary.unchanged += 1
        else:
            connection.execute(
                update(_RESPONSE_TABLE).where(_RESPONSE_TABLE.c.id == stored.id).values(text=text, length=len(text))
            )
            replaced_ids.append(stored.id)
            audit_rows.append(
                {
                    "action": "replace",
                    "entity": "response",
                    "entity_key": f"{case_ids[pk]}/{model}",
                    "before": {"text": stored.text, "length": len(stored.text)},
                    "after": {"text": text, "length": len(text)},
                }
            )
    if new_rows:
        connection.execute(insert(_RESPONSE_TABLE), new_rows)
    written = [
        (case_ids[pk], model, text)
        for _line, pk, model, text in chunk
        if (stored := existing.get((pk, model))) is None or stored.text != text
    ]
    digests = response_digests_entry(run.source, written)
    if digests:
        audit_rows.append(digests)
    run.summary.inserted += len(new_rows)
    run.summary.replaced += len(replaced_ids)
    if replaced_ids:
        run.summary.relabel_needed += connection.execute(
            select(func.count(func.distinct(_LABEL_TABLE.c.response_id))).where(
                _LABEL_TABLE.c.response_id.in_(replaced_ids)
            )
        ).scalar_one()
    run.audit(audit_rows)


def write_responses(session: Session, source: str, actor: str, rows: list[tuple[str, str, str]]) -> ImportSummary:
    """Responses (case_id, model, text) written inside the caller's transaction as importing them would
    write them: checked by the same record rules, new ones with a fresh code, changed texts replaced
    and audited, every written text's digest logged. Raises ValidationFailed (the first problem) when
    a row breaks a rule; the caller's transaction then writes nothing."""
    connection = session.connection()
    now = utcnow()
    summary = ImportSummary(kind="responses", source=source)
    run = _Run(
        session=session,
        connection=connection,
        source=source,
        actor=actor,
        summary=summary,
        problems=_Problems(source, summary),
        progress=no_progress,
        now=now,
        stored_now=db_time(connection, now),
    )
    records = ({"case_id": case_id, "model": model, "response": text} for case_id, model, text in rows)
    _import_responses(run, enumerate(records, start=1))
    if run.problems.errors:
        first = str(run.problems.errors[0])
        raise ValidationFailed(first, key="import.in_file", params={"file": source, "reason": first})
    return summary
