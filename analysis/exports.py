"""The exports of DESIGN §3.5: gold, the public release, judgement files, judge items and SFT data.

Every export reads the database through `analysis.loader`, takes gold from `db.gold` (the one
definition), writes UTF-8 JSON with Chinese as is, and is deterministic: the same data gives the
same bytes. Rows follow case order (import order), then model, then criterion position.

`export_bundle` runs any of them into a temporary directory and returns a zip, for a page's
download button.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import shutil
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.engine import Engine

from analysis.loader import (load_cases, load_criteria, load_judge, load_label_decisions, load_label_notes,
                             load_register_overrides, load_responses)
from db.config import RUBRIC_SIZE
from db.contacts import find_contacts
from db.errors import ValidationFailed
from db.gold import DECISION, complete_responses, gold_labels, group_final_labels
from db.models import Stage
from db.progress import Progress, no_progress

EXPORT_KINDS = ("gold", "release", "judgements", "judge-items", "sft")
DEFAULT_TEMPLATE = Path(__file__).with_name("templates") / "judge_prompt.txt"
TEMPLATE_FIELDS = ("user_message", "response", "rubric_item")
DEFAULT_SEED = 20260101
DIFFICULTIES = ("low", "medium", "high")
RELEASE_LICENSE = "CC BY 4.0"

#: No key anywhere in a released case may contain one of these (DESIGN §3.5).
FORBIDDEN_KEY_PARTS = ("reference_answer", "source_file", "prompt_id", "row", "provenance", "physician", "doctor",
                       "qc", "repair", "internal")
RELEASE_FIELDS = ("case_id", "difficulty", "task", "task_labels", "subject", "subject_labels", "user_role",
                  "clinical_context", "user_request", "rubrics")
OPTIONAL_RELEASE_FIELDS = ("register",)

#: Explanations for SFT rows without a physician's note (the label alone).
GENERIC_EXPLANATION = {True: "回答满足该评分标准的要求。", False: "回答未满足该评分标准的要求。"}

_CHUNK = 20_000
#: Items a printed summary lists one by one (left-out cases, removed keys, warnings); the rest are counted.
MAX_LISTED = 50
BOOLEAN_TEXTS = ["false", "true", "null"]


def user_message(clinical_context: str, user_request: str) -> str:
    """What annotators and judges read as the user's message (DESIGN §3.1)."""
    return f"{clinical_context}\n\n{user_request}"


def is_forbidden_key(key: str) -> bool:
    lowered = str(key).casefold()
    return any(part in lowered for part in FORBIDDEN_KEY_PARTS)


# Summaries ------------------------------------------------------------------------------------

@dataclass
class ExportSummary:
    """What an export wrote; `str()` is the text the command line prints."""

    what: str
    target: Path
    counts: dict = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # file name → sha256
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        lines = [f"export {self.what}: {self.target}"]
        lines += [f"  {key}: {_plain(value)}" for key, value in self.counts.items()]
        lines += [f"  {name}  sha256 {digest}" for name, digest in self.files.items()]
        lines += [f"  {note}" for note in self.notes]
        if self.warnings:
            lines.append(f"  warnings ({len(self.warnings)}):")
            lines += [f"    {warning}" for warning in self.warnings[:MAX_LISTED]]
            if len(self.warnings) > MAX_LISTED:
                lines.append(f"    … and {len(self.warnings) - MAX_LISTED} more")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _listed(items: list[str], separator: str) -> str:
    shown = separator.join(items[:MAX_LISTED])
    return shown + (f"{separator}… and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else "")


def _plain(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key} {count}" for key, count in value.items()) or "none"
    return str(value)


# Writing helpers ------------------------------------------------------------------------------

def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _encoded(values) -> np.ndarray:
    """JSON text of each value, encoding each distinct value once."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))
    encoded = np.array([_json(value) for value in uniques] or [""], dtype=object)
    return encoded[codes]


def _encoded_arrow(values: pd.Series) -> pa.Array:
    """As `_encoded`, as an Arrow string array (for `_write_joined`)."""
    codes, uniques = pd.factorize(values)
    return _choose(codes, [_json(value) for value in uniques])


def _choose(codes: np.ndarray, texts: list[str]) -> pa.Array:
    """texts[code] for each code, as an Arrow string array."""
    return pa.array(texts or [""], type=pa.large_string()).take(pa.array(codes, type=pa.int64()))


def _nullable_codes(series: pd.Series) -> np.ndarray:
    """A nullable boolean column as codes into ("false", "true", "null")."""
    codes = series.fillna(False).to_numpy(bool).astype(np.int64)
    codes[series.isna().to_numpy()] = 2
    return codes


def _write_joined(path: Path, parts: list, rows: int) -> None:
    """Write one line per row, each the concatenation of `parts` (Arrow string arrays or str constants).

    Arrow joins the pieces in C; the joined array's data buffer is the file's bytes, lines in order.
    """
    with open(path, "wb") as handle:
        if rows == 0:
            return
        pieces = [part if isinstance(part, pa.Array) else pa.scalar(part, type=pa.large_string()) for part in parts]
        lines = pc.binary_join_element_wise(*pieces, pa.scalar("\n", type=pa.large_string()),
                                            pa.scalar("", type=pa.large_string()))
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset:lines.offset + rows + 1]
        handle.write(memoryview(lines.buffers()[2])[int(offsets[0]):int(offsets[-1])])


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_lines(path: Path, lines: Iterable[str], total: int, progress: Progress, note: str) -> tuple[int, str]:
    """Write JSON lines, reporting progress; returns (number of lines, sha256 of the file)."""
    writer = _HashingWriter(path)
    try:
        for line in lines:
            writer.add(line + "\n")
            if writer.lines % _CHUNK == 0:
                progress(writer.lines, total, note)
    finally:
        writer.close()
    progress(writer.lines, total, note)
    return writer.lines, writer.sha256


class _HashingWriter:
    """Appends text lines to a UTF-8 file in large blocks, hashing the bytes on the way (no second read)."""

    def __init__(self, path: Path, block: int = 2000) -> None:
        self.handle = open(path, "wb")
        self.digest = hashlib.sha256()
        self.pending: list[str] = []
        self.block = block
        self.lines = 0

    def add(self, line: str) -> None:
        self.pending.append(line)
        self.lines += 1
        if len(self.pending) >= self.block:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            data = "".join(self.pending).encode("utf-8")
            self.digest.update(data)
            self.handle.write(data)
            self.pending.clear()

    def close(self) -> None:
        self.flush()
        self.handle.close()

    @property
    def sha256(self) -> str:
        return self.digest.hexdigest()


def _write_json(path: Path, value, indent: int | None = 2) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=indent) + "\n", encoding="utf-8", newline="\n")


def _prepare_dir(directory: Path, names: Iterable[str]) -> Path:
    """Create the output directory and remove earlier outputs of ours, so no stale file survives."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ValidationFailed(f"{directory}: exists and is not a directory")
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).unlink(missing_ok=True)
    return directory


