"""Judge decisions (docs/REFERENCE.md §3.4).

Plain rows, the official local-judge output and per-model judgement files.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeGuard
from urllib.parse import unquote

from sqlalchemy import bindparam, select, update

from db import counts
from db.access.audit_records import judge_digests_entry
from db.importers import import_summary, official_judgements as official
from db.importers.import_summary import _JUDGE_TABLE
from db.importers.reading import EMPTY_FILE, _extra, _Problems, _reason, not_json
from db.importers.targets import _table_has_rows, _Targets
from db.importers.writing import _batches, _BulkInserter, _dump_json, _Run
from db.rules import limits
from db.rules.errors import Said
from db.rules.records import (
    JudgeDecisionRecord,
    LocalJudgeRecord,
    LookAlikes,
    OfficialCaseResults,
    OfficialCriterionResult,
    check,
    kind_of,
)
from db.store.distinct import distinct_values

# Judge decisions -----------------------------------------------------------------------------

_JUDGE_COLUMNS = ["judge", "response_id", "criterion_id", "met", "extra"]
#: Keys of a plain decision row; anything else is kept in JudgeDecision.extra.
_DECISION_KEYS = {"judge", "case_id", "model", "criterion_id", "met"}
#: Local-judge output rows echo the judge-items input; those keys are stored already
#: (case, response, criterion) and are not copied into every decision.
_LOCAL_JUDGE_KEYS = {"judge", "judge_model", "case_id", "model", "criterion_id", "criteria_met"}
_ECHOED_INPUT_KEYS = {"user_message", "response", "rubric_item"}
_LIMIT = limits.TEXT_LIMITS


def _check_row(record: dict, fmt: str, option: str | None) -> tuple[Any, list[str]]:
    """A judge row checked against its record model; the judge may be `judge_model` or `--judge NAME`."""
    data = record
    if "judge" not in record:
        named = record.get("judge_model", option)
        if named is not None:
            data = {**record, "judge": named}
    checked, errors = check(JudgeDecisionRecord if fmt == "decisions" else LocalJudgeRecord, data)
    hints = {"judge is missing": "judge is missing (give the judge's name in the file or with --judge NAME)"}
    if fmt == "decisions" and "met" not in record and "criteria_met" in record:
        hints["met is missing"] = "met is missing (this looks like local-judge output: use --format local-judge)"
    return checked, [hints.get(error, error) for error in errors]


def _detect_judge_format(head: bytes, name: str = "") -> str:
    # A `<model>_judge.json` is an official judgement file whatever it holds: one whose top level
    # is not a list is told so, rather than read line by line as decisions.
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"[") or model_of_judgement_file(name):
        return "official"
    first = head.split(b"\n", 1)[0]
    if b'"criteria_met"' in first:
        return "local-judge"
    return "decisions"


class _JudgeWriter:
    def __init__(self, run: _Run, targets: _Targets) -> None:
        self.run = run
        self.targets = targets
        self.had_rows = _table_has_rows(run.connection, _JUDGE_TABLE)
        self.inserter = _BulkInserter(run, _JUDGE_TABLE, _JUDGE_COLUMNS)
        self.seen: set[tuple[str, int]] = set()
        self.chunk: list[tuple] = []
        # Judges already known, by folded name: a new one that looks like a different one is refused.
        self.judges = LookAlikes(distinct_values(run.connection, _JUDGE_TABLE.c.judge))
        self.judges_taken: set[str] = set()

    def add(
        self,
        line: int,
        judge: str,
        case_id: str,
        model: str,
        criterion_id: str,
        met: bool,
        extra: dict | None,
        where: str = "",
    ) -> None:
        if judge not in self.judges_taken:
            other = self.judges.clash(judge)
            if other is not None:
                self.run.problems.at(line, self.judges.said(where + "judge", judge, other))
                return
            self.judges.add(judge)
            self.judges_taken.add(judge)
        errors: list[str] = []
        located = self.targets.locate(case_id, model, criterion_id, errors)
        if located is None:
            for error in errors:
                self.run.problems.at(
                    line,
                    Said(where + error, getattr(error, "key", None), **getattr(error, "params", {}))
                    if where
                    else error,
                )
            return
        response_id, _case_pk, position = located
        key = (judge, (response_id << 16) | position)
        if key in self.seen:
            self.run.problems.at(
                line,
                Said(
                    f"{where}criterion_id {criterion_id!r}: a second decision of judge {judge!r} "
                    f"for case_id {case_id!r}, model {model!r} (one per file)",
                    "import.judge_twice",
                    criterion=criterion_id,
                    judge=judge,
                    case_id=case_id,
                    model=model,
                ),
            )
            return
        self.seen.add(key)
        self.run.summary.records += 1
        if self.run.writing():
            self.chunk.append((judge, response_id, criterion_id, met, extra or None, case_id, model))
            if len(self.chunk) >= import_summary.ROW_CHUNK:
                self.flush()
                self.run.progress(line, None, "lines")

    def flush(self) -> None:
        chunk, self.chunk = self.chunk, []
        if not chunk or not self.run.writing():
            return
        connection = self.run.connection
        existing = {}
        if self.had_rows:
            response_ids = sorted({row[1] for row in chunk})
            for batch in _batches(response_ids):
                for decision_row in connection.execute(
                    select(
                        _JUDGE_TABLE.c.id,
                        _JUDGE_TABLE.c.judge,
                        _JUDGE_TABLE.c.response_id,
                        _JUDGE_TABLE.c.criterion_id,
                        _JUDGE_TABLE.c.met,
                        _JUDGE_TABLE.c.extra,
                    ).where(_JUDGE_TABLE.c.response_id.in_(batch))
                ):
                    existing[(decision_row.judge, decision_row.response_id, decision_row.criterion_id)] = decision_row
        new_rows: list[tuple] = []
        changes: list[dict[str, Any]] = []
        audit_rows: list[dict[str, Any]] = []
        touched: set[tuple[str, int]] = set()  # (judge, response): its decisions' digest goes to the audit log
        for judge, response_id, criterion_id, met, extra, case_id, model in chunk:
            stored = existing.get((judge, response_id, criterion_id))
            if stored is None:
                new_rows.append((judge, response_id, criterion_id, met, _dump_json(extra)))
                touched.add((judge, response_id))
            elif stored.met == met and (stored.extra or None) == extra:
                self.run.summary.unchanged += 1
            else:
                touched.add((judge, response_id))
                changes.append({"decision_id": stored.id, "met": met, "extra": extra})
                audit_rows.append(
                    {
                        "action": "replace",
                        "entity": "judge_decision",
                        "entity_key": f"{judge}/{case_id}/{model}/{criterion_id}",
                        "before": {"met": stored.met, "extra": stored.extra},
                        "after": {"met": met, "extra": extra},
                    }
                )
        self.inserter.insert(new_rows)
        counts.add_judge_decisions(connection, Counter(row[0] for row in new_rows))
        if changes:
            connection.execute(
                update(_JUDGE_TABLE)
                .where(_JUDGE_TABLE.c.id == bindparam("decision_id"))
                .values(met=bindparam("met"), extra=bindparam("extra")),
                changes,
            )
        self.run.summary.inserted += len(new_rows)
        self.run.summary.replaced += len(changes)
        digests = judge_digests_entry(connection, self.run.source, touched)
        self.run.audit(audit_rows + ([digests] if digests else []))


def _import_judge_rows(run: _Run, records: Iterator[tuple[int, dict]], fmt: str, judge_option: str | None) -> None:
    writer = _JudgeWriter(run, _Targets.load(run.connection))
    met_key = "met" if fmt == "decisions" else "criteria_met"
    consumed = _DECISION_KEYS if fmt == "decisions" else _LOCAL_JUDGE_KEYS | _ECHOED_INPUT_KEYS
    for line, record in records:
        get = record.get
        if fmt == "local-judge" and (
            get("parse_ok") is False or ("criteria_met" in record and get("criteria_met") is None)
        ):
            run.summary.unparsed += 1  # the official judge could not read its own answer: no decision
            continue
        judge = get("judge") if "judge" in record else get("judge_model") if "judge_model" in record else judge_option
        case_id, model, criterion_id, met = get("case_id"), get("model"), get("criterion_id"), get(met_key)
        # A plainly valid row (most of a large file) skips the record model, which names problems.
        if not (
            type(met) is bool
            and _plain(judge, _LIMIT["judge"])
            and _plain(case_id, _LIMIT["case_id"])
            and _plain(model, _LIMIT["model"])
            and _plain(criterion_id, _LIMIT["criterion_id"])
        ):
            checked, errors = _check_row(record, fmt, judge_option)
            if checked is None:
                for error in errors:
                    run.problems.at(line, error)
                continue
            judge, case_id, model, criterion_id = checked.judge, checked.case_id, checked.model, checked.criterion_id
            met = checked.met if fmt == "decisions" else checked.criteria_met
        extra = {key: value for key, value in record.items() if key not in consumed}
        if extra:
            errors = []
            _extra(extra, errors)
            if errors:
                run.problems.at(line, errors[0])
                continue
        writer.add(line, judge, case_id, model, criterion_id, met, extra)
    writer.flush()


def _plain(value: Any, max_length: int) -> TypeGuard[str]:
    """A non-blank ASCII string of at most `max_length` printable characters, no space at either end (anything
    else is checked by the record model, which knows look-alike spaces and fillers)."""
    return (
        type(value) is str
        and 0 < len(value) <= max_length
        and value.isascii()
        and value.isprintable()
        and value[0] != " "
        and value[-1] != " "
    )


_OFFICIAL_NAME = re.compile(r"^(?P<model>.+)_judge\.json$")


def model_of_judgement_file(name: str) -> str | None:
    """The model of an official `<model>_judge.json` (percent-escapes undone, as the export writes them)."""
    named = _OFFICIAL_NAME.match(Path(name).name)
    return unquote(named.group("model")) if named else None


def _official_items(data: str, problems: _Problems) -> Iterator[tuple[int, Any]]:
    """(line, item) of each element of a top-level JSON list, without building the whole list twice."""
    whitespace = re.compile(r"[ \t\r\n]*")

    def after_blanks(position: int) -> int:
        blanks = whitespace.match(data, position)
        assert blanks is not None  # the pattern matches even no blank at all
        return blanks.end()

    position = after_blanks(0)
    if not data.startswith("[", position):
        found = "an object" if data.startswith("{", position) else "something else"
        problems.at(
            data.count("\n", 0, position) + 1,
            Said(
                f"an official judgement file must be a JSON list of cases at its top level, found {found}",
                "import.official_not_list",
            ),
        )
        return
    position = after_blanks(position + 1)
    if data.startswith("]", position):
        return
    while True:
        line = data.count("\n", 0, position) + 1
        try:
            item, position = limits.raw_decode(data, position)
        except json.JSONDecodeError as error:
            problems.at(*not_json(data, error))
            return
        except limits.InputRejected as error:
            problems.at(line, Said(f"not accepted: {error}", "import.not_accepted", reason=_reason(error)))
            return
        yield line, item
        position = after_blanks(position)
        if data.startswith(",", position):
            position = after_blanks(position + 1)
            continue
        if data.startswith("]", position):
            if data[after_blanks(position + 1) :]:
                problems.at(
                    data.count("\n", 0, position) + 1,
                    Said("not valid JSON (extra data after the list)", "import.not_json_list"),
                )
            return
        problems.at(
            data.count("\n", 0, position) + 1, Said("not valid JSON (expected ',' or ']')", "import.not_json_list")
        )
        return


def _import_official(run: _Run, stream: BinaryIO, judge_option: str | None, digest) -> None:
    """An official judgement file: a JSON list of cases, each with its criteria results, one decision a result."""
    raw = stream.read()
    digest.update(raw)
    data = _official_text(run, raw)
    del raw
    if data is None:
        return
    file_model = model_of_judgement_file(run.source)
    if not judge_option:
        run.problems.at(
            None,
            Said(
                "the judge's name is needed for an official judgement file (--judge NAME)", "import.judge_name_needed"
            ),
        )
        return
    writer = _JudgeWriter(run, _Targets.load(run.connection))
    seen_cases: dict[tuple[str, str], int] = {}
    for index, (line, item) in enumerate(_official_items(data, run.problems)):
        case = _official_case(run, line, index, item, file_model, seen_cases)
        if case is None:
            continue
        for place, (at, result) in enumerate(case.results):
            _add_official_result(run, writer, line, judge_option, case, place, at, result)
    writer.flush()


def _official_text(run: _Run, raw: bytes) -> str | None:
    """The file's text, or None when it is not UTF-8 or holds nothing (the problem is reported)."""
    try:
        data = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        byte = f"0x{raw[error.start]:02x}"
        run.problems.at(line, Said(f"not valid UTF-8 (byte {byte})", "import.not_utf8", byte=byte))
        return None
    if not data.strip():
        run.problems.at(None, EMPTY_FILE)
        return None
    return data


