"""The public rubric-only release (docs/REFERENCE.md §3.5).

cases.jsonl, schema.json, counts.json, SHA256SUMS and the dataset card.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd
from sqlalchemy.engine import Engine

from analysis.exports.current_frames import current_criteria
from analysis.exports.export_summary import ExportSummary, left_out, list_text
from analysis.exports.file_writers import json_text, prepare_dir, sha256_file, write_json, write_lines
from analysis.exports.manifest import MANIFEST_NAME, export_head, write_manifest
from analysis.exports.paths import write_text
from analysis.loader import load_cases, load_register_overrides
from db.rules.config import RUBRIC_SIZE
from db.rules.contacts import contact_matches, mask, official_matches
from db.rules.errors import ValidationFailed
from db.rules.progress_report import Progress, no_progress
from db.rules.records import (
    DIFFICULTIES,
    OPTIONAL_CASE_FIELDS,
    REQUIRED_CASE_FIELDS,
    is_forbidden_key,
    release_problems,
    release_schema as case_line_schema,
)

RELEASE_LICENSE = "CC BY 4.0"
#: A released case has the fields of an imported one (`db.rules.records`).
RELEASE_FIELDS = REQUIRED_CASE_FIELDS
OPTIONAL_RELEASE_FIELDS = OPTIONAL_CASE_FIELDS


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


def release_schema(size: int = RUBRIC_SIZE) -> dict:
    """JSON Schema (draft 2020-12) of one line of the release's cases.jsonl (from `db.rules.records`)."""
    return case_line_schema(size)


def release_records(
    engine: Engine,
    size: int = RUBRIC_SIZE,
    difficulties: Iterable[str] | None = None,
    *,
    contact_warnings: bool = True,
) -> tuple[list[dict], list[str], list[str], list[str]]:
    """(records, left-out case ids, removed key paths, contact warnings) of the release, unvalidated.

    `difficulties` keeps only cases of those tiers (None: every tier). Contact-like strings are
    looked for in every field and, with the official check's patterns, in the JSON line as written; with
    `contact_warnings=False` they are not looked for and none is returned (for a caller that only writes the
    records).
    """
    cases = load_cases(engine, text=True).merge(load_register_overrides(engine), on="case_pk", how="left")
    if difficulties:
        tiers = set(difficulties)
        unknown = sorted(tiers - set(DIFFICULTIES))
        if unknown:
            raise ValidationFailed(f"--difficulty {unknown[0]!r}: expected {', '.join(DIFFICULTIES)}")
        cases = cases[cases["difficulty"].isin(tiers)]
    criteria = current_criteria(engine, text=True)
    by_case = dict(list(criteria.groupby("case_pk", sort=False)))
    records: list[dict] = []
    no_rubric: list[str] = []
    removed: list[str] = []
    warnings: list[str] = []
    for case in cases.to_dict("records"):
        rubric = by_case.get(case["case_pk"])
        if rubric is None:
            no_rubric.append(case["case_id"])
            continue
        record, case_removed = _release_record(case, rubric)
        removed += [f"{case['case_id']}: {where}" for where in case_removed]
        if contact_warnings:
            warnings += _contact_warnings(case["case_id"], record)
        records.append(record)
    return records, no_rubric, removed, warnings


def _release_record(case: dict, rubric: pd.DataFrame) -> tuple[dict, list[str]]:
    """One case's line of cases.jsonl from its stored row and rubric, and the paths of the keys removed from its
    extra fields."""
    items = []
    for criterion_id, text, tags in zip(rubric["criterion_id"], rubric["text"], rubric["tags"]):
        item = {"criterion_id": criterion_id, "criterion": text}
        if tags:
            item["tags"] = list(tags)
        items.append(item)
    record = {
        "case_id": case["case_id"],
        "difficulty": case["difficulty"],
        "task": case["task"],
        "task_labels": list(case["task_labels"]),
        "subject": case["subject"],
        "subject_labels": list(case["subject_labels"]),
        "user_role": case["user_role"],
        "clinical_context": case["clinical_context"],
        "user_request": case["user_request"],
        "rubrics": items,
    }
    if isinstance(case["register_override"], str) and case["register_override"]:
        record["register"] = case["register_override"]
    removed: list[str] = []
    extra = _strip_forbidden(dict(case["extra"] or {}), "", removed)
    for key, value in extra.items():
        if key in record or key in RELEASE_FIELDS or key in OPTIONAL_RELEASE_FIELDS:
            continue  # the stored columns are the truth for the release's own fields
        record[key] = value
    return record, removed