# Shared frames --------------------------------------------------------------------------------

def _response_keys(engine: Engine) -> pd.DataFrame:
    return load_responses(engine)[["response_id", "case_pk", "case_id", "model"]]


def _current_criteria(engine: Engine, *, text: bool = False) -> pd.DataFrame:
    columns = ["case_pk", "criterion_id", "position"] + (["text", "tags"] if text else [])
    return load_criteria(engine, text=text)[columns]


def _in_current_rubric(decisions: pd.DataFrame, responses: pd.DataFrame, criteria: pd.DataFrame) -> pd.DataFrame:
    """Decisions on a criterion of their case's current approved rubric, with case and position."""
    frame = decisions.merge(responses, on="response_id", how="inner")
    return frame.merge(criteria[["case_pk", "criterion_id", "position"]], on=["case_pk", "criterion_id"], how="inner")


def _decision_order(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["case_pk", "model", "position", "criterion_id"], na_position="last", kind="stable",
                             ignore_index=True)


# gold -----------------------------------------------------------------------------------------

def gold_frame(engine: Engine) -> pd.DataFrame:
    """Every decision with gold, in export order: case_id, model, criterion_id, met, source, group1, group2."""
    gold = gold_labels(load_label_decisions(engine))
    frame = gold.merge(_response_keys(engine), on="response_id", how="inner")
    # Left join: a gold decision on a criterion outside the current rubric is still gold; it sorts last.
    frame = frame.merge(_current_criteria(engine), on=["case_pk", "criterion_id"], how="left")
    return _decision_order(frame)


def export_gold(engine: Engine, path: Path, progress: Progress = no_progress) -> ExportSummary:
    """`export gold FILE`: one JSON line per decision that has gold (DESIGN §3.5)."""
    progress(0, None, "reading labels")
    frame = gold_frame(engine)
    rows = len(frame)
    progress(0, rows, "gold rows")
    parts = ['{"case_id": ', _encoded_arrow(frame["case_id"]), ', "model": ', _encoded_arrow(frame["model"]),
             ', "criterion_id": ', _encoded_arrow(frame["criterion_id"]), ', "met": ',
             _choose(frame["met"].to_numpy(bool).astype(np.int64), BOOLEAN_TEXTS), ', "source": ',
             _encoded_arrow(frame["source"]), ', "group1": ', _choose(_nullable_codes(frame["group1"]), BOOLEAN_TEXTS),
             ', "group2": ', _choose(_nullable_codes(frame["group2"]), BOOLEAN_TEXTS), "}"]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_joined(path, parts, rows)
    progress(rows, rows, "gold rows")
    by_source = frame["source"].value_counts().sort_index()
    return ExportSummary("gold", path, counts={
        "rows": rows, "by source": {str(k): int(v) for k, v in by_source.items()},
        "responses": int(frame[["case_id", "model"]].drop_duplicates().shape[0]) if rows else 0,
    }, files={path.name: sha256_file(path)})


# release --------------------------------------------------------------------------------------

