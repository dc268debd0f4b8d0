"""Entry points: one file or stream of a kind, in one transaction, with its summary."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

from db.importers.cases import _import_cases
from db.importers.import_summary import JUDGE_FORMATS, KINDS, ImportFailed, ImportSummary
from db.importers.judge import _detect_judge_format, _import_judge_rows, _import_official
from db.importers.labels import _import_labels
from db.importers.reading import _json_lines, _Problems
from db.importers.references import _import_references
from db.importers.responses import _import_responses
from db.importers.writing import _Run, db_time
from db.rules.errors import DiskFull, Said
from db.rules.progress_report import Progress, no_progress
from db.store.collector import collector_paused
from db.store.engine import is_disk_full, session_scope
from db.store.models import utcnow

# Entry points --------------------------------------------------------------------------------


def import_file(
    engine: Engine,
    kind: str,
    path: str | Path,
    *,
    fmt: str | None = None,
    actor: str = "cli",
    progress: Progress = no_progress,
    judge: str | None = None,
    override_freeze: bool = False,
) -> ImportSummary:
    """Import one file of `kind` (cases | responses | labels | judge) in one transaction.

    Raises ImportFailed (nothing written) on any bad line; returns what changed otherwise.
    `fmt` applies to judge files (decisions | local-judge | official; None: recognised from the
    content); `judge` names the judge where the file does not. A label file that would change annotation
    labels made final by an opened feedback round is refused, naming the round, unless `override_freeze`
    (then it lands and the audit log says which rounds it changed: db/importers/freeze_check.py).
    """
    path = Path(path)
    if not path.is_file():
        raise ImportFailed([Said(f"{path.name}: no such file", "import.no_file", file=path.name)])
    with open(path, "rb") as stream:
        return import_stream(
            engine,
            kind,
            path.name,
            stream,
            fmt=fmt,
            actor=actor,
            progress=progress,
            judge=judge,
            override_freeze=override_freeze,
        )


def import_stream(
    engine: Engine,
    kind: str,
    name: str,
    stream: BinaryIO | bytes,
    *,
    fmt: str | None = None,
    actor: str = "cli",
    progress: Progress = no_progress,
    judge: str | None = None,
    override_freeze: bool = False,
) -> ImportSummary:
    """As `import_file`, for an open binary stream or bytes (an uploaded file) called `name`."""
    if isinstance(stream, (bytes, bytearray)):
        stream = io.BytesIO(stream)
    fmt = _checked_format(kind, fmt, name, stream)
    summary = ImportSummary(kind=kind, source=name, fmt=fmt if kind == "judge" else None)
    problems = _Problems(name, summary)
    digest = hashlib.sha256()
    try:
        with session_scope(engine) as session:
            run = _new_run(session, name, actor, summary, problems, progress)
            run.override_freeze = override_freeze
            try:
                with collector_paused():
                    _read_and_write(run, kind, fmt, stream, judge, digest)
                if problems.errors:
                    raise _Refused()
                run.finish_bulk()
            finally:
                run.release()
            summary.sha256 = digest.hexdigest()
            if summary.inserted or summary.replaced or summary.placeholders:
                _audit_import(run, kind, name, summary)
    except _Refused:
        problems.raise_if_any()
    except (DBAPIError, DiskFull) as error:
        raise _database_refusal(name, error) from error
    progress(summary.records, summary.records, "done")
    return summary


class _Refused(Exception):
    """The file had bad lines: the transaction is rolled back and the collected problems are raised."""


def _checked_format(kind: str, fmt: str | None, name: str, stream: BinaryIO) -> str | None:
    """The format to read the file in (a judge file's recognised from its head when not given); refused with
    ImportFailed for an unknown kind, a format on a file other than judge decisions, or an unknown judge format."""
    if kind not in KINDS:
        raise ImportFailed(
            [
                Said(
                    f"{name}: unknown kind {kind!r} (cases, responses, labels or judge)",
                    "import.unknown_kind",
                    file=name,
                )
            ]
        )
    if kind != "judge" and fmt not in (None, "jsonl"):
        raise ImportFailed(
            [Said(f"{name}: --format {fmt} applies to judge files only", "import.format_judge_only", file=name)]
        )
    if kind == "judge":
        if fmt is None:
            head = stream.peek(4096)[:4096] if hasattr(stream, "peek") else _peek(stream)
            return _detect_judge_format(head, name)
        if fmt not in JUDGE_FORMATS:
            raise ImportFailed(
                [
                    Said(
                        f"{name}: --format must be one of {', '.join(JUDGE_FORMATS)}, found {fmt!r}",
                        "import.unknown_format",
                        file=name,
                    )
                ]
            )
    return fmt


def _new_run(
    session: Session, name: str, actor: str, summary: ImportSummary, problems: _Problems, progress: Progress
) -> _Run:
    """One import's state in its transaction, stamped with one time (as the database stores it too)."""
    connection = session.connection()
    now = utcnow()
    return _Run(
        session=session,
        connection=connection,
        source=name,
        actor=actor,
        summary=summary,
        problems=problems,
        progress=progress,
        now=now,
        stored_now=db_time(connection, now),
    )


def _read_and_write(run: _Run, kind: str, fmt: str | None, stream: BinaryIO, judge: str | None, digest: Any) -> None:
    """The file read by the importer of its kind (and judge format), which writes what it read."""
    if kind == "judge" and fmt == "official":
        _import_official(run, stream, judge, digest)
        return
    records = _json_lines(stream, run.problems, digest)
    if kind == "cases":
        _import_cases(run, records)
    elif kind == "responses":
        _import_responses(run, records)
    elif kind == "labels":
        _import_labels(run, records)
    elif kind == "references":
        _import_references(run, records)
    else:
        _import_judge_rows(run, records, fmt or "decisions", judge)


def _audit_import(run: _Run, kind: str, name: str, summary: ImportSummary) -> None:
    """The import's one audit entry: what it inserted, replaced and left, and the file's sha256."""
    run.audit(
        [
            {
                "action": "import",
                "entity": kind,
                "entity_key": name[:255],
                "before": None,
                "after": {
                    "inserted": summary.inserted,
                    "replaced": summary.replaced,
                    "unchanged": summary.unchanged,
                    "records": summary.records,
                    "sha256": summary.sha256,
                },
            }
        ]
    )


def _database_refusal(name: str, error: DBAPIError | DiskFull) -> ImportFailed:
    """The one-line reason when the database refused the import: a full disk, or the driver's first line."""
    if isinstance(error, DiskFull) or is_disk_full(error):
        return ImportFailed([Said(f"{name}: the disk is full; nothing was imported", "import.disk_full", file=name)])
    reason = str(error.orig).strip().splitlines()[0] if error.orig is not None else str(error)
    return ImportFailed(
        [Said(f"{name}: the database refused the import: {reason}", "import.db_refused", file=name, reason=reason)]
    )


def _peek(stream: BinaryIO) -> bytes:
    position = stream.tell()
    head = stream.read(4096)
    stream.seek(position)
    return head