@dataclass(frozen=True)
class _OfficialCase:
    """One checked item of an official file: its case and model, and its results that are objects (by place)."""

    case_id: str
    model: str
    results_key: str
    results: list[tuple[int, dict]]  # (index among all the item's results, the result)
    case_extra: dict[str, Any]  # the item's keys the import does not read, kept with each decision


def _official_case(
    run: _Run,
    line: int,
    index: int,
    item: Any,
    file_model: str | None,
    seen_cases: dict[tuple[str, str], int],
) -> _OfficialCase | None:
    """The item as a case of the file, or None when it is refused (reported) or repeats a case and model."""
    if type(item) is not dict:
        run.problems.at(
            line,
            Said(f"each item must be an object, found {kind_of(item)}", "import.item_not_object", found=kind_of(item)),
        )
        return None
    found = official.official_results(item)
    results_key, results = found if found is not None else ("criteria_results", None)
    # The scorer reads only the entries that are objects: they are the results, matched by their place among them.
    objects = None if results is None else [(at, entry) for at, entry in enumerate(results) if type(entry) is dict]
    canonical = {
        "case_id": official.official_case_id(item, index),
        "criteria_results": None if objects is None else [entry for _, entry in objects],
    }
    if "model" in item:
        canonical["model"] = item["model"]
    checked, errors = check(OfficialCaseResults, canonical)
    if checked is not None and checked.model is None and file_model is None:
        errors.append(
            Said(
                "model is missing (name the file <model>_judge.json or give model in each item)",
                "import.judge_model_missing",
            )
        )
    if checked is None or errors:
        for problem in errors:
            run.problems.at(line, problem)
        return None
    case_id, model = checked.case_id, checked.model or file_model
    assert model is not None  # refused above when neither the item nor the file names it
    if (case_id, model) in seen_cases:
        run.problems.at(
            line,
            Said(
                f"case_id {case_id!r} repeats line {seen_cases[(case_id, model)]}",
                "import.case_repeats",
                case_id=case_id,
                first=seen_cases[(case_id, model)],
            ),
        )
        return None
    seen_cases[(case_id, model)] = line
    consumed = official.consumed_case_keys(results_key)
    case_extra = {key: value for key, value in item.items() if key not in consumed}
    return _OfficialCase(case_id, model, results_key, objects or [], case_extra)