def _strip_forbidden(value, path: str, removed: list[str]):
    """A copy of `value` without keys matching FORBIDDEN_KEY_PARTS, at any depth; `removed` gets their paths."""
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if is_forbidden_key(key):
                removed.append(where)
                continue
            kept[key] = _strip_forbidden(item, where, removed)
        return kept
    if isinstance(value, list):
        return [_strip_forbidden(item, f"{path}[{i}]", removed) for i, item in enumerate(value)]
    return value


def _strings(value, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


def _release_problems(record: dict, size: int) -> list[str]:
    """Field-level problems of one release record (empty when it is valid)."""
    problems = []
    for name in ("case_id", "task", "subject", "user_role", "clinical_context", "user_request"):
        if not isinstance(record.get(name), str):
            problems.append(f"field {name}: must be a string")
    if not record.get("case_id"):
        problems.append("field case_id: must not be empty")
    if record.get("difficulty") not in DIFFICULTIES:
        problems.append(f"field difficulty: {record.get('difficulty')!r} is not one of {', '.join(DIFFICULTIES)}")
    for name in ("task_labels", "subject_labels"):
        value = record.get(name)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            problems.append(f"field {name}: must be a list of strings")
    if "register" in record and record["register"] not in ("lay", "professional"):
        problems.append(f"field register: {record['register']!r} is not lay or professional")
    rubrics = record.get("rubrics")
    if not isinstance(rubrics, list) or len(rubrics) != size:
        count = len(rubrics) if isinstance(rubrics, list) else "no"
        problems.append(f"field rubrics: {count} items, expected exactly {size}")
        return problems
    seen = set()
    for i, item in enumerate(rubrics):
        if not isinstance(item.get("criterion_id"), str) or not item["criterion_id"]:
            problems.append(f"field rubrics[{i}].criterion_id: must be a non-empty string")
        elif item["criterion_id"] in seen:
            problems.append(f"field rubrics[{i}].criterion_id: {item['criterion_id']!r} appears twice")
        seen.add(item.get("criterion_id"))
        if not isinstance(item.get("criterion"), str) or not item["criterion"].strip():
            problems.append(f"field rubrics[{i}].criterion: must be a non-empty string")
        if "tags" in item and (not isinstance(item["tags"], list) or not all(isinstance(t, str) for t in item["tags"])):
            problems.append(f"field rubrics[{i}].tags: must be a list of strings")
    return problems


def release_schema(size: int = RUBRIC_SIZE) -> dict:
    """JSON Schema (draft 2020-12) of one line of the release's cases.jsonl."""
    string_list = {"type": "array", "items": {"type": "string"}}
    forbidden = "|".join(re.escape(part) for part in FORBIDDEN_KEY_PARTS)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://clinconsensus.example/schema/case.json",
        "title": "ClinConsensus case",
        "description": f"One line of cases.jsonl: a Chinese clinical case with exactly {size} rubric criteria.",
        "type": "object",
        "required": list(RELEASE_FIELDS),
        "properties": {
            "case_id": {"type": "string", "minLength": 1},
            "difficulty": {"enum": list(DIFFICULTIES)},
            "task": {"type": "string"},
            "task_labels": string_list,
            "subject": {"type": "string"},
            "subject_labels": string_list,
            "user_role": {"type": "string"},
            "clinical_context": {"type": "string"},
            "user_request": {"type": "string"},
            "register": {"enum": ["lay", "professional"]},
            "rubrics": {
                "type": "array", "minItems": size, "maxItems": size,
                "items": {
                    "type": "object",
                    "required": ["criterion_id", "criterion"],
                    "properties": {"criterion_id": {"type": "string", "minLength": 1},
                                   "criterion": {"type": "string", "minLength": 1},
                                   "tags": string_list},
                    "additionalProperties": False,
                },
            },
        },
        "propertyNames": {"not": {"pattern": f"(?i)({forbidden})"}},
    }


def release_records(engine: Engine, size: int = RUBRIC_SIZE) -> tuple[list[dict], list[str], list[str], list[str]]:
    """(records, left-out case ids, removed key paths, contact warnings) of the release, unvalidated."""
    cases = load_cases(engine, text=True).merge(load_register_overrides(engine), on="case_pk", how="left")
    criteria = _current_criteria(engine, text=True)
    by_case = {pk: group for pk, group in criteria.groupby("case_pk", sort=False)}
    records, left_out, removed, warnings = [], [], [], []
    for case in cases.itertuples(index=False):
        rubric = by_case.get(case.case_pk)
        if rubric is None:
            left_out.append(case.case_id)
            continue
        items = []
        for criterion_id, text, tags in zip(rubric["criterion_id"], rubric["text"], rubric["tags"]):
            item = {"criterion_id": criterion_id, "criterion": text}
            if tags:
                item["tags"] = list(tags)
            items.append(item)
        record = {"case_id": case.case_id, "difficulty": case.difficulty, "task": case.task,
                  "task_labels": list(case.task_labels), "subject": case.subject,
                  "subject_labels": list(case.subject_labels), "user_role": case.user_role,
                  "clinical_context": case.clinical_context, "user_request": case.user_request, "rubrics": items}
        if isinstance(case.register_override, str) and case.register_override:
            record["register"] = case.register_override
        case_removed: list[str] = []
        extra = _strip_forbidden(dict(case.extra or {}), "", case_removed)
        for key, value in extra.items():
            if key in record or key in RELEASE_FIELDS or key in OPTIONAL_RELEASE_FIELDS:
                continue  # the stored columns are the truth for the release's own fields
            record[key] = value
        removed += [f"{case.case_id}: {where}" for where in case_removed]
        for where, text in _strings(record, ""):
            for kind, masked in find_contacts(text):
                warnings.append(f"{case.case_id} {where}: {kind} {masked}")
        records.append(record)
    return records, left_out, removed, warnings


