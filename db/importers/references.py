"""Reference answers (docs/REFERENCE.md §3.1): `{"case_id", "reference_answer"}` a line, or a case line's key.

Each line names a known case once; the answer is not empty, holds no NUL and is at most 200,000 characters
(`db.rules.anchors.reference_problem`). Any bad line refuses the whole file, each problem naming file, line
and field. A case's answer is replaced when the text differs, with the digests before and after in the
audit log (db.rubrics.references), never the text.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import select

from db.importers.import_summary import _CASE_TABLE, LOOKUP_BATCH
from db.importers.writing import _Run
from db.rubrics.references import write_references
from db.rules.anchors import REFERENCE_FIELD, reference_problem
from db.rules.errors import Said
from db.rules.records import ReferenceRecord, check

#: References held before they are written (each may be long: the chunk is small).
CHUNK = 200


def _import_references(run: _Run, records: Iterator[tuple[int, dict]]) -> None:
    first_line: dict[str, int] = {}
    chunk: list[tuple[int, str, str]] = []
    for line, record in records:
        checked, errors = check(ReferenceRecord, record)
        for error in errors:
            run.problems.at(line, error)
        if checked is None:
            continue
        problem = reference_problem(checked.reference_answer)
        if problem is not None:
            run.problems.at(line, problem)
            continue
        if checked.case_id in first_line:
            run.problems.at(
                line,
                Said(
                    f"case_id {checked.case_id!r} repeats line {first_line[checked.case_id]}",
                    "import.case_repeats",
                    case_id=checked.case_id,
                    first=first_line[checked.case_id],
                ),
            )
            continue
        first_line[checked.case_id] = line
        run.summary.records += 1
        run.problems.scan(line, REFERENCE_FIELD, checked.reference_answer)
        chunk.append((line, checked.case_id, checked.reference_answer))
        if len(chunk) >= CHUNK:
            write_chunk(run, chunk)
            chunk = []
            run.progress(line, None, "lines")
    write_chunk(run, chunk)


def write_chunk(run: _Run, chunk: list[tuple[int, str, str]]) -> None:
    """The chunk's answers on their cases; an unknown case id is a problem of its line (nothing lands)."""
    if not chunk:
        return
    ids = sorted({case_id for _line, case_id, _text in chunk})
    known: dict[str, int] = {}
    for start in range(0, len(ids), LOOKUP_BATCH):
        batch = ids[start : start + LOOKUP_BATCH]
        known.update(
            run.connection.execute(
                select(_CASE_TABLE.c.case_id, _CASE_TABLE.c.id).where(_CASE_TABLE.c.case_id.in_(batch))
            ).all()
        )
    texts: dict[int, tuple[str, str]] = {}
    for line, case_id, text in chunk:
        pk = known.get(case_id)
        if pk is None:
            run.problems.at(
                line, Said(f"case_id: unknown case {case_id[:80]!r}", "references.unknown_case", case_id=case_id[:80])
            )
            continue
        texts[pk] = (case_id, text)
    if not run.writing():
        return
    written, audit_rows = write_references(run.connection, run.actor, texts)
    run.audit(audit_rows)
    run.summary.inserted += written.inserted
    run.summary.replaced += written.replaced
    run.summary.unchanged += written.unchanged