def _contact_warnings(case_id: str, record: dict) -> list[str]:
    """Contact-like strings in any field of a record, then those the official check finds in its JSON line."""
    warnings, found = [], []
    for where, text in _strings(record, ""):
        for kind, value in contact_matches(text):
            found.append(value)
            warnings.append(f"{case_id} {where}: {kind} {mask(value)}")
    for kind, value in official_matches(json_text(record)):
        if not any(value in other for other in found):  # e.g. a number or a key, or across an escape
            found.append(value)
            warnings.append(f"{case_id} (JSON line): {kind} {mask(value)}")
    return warnings


RELEASE_FILES = ("cases.jsonl", "schema.json", "counts.json", "README.md", "SHA256SUMS")


def export_release(
    engine: Engine,
    directory: Path,
    progress: Progress = no_progress,
    size: int = RUBRIC_SIZE,
    difficulties: Iterable[str] | None = None,
) -> ExportSummary:
    """`export release DIR [--difficulty low]`: the public rubric-only release, validated before anything is written."""
    progress(0, None, "reading cases")
    head = export_head(engine)
    records, left_out_cases, removed, warnings = release_records(engine, size, difficulties)
    problems = [
        f"case {record.get('case_id')!r}: {problem}" for record in records for problem in release_problems(record, size)
    ]
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise ValidationFailed(f"release not written, {len(problems)} problem(s): {shown}")
    directory = prepare_dir(Path(directory), (*RELEASE_FILES, MANIFEST_NAME))
    write_lines(directory / "cases.jsonl", (json_text(record) for record in records), len(records), progress, "cases")
    write_json(directory / "schema.json", release_schema(size))
    counts = release_counts(records, size)
    write_json(directory / "counts.json", counts)
    write_text(directory / "README.md", _release_card(counts, size))
    sums = {name: sha256_file(directory / name) for name in sorted(RELEASE_FILES[:-1])}
    write_text(directory / "SHA256SUMS", "".join(f"{digest}  {name}\n" for name, digest in sums.items()))
    # Outside SHA256SUMS (it names that file's digest too), so `sha256sum -c SHA256SUMS` checks the data alone.
    write_manifest(
        directory,
        export="release",
        head=head,
        files={**sums, "SHA256SUMS": sha256_file(directory / "SHA256SUMS")},
        cases=len(records),
    )
    summary = ExportSummary(
        "release",
        directory,
        counts={
            "cases": len(records),
            "criteria": counts["rubrics"],
            "left out (no approved rubric)": len(left_out_cases),
            **({"difficulty": ", ".join(sorted(set(difficulties)))} if difficulties else {}),
        },
        files=sums,
    )
    if left_out_cases:
        summary.notes.append("left out, no approved rubric: " + list_text(left_out_cases, ", "))
    if removed:
        summary.notes.append(f"removed {len(removed)} forbidden key(s): " + list_text(removed, "; "))
    summary.warnings = [f"contact-like string, review by hand: {warning}" for warning in warnings]
    found = [left_out("cases_no_rubric", left_out_cases), left_out("forbidden_keys", removed)]
    summary.left_out = [item for item in found if item.count]
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

- cases: {counts["cases"]}
- rubric criteria: {counts["rubrics"]} ({size} per case)

{table("difficulty", counts["difficulty"])}
{table("task label", counts["task_labels"])}
{table("subject label", counts["subject_labels"])}
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