RELEASE_FILES = ("cases.jsonl", "schema.json", "counts.json", "README.md", "SHA256SUMS")


def export_release(engine: Engine, directory: Path, progress: Progress = no_progress,
                   size: int = RUBRIC_SIZE) -> ExportSummary:
    """`export release DIR`: the public rubric-only release, validated before anything is written."""
    progress(0, None, "reading cases")
    records, left_out, removed, warnings = release_records(engine, size)
    problems = [f"case {record.get('case_id')!r}: {problem}" for record in records
                for problem in _release_problems(record, size)]
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise ValidationFailed(f"release not written, {len(problems)} problem(s): {shown}")
    directory = _prepare_dir(Path(directory), RELEASE_FILES)
    _write_lines(directory / "cases.jsonl", (_json(record) for record in records), len(records), progress, "cases")
    _write_json(directory / "schema.json", release_schema(size))
    counts = release_counts(records, size)
    _write_json(directory / "counts.json", counts)
    (directory / "README.md").write_text(_release_card(counts, size), encoding="utf-8", newline="\n")
    sums = {name: sha256_file(directory / name) for name in sorted(RELEASE_FILES[:-1])}
    (directory / "SHA256SUMS").write_text("".join(f"{digest}  {name}\n" for name, digest in sums.items()),
                                          encoding="utf-8", newline="\n")
    summary = ExportSummary("release", directory, counts={
        "cases": len(records), "criteria": counts["rubrics"], "left out (no approved rubric)": len(left_out),
    }, files=sums)
    if left_out:
        summary.notes.append("left out, no approved rubric: " + _listed(left_out, ", "))
    if removed:
        summary.notes.append(f"removed {len(removed)} forbidden key(s): " + _listed(removed, "; "))
    summary.warnings = [f"contact-like string, review by hand: {warning}" for warning in warnings]
    return summary


def release_counts(records: list[dict], size: int) -> dict:
    def tally(values: Iterable[str]) -> dict[str, int]:
        return dict(sorted(Counter(values).items()))

    return {
        "cases": len(records),
        "rubrics": sum(len(record["rubrics"]) for record in records),
        "rubrics_per_case": size,
        "difficulty": tally(record["difficulty"] for record in records),
        "task_labels": tally(label for record in records for label in record["task_labels"]),
        "subject_labels": tally(label for record in records for label in record["subject_labels"]),
    }


def _release_card(counts: dict, size: int) -> str:
    def table(title: str, values: dict[str, int]) -> str:
        rows = "\n".join(f"| {name} | {count} |" for name, count in values.items()) or "| – | 0 |"
        return f"| {title} | cases |\n|---|---|\n{rows}\n"

    return f"""# ClinConsensus — rubric release

Chinese clinical cases, each with exactly {size} case-specific binary criteria written and audited by
physicians (two independent expert groups). This release contains the cases and their approved
rubrics only: no model responses, no labels and no names of the people who wrote or checked them.

## Counts

- cases: {counts['cases']}
- rubric criteria: {counts['rubrics']} ({size} per case)

{table('difficulty', counts['difficulty'])}
{table('task label', counts['task_labels'])}
{table('subject label', counts['subject_labels'])}
## Files

- `cases.jsonl` — one case per line (UTF-8 JSON Lines).
- `schema.json` — JSON Schema (draft 2020-12) of one line of `cases.jsonl`.
- `counts.json` — the counts above.
- `SHA256SUMS` — SHA-256 of every other file.

## Schema of a line

| field | type | meaning |
|---|---|---|
| case_id | string | unique id |
| difficulty | "low" \\| "medium" \\| "high" | |
| task | string | primary task theme |
| task_labels | [string] | task themes (multi-label) |
| subject | string | primary specialty |
| subject_labels | [string] | specialty labels; the first decides the macro-category |
| user_role | string | the stated role of the person asking |
| clinical_context | string | the clinical record |
| user_request | string | the question |
| rubrics | [{{criterion_id, criterion, tags?}}] | exactly {size} criteria |
| register | "lay" \\| "professional" (optional) | overrides the role-keyword rule |

The message a model answers (and a judge reads) is `clinical_context + "\\n\\n" + user_request`.
A model's response is graded criterion by criterion (met / not met); with s met criteria out of
N, CACS@k = (s − k + 1) / (N − k + 1) when s ≥ k, else 0.

## License

The data of this release is licensed under the Creative Commons Attribution 4.0 International
license ({RELEASE_LICENSE}, https://creativecommons.org/licenses/by/4.0/). Cite the ClinConsensus
benchmark when you use it.

## Verify

Inside this directory:

```
sha256sum -c SHA256SUMS
python -c "import json, jsonschema; s = json.load(open('schema.json')); \\
[jsonschema.validate(json.loads(l), s) for l in open('cases.jsonl', encoding='utf-8')]"
```
"""