def _add_official_result(
    run: _Run,
    writer: _JudgeWriter,
    line: int,
    judge: str,
    case: _OfficialCase,
    place: int,
    at: int,
    result: dict,
) -> None:
    """One result of a case as a decision of `judge`; a null decision is counted as unparsed, a bad one reported."""
    prefix = f"{case.results_key}[{at}]."
    met = official.official_met(result.get("criteria_met"))
    if met is None:
        run.summary.unparsed += 1  # null: no decision (the official scorer would read it as not met)
        return
    criterion_id = result.get("criterion_id")
    if criterion_id is None:
        errors: list = []
        criterion_id = writer.targets.criterion_at(case.case_id, case.model, place, errors)
        if criterion_id is None:
            for problem in errors:
                run.problems.at(
                    line,
                    Said(prefix + problem, getattr(problem, "key", None), **getattr(problem, "params", {})),
                )
            return
    criterion, errors = check(OfficialCriterionResult, {"criterion_id": criterion_id, "criteria_met": met}, prefix)
    if criterion is None:
        for problem in errors:
            run.problems.at(line, problem)
        return
    extra = {key: value for key, value in result.items() if key not in {"criterion_id", "criteria_met"}}
    if case.case_extra:
        extra["case"] = case.case_extra
    errors = []
    _extra(extra, errors, name=f"{prefix}extra keys")
    if errors:
        run.problems.at(line, errors[0])
        return
    writer.add(line, judge, case.case_id, case.model, criterion.criterion_id, met, extra, where=prefix)