# judgements -----------------------------------------------------------------------------------

def parse_source(source: str) -> tuple[str, str | None]:
    """("gold" | "group1" | "group2" | "judge", judge name or None)."""
    source = (source or "gold").strip()
    if source in ("gold", "group1", "group2"):
        return source, None
    if source.startswith("judge:") and source[len("judge:"):].strip():
        return "judge", source[len("judge:"):].strip()
    raise ValidationFailed(f"source {source!r}: expected gold, group1, group2 or judge:NAME")


def source_decisions(engine: Engine, source: str) -> pd.DataFrame:
    """response_id, criterion_id, met of every decision the source has."""
    kind, judge = parse_source(source)
    if kind == "judge":
        decisions = load_judge(engine)
        decisions = decisions[decisions["judge"] == judge]
        if decisions.empty:
            raise ValidationFailed(f"source {source!r}: no decisions of judge {judge!r}")
        return decisions[["response_id", "criterion_id", "met"]].reset_index(drop=True)
    labels = load_label_decisions(engine)
    if kind == "gold":
        return gold_labels(labels)[["response_id", "criterion_id", "met"]]
    final = group_final_labels(labels)
    final = final[final["group_no"] == (1 if kind == "group1" else 2)]
    return final[["response_id", "criterion_id", "met"]].reset_index(drop=True)


_UNSAFE_IN_FILENAME = set('/\\:*?"<>|%') | {chr(code) for code in range(32)} | {chr(127)}


def model_filename(model: str) -> str:
    """`<model>_judge.json`, percent-encoding characters no file name can hold (reversible: `unquote`)."""
    def encode(index: int, char: str) -> str:
        unsafe = (char in _UNSAFE_IN_FILENAME or (index == 0 and char == ".")
                  or (index == len(model) - 1 and char in ". "))
        return "".join(f"%{byte:02X}" for byte in char.encode("utf-8")) if unsafe else char

    return "".join(encode(i, c) for i, c in enumerate(model)) + "_judge.json"


JUDGEMENTS_MANIFEST = "manifest.json"


def export_judgements(engine: Engine, directory: Path, source: str = "gold",
                      progress: Progress = no_progress) -> ExportSummary:
    """`export judgements DIR --source …`: one official `<model>_judge.json` per model (complete responses)."""
    parse_source(source)  # a bad source fails before any work
    progress(0, None, "reading decisions")
    decisions = source_decisions(engine, source)
    responses = load_responses(engine)[["response_id", "case_pk", "case_id", "model"]]
    criteria = _current_criteria(engine)
    per_case = criteria.groupby("case_pk").size()
    decisions = _in_current_rubric(decisions, responses, criteria)
    needed = responses.set_index("response_id")["case_pk"].map(per_case)
    complete = set(complete_responses(decisions, needed.dropna()).tolist())
    have = decisions.groupby("response_id")["criterion_id"].nunique()

    left_out = []
    for row in responses.sort_values(["case_pk", "model"], kind="stable").itertuples(index=False):
        if row.response_id in complete:
            continue
        n = per_case.get(row.case_pk)
        reason = ("no approved rubric" if n is None else
                  f"incomplete: {int(have.get(row.response_id, 0))} of {int(n)} criteria labelled by {source}")
        left_out.append({"case_id": row.case_id, "model": row.model, "reason": reason})

    decisions = _decision_order(decisions[decisions["response_id"].isin(complete)])
    models = sorted(responses["model"].unique().tolist())
    filenames = {model: model_filename(model) for model in models}
    clashes = [name for name, count in Counter(name.casefold() for name in filenames.values()).items() if count > 1]
    if clashes:
        raise ValidationFailed(f"models whose file names differ only in case: {', '.join(clashes)}")
    directory = _prepare_dir(Path(directory), [JUDGEMENTS_MANIFEST])
    for stale in directory.glob("*_judge.json"):
        stale.unlink()

    entries_of: dict[str, list[dict]] = {model: [] for model in models}
    current = None
    for index, (response_id, model, case_id, criterion_id, met) in enumerate(zip(
            decisions["response_id"].tolist(), decisions["model"].tolist(), decisions["case_id"].tolist(),
            decisions["criterion_id"].tolist(), decisions["met"].tolist())):
        if response_id != current:
            current = response_id
            results: list[dict] = []
            entries_of[model].append({"case_id": case_id, "criteria_results": results})
        results.append({"criterion_id": criterion_id, "criteria_met": bool(met)})
        if index % _CHUNK == 0:
            progress(index, len(decisions), "decisions")

    files, per_model = {}, {}
    for model in models:
        entries = entries_of[model]
        left = sum(1 for item in left_out if item["model"] == model)
        per_model[model] = {"file": filenames[model] if entries else None, "responses": len(entries),
                            "left_out": left}
        if entries:
            _write_json(directory / filenames[model], entries)
            files[filenames[model]] = sha256_file(directory / filenames[model])
    progress(len(decisions), len(decisions), "decisions")

    manifest = {"source": source, "rubric_size": RUBRIC_SIZE, "files": {name: model for model, name in
                                                                          filenames.items() if name in files},
                "models": per_model, "sha256": files, "left_out": left_out}
    _write_json(directory / JUDGEMENTS_MANIFEST, manifest)
    summary = ExportSummary("judgements", directory, counts={
        "source": source, "models": len(files),
        "responses": sum(item["responses"] for item in per_model.values()), "left out": len(left_out)},
        files=files)
    if left_out:
        summary.notes.append(f"{len(left_out)} response(s) left out (listed with the reason in {JUDGEMENTS_MANIFEST})")
    empty = [model for model, item in per_model.items() if not item["responses"]]
    if empty:
        summary.notes.append("no complete response, no file: " + ", ".join(empty))
    return summary


# judge items ----------------------------------------------------------------------------------

def _cases_with_text(engine: Engine) -> pd.DataFrame:
    return load_cases(engine, text=True)[["case_pk", "case_id", "clinical_context", "user_request"]]


def export_judge_items(engine: Engine, path: Path, progress: Progress = no_progress) -> ExportSummary:
    """`export judge-items FILE`: one row per (response, criterion of the current approved rubric)."""
    progress(0, None, "reading cases and responses")
    cases = _cases_with_text(engine)
    criteria = _current_criteria(engine, text=True)
    responses = load_responses(engine, text=True)
    rubric_of = {pk: (_encoded(group["criterion_id"]), _encoded(group["text"]))
                 for pk, group in criteria.groupby("case_pk", sort=False)}
    responses = responses[responses["case_pk"].isin(rubric_of)]
    responses_of = {pk: group for pk, group in responses.groupby("case_pk", sort=False)}
    total = int(sum(len(responses_of[pk]) * len(rubric_of[pk][0]) for pk in responses_of))

    def lines() -> Iterator[str]:
        for case in cases.itertuples(index=False):
            if case.case_pk not in responses_of:
                continue
            message = _json(user_message(case.clinical_context, case.user_request))
            case_id = _json(case.case_id)
            criterion_ids, texts = rubric_of[case.case_pk]
            for model, text in zip(responses_of[case.case_pk]["model"], responses_of[case.case_pk]["text"]):
                response, model = _json(text), _json(model)
                for criterion_id, item in zip(criterion_ids, texts):
                    yield (f'{{"user_message": {message}, "response": {response}, "rubric_item": {item}, '
                           f'"case_id": {case_id}, "model": {model}, "criterion_id": {criterion_id}}}')

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows, digest = _write_lines(path, lines(), total, progress, "judge items")
    without_rubric = int((~load_responses(engine)["case_pk"].isin(rubric_of)).sum())
    summary = ExportSummary("judge-items", path, counts={
        "rows": rows, "responses": len(responses), "cases": len(responses_of),
        "responses left out (no approved rubric)": without_rubric}, files={path.name: digest})
    return summary


# sft ------------------------------------------------------------------------------------------

EXPLANATION_RULE = ("explanation = the first non-empty physician note that supports the gold label: the "
                    "adjudication note; else a check note whose label equals gold (group 1, then group 2); "
                    "else an annotation note whose label equals gold (group 1, then group 2); else a generic "
                    "sentence stating met / not met")
SFT_FILES = ("train.jsonl", "dev.jsonl", "heldout.jsonl", "manifest.json", "judge_prompt.txt")


def read_template(path: Path | None) -> str:
    """The judge prompt template; it must contain each of {user_message}, {response}, {rubric_item}."""
    path = Path(path) if path else DEFAULT_TEMPLATE
    try:
        template = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationFailed(f"{path}: no such template file") from None
    except UnicodeDecodeError as error:
        raise ValidationFailed(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    missing = [name for name in TEMPLATE_FIELDS if "{" + name + "}" not in template]
    if missing:
        raise ValidationFailed(f"{path}: the template lacks the placeholder(s) "
                               + ", ".join("{" + name + "}" for name in missing))
    return template


_PLACEHOLDER = re.compile(r"\{(" + "|".join(TEMPLATE_FIELDS) + r")\}")


class PromptTemplate:
    """A judge prompt template split once into literal parts and placeholders.

    `fill` takes plain values; `fill_json_body` takes the values' JSON bodies (see `_json_body`) and
    gives the body of the filled prompt — how SFT rows are assembled without encoding each prompt.
    Text inside a value that looks like a placeholder stays as is (one pass).
    """

    def __init__(self, template: str) -> None:
        pieces = _PLACEHOLDER.split(template)  # literal, name, literal, name, …, literal
        self.literals = pieces[0::2]
        self.names = pieces[1::2]
        self.json_literals = [_json_body(piece) for piece in self.literals]

    @staticmethod
    def _join(literals: list[str], names: list[str], values: dict[str, str]) -> str:
        out = [literals[0]]
        for name, literal in zip(names, literals[1:]):
            out.append(values[name])
            out.append(literal)
        return "".join(out)

    def fill(self, **values: str) -> str:
        return self._join(self.literals, self.names, values)

    def fill_json_body(self, bodies: dict[str, str]) -> str:
        return self._join(self.json_literals, self.names, bodies)


def fill_template(template: str, **values: str) -> str:
    """The prompt for one (user message, response, rubric item)."""
    return PromptTemplate(template).fill(**values)


def _json_body(text: str) -> str:
    """The JSON string literal of `text` without its quotes.

    JSON escapes character by character, so bodies of pieces concatenate to the body of the whole:
    a prompt row is assembled from pieces encoded once per case, response and criterion.
    """
    return _json(text)[1:-1]


def judge_answer(explanation: str, met: bool) -> str:
    """The judge's answer: a fenced JSON block with `explanation` and `criteria_met`."""
    return "```json\n" + _json({"explanation": explanation, "criteria_met": bool(met)}) + "\n```"


def _supporting_notes(labels: pd.DataFrame, gold: pd.DataFrame) -> pd.DataFrame:
    """DECISION + note: per gold decision, the note chosen by EXPLANATION_RULE (where there is one).

    `labels` are label rows with a `note` column (those without a note are ignored).
    """
    text = labels["note"].fillna("").astype(str).str.strip()
    notes = labels.assign(note=text)[text != ""]
    notes = notes.merge(gold[[*DECISION, "met"]].rename(columns={"met": "gold_met"}), on=DECISION, how="inner")
    stage, group = notes["stage"], notes["group_no"]
    rank = np.select([stage == Stage.adjudication, (stage == Stage.check) & (group == 1),
                      (stage == Stage.check) & (group == 2), (stage == Stage.annotation) & (group == 1),
                      (stage == Stage.annotation) & (group == 2)], [0, 1, 2, 3, 4], default=9)
    notes = notes.assign(rank=rank)
    notes = notes[(notes["rank"] == 0) | ((notes["rank"] < 9) & (notes["met"] == notes["gold_met"]))]
    notes = notes.sort_values([*DECISION, "rank"], kind="stable").drop_duplicates(DECISION)
    return notes[[*DECISION, "note"]]


def split_cases(case_ids: list[str], seed: int, dev_fraction: float) -> set[str]:
    """The dev cases: a seeded shuffle of the case ids (given in case order), first share taken."""
    shuffled = list(case_ids)
    random.Random(seed).shuffle(shuffled)
    n_dev = int(round(dev_fraction * len(shuffled)))
    if dev_fraction > 0 and len(shuffled) >= 2:
        n_dev = min(max(n_dev, 1), len(shuffled) - 1)
    return set(shuffled[:n_dev])


def export_sft(engine: Engine, directory: Path, seed: int = DEFAULT_SEED, holdout_models: Iterable[str] = (),
               fmt: str = "instruction", dev_fraction: float = 0.1, template_path: Path | None = None,
               progress: Progress = no_progress) -> ExportSummary:
    """`export sft DIR`: judge training rows from gold, split by case, held-out models apart."""
    if fmt not in ("instruction", "messages"):
        raise ValidationFailed(f"format {fmt!r}: expected instruction or messages")
    if not 0 <= dev_fraction < 1:
        raise ValidationFailed(f"dev fraction {dev_fraction}: expected a number from 0 up to (not including) 1")
    template = read_template(template_path)
    template_source = Path(template_path) if template_path else DEFAULT_TEMPLATE
    holdout = sorted({model.strip() for model in holdout_models if model and model.strip()})

    progress(0, None, "reading labels")
    gold = gold_labels(load_label_decisions(engine))
    responses = load_responses(engine, text=True)
    unknown = [model for model in holdout if model not in set(responses["model"])]
    if unknown:
        raise ValidationFailed(f"held-out model(s) not in the database: {', '.join(unknown)}")
    criteria = _current_criteria(engine, text=True)
    keys = responses[["response_id", "case_pk", "case_id", "model"]]
    rows = _decision_order(_in_current_rubric(gold[[*DECISION, "met"]], keys, criteria))
    outside_rubric = len(gold) - len(rows)
    rows = rows.merge(_supporting_notes(load_label_notes(engine), gold), on=DECISION, how="left")
    rows = rows.merge(criteria[["case_pk", "criterion_id", "text"]].rename(columns={"text": "rubric_item"}),
                      on=["case_pk", "criterion_id"], how="left")

    cases = _cases_with_text(engine).set_index("case_pk")
    message_body = {pk: _json_body(user_message(context, request))
                    for pk, context, request in zip(cases.index, cases["clinical_context"], cases["user_request"])}
    response_body = {response_id: _json_body(text)
                     for response_id, text in zip(responses["response_id"], responses["text"])}
    item_body: dict[str, str] = {}
    prompt = PromptTemplate(template)

    in_holdout = rows["model"].isin(holdout).to_numpy()
    pool = rows.loc[~in_holdout, "case_id"].drop_duplicates().tolist()
    dev_cases = split_cases(pool, seed, dev_fraction)
    part = np.where(in_holdout, "heldout", np.where(rows["case_id"].isin(dev_cases), "dev", "train"))

    directory = _prepare_dir(Path(directory), SFT_FILES)
    file_names = ["train.jsonl", "dev.jsonl"] + (["heldout.jsonl"] if holdout else [])
    writers = {name: _HashingWriter(directory / name) for name in file_names}
    generic = {met: _json(judge_answer(GENERIC_EXPLANATION[met], met)) for met in (True, False)}
    metas = (f'"meta": {{"case_id": {case_id}, "model": {model}, "criterion_id": {criterion_id}}}}}'
             for case_id, model, criterion_id in zip(_encoded(rows["case_id"]), _encoded(rows["model"]),
                                                     _encoded(rows["criterion_id"])))
    with_note = 0
    try:
        # Each line is exactly json.dumps(record, ensure_ascii=False) of the record below, built from
        # pre-encoded pieces: {"instruction": prompt, "output": answer, "meta": {case_id, model, criterion_id}}
        # or {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}], "meta": …}.
        columns = zip(rows["case_pk"].tolist(), rows["response_id"].tolist(), rows["rubric_item"].tolist(),
                      rows["note"].tolist(), rows["met"].tolist(), part.tolist(), metas)
        for index, (case_pk, response_id, rubric_item, note, met, where, meta) in enumerate(columns):
            item = item_body.get(rubric_item)
            if item is None:
                item = item_body[rubric_item] = _json_body(rubric_item)
            instruction = prompt.fill_json_body({"user_message": message_body[case_pk],
                                                 "response": response_body[response_id], "rubric_item": item})
            if isinstance(note, str) and note:
                with_note += 1
                answer = _json(judge_answer(note, met))
            else:
                answer = generic[bool(met)]
            if fmt == "instruction":
                line = f'{{"instruction": "{instruction}", "output": {answer}, {meta}\n'
            else:
                line = (f'{{"messages": [{{"role": "user", "content": "{instruction}"}}, '
                        f'{{"role": "assistant", "content": {answer}}}], {meta}\n')
            writers[f"{where}.jsonl"].add(line)
            if index % _CHUNK == 0:
                progress(index, len(rows), "sft rows")
    finally:
        for writer in writers.values():
            writer.close()
    counts = Counter({name: writer.lines for name, writer in writers.items()})
    progress(len(rows), len(rows), "sft rows")
    shutil.copyfile(template_source, directory / "judge_prompt.txt")

    files = {name: {"rows": counts[name], "sha256": writers[name].sha256} for name in file_names}
    files["judge_prompt.txt"] = {"sha256": sha256_file(directory / "judge_prompt.txt")}
    case_counts = {name: int(rows.loc[part == name.split(".")[0], "case_id"].nunique()) for name in file_names}
    manifest = {
        "seed": seed,
        "options": {"format": fmt, "dev_fraction": dev_fraction, "holdout_models": holdout,
                    "template": template_source.name},
        "counts": {"rows": {name: counts[name] for name in file_names}, "cases": case_counts,
                   "explanations": {"physician_note": with_note, "generic": len(rows) - with_note},
                   "gold_outside_current_rubric": outside_rubric},
        "explanation_rule": EXPLANATION_RULE,
        "files": files,
    }
    _write_json(directory / "manifest.json", manifest)
    summary = ExportSummary("sft", directory, counts={
        "rows": {name: counts[name] for name in file_names}, "cases": case_counts,
        "physician notes used": with_note}, files={name: item["sha256"] for name, item in files.items()})
    if outside_rubric:
        summary.notes.append(f"{outside_rubric} gold decision(s) on criteria outside the current rubric skipped")
    return summary


# Downloads ------------------------------------------------------------------------------------

_BUNDLE_TARGET = {"gold": "gold.jsonl", "release": "release", "judgements": "judgements",
                  "judge-items": "judge_items.jsonl", "sft": "sft"}
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def export_bundle(engine: Engine, what: str, progress: Progress = no_progress, **options) -> tuple[str, bytes]:
    """(file name, zip bytes) of one export, for a download button; the zip also holds SUMMARY.txt."""
    runners = {"gold": export_gold, "release": export_release, "judgements": export_judgements,
               "judge-items": export_judge_items, "sft": export_sft}
    if what not in runners:
        raise ValidationFailed(f"export {what!r}: expected one of {', '.join(EXPORT_KINDS)}")
    with tempfile.TemporaryDirectory(prefix="clinconsensus-export-") as temporary:
        target = Path(temporary) / _BUNDLE_TARGET[what]
        summary = runners[what](engine, target, progress=progress, **options)
        paths = sorted(target.rglob("*")) if target.is_dir() else [target]
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in paths:
                if path.is_file():
                    info = zipfile.ZipInfo(str(path.relative_to(temporary)), date_time=_ZIP_DATE)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    with open(path, "rb") as handle:
                        archive.writestr(info, handle.read())
            summary_text = str(summary).replace(temporary, "").replace("\\", "/")
            archive.writestr(zipfile.ZipInfo("SUMMARY.txt", date_time=_ZIP_DATE), summary_text + "\n")
    return f"clinconsensus-{what}.zip", buffer.getvalue()
