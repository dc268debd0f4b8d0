"""The rules of the official ClinConsensus scripts, re-implemented minimally for the tests.

`eval_cacs` follows scripts/eval_cacs.py: it reads DIR/cases.jsonl and every `*.json` in the
judgements folder, requires each file to be a list with exactly one row per case, names the model
after the file (`<model>_judge.json`), counts `criteria_met` by its truthiness rule and reports, per
model and slice (overall, each difficulty, `subject:<label>` for every subject label), rubric
accuracy, pass@k and CACS@k in percent (CACS over levels k..N with N the largest rubric count).
`case_rows` gives the rows of its per-case output (case_scores.csv), in its columns and order (plus
`_subjects`, the case's subject labels as a list, which the CSV does not have).

`validate_release` follows scripts/validate_dataset.py: required fields, forbidden keys of a record,
rubric counts, the three contact patterns on each line's JSON text, and the 900-low-case rule; it
returns the errors the official script would print after VALIDATION FAILED.

`eval_cacs` raises `OfficialFailure` with the message where the official script would stop.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path


class OfficialFailure(Exception):
    pass


def _truthy(value) -> bool:
    if value is True:
        return True
    if isinstance(value, str):
        return value.strip().lower() in {"true", "1", "yes", "met"}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return bool(value)
    return False


def _case_key(row: dict, index: int) -> str:
    """case_id, else id; else an all-digit prompt_id N as CC-%04d; else the row's place in the file."""
    for key in ("case_id", "id"):
        text = str(row.get(key, "")).strip()
        if text:
            return text
    prompt_id = str(row.get("prompt_id", "")).strip()
    return f"CC-{int(prompt_id):04d}" if prompt_id.isdigit() else f"CC-{index + 1:04d}"


def _results_of(row: dict) -> list[dict]:
    """The first list among criteria_results, rubric_results, rubric_judgments; its entries that are objects."""
    for key in ("criteria_results", "rubric_results", "rubric_judgments"):
        if isinstance(row.get(key), list):
            return [entry for entry in row[key] if isinstance(entry, dict)]
    return []


def case_positives(judgement_file: Path) -> dict[str, int]:
    """case_id → criteria the official scorer counts as met in one judgement file."""
    rows = json.loads(Path(judgement_file).read_text(encoding="utf-8"))
    return {
        _case_key(row, index): sum(_truthy(entry.get("criteria_met")) for entry in _results_of(row))
        for index, row in enumerate(rows)
    }


def _levels_share(scores: list[int], n: int, k: int) -> float:
    if not scores or k > n:
        return 0.0
    return 100.0 * sum(sum(s >= level for s in scores) / len(scores) for level in range(k, n + 1)) / (n - k + 1)


#: The columns of the official case_scores.csv, in its order (as `case_rows` writes each row).
CASE_SCORE_COLUMNS = (
    "model",
    "case_id",
    "difficulty",
    "subject_labels",
    "task_labels",
    "rubric_count",
    "expected_rubric_count",
    "positive_count",
    "rubric_accuracy_pct",
    "pass_at_k",
    "cacs_at_k_pct",
)


def case_rows(data: Path, judgements_dir: Path, threshold: int = 10) -> list[dict]:
    """The rows of the official case_scores.csv: per judgement file (sorted by name), per row in file order."""
    cases = [json.loads(line) for line in Path(data).read_text(encoding="utf-8").splitlines() if line.strip()]
    by_id = {str(case["case_id"]): case for case in cases}
    if len(by_id) != len(cases):
        raise OfficialFailure("duplicate case_id values in public data")
    files = sorted(Path(judgements_dir).glob("*.json"))
    if not files:
        raise OfficialFailure(f"no JSON judgement files found in {judgements_dir}")
    out = []
    for path in files:
        model = re.sub(r"_judge\.json$", "", path.name, flags=re.IGNORECASE)
        rows = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(rows, list) or len(rows) != len(cases):
            found = len(rows) if isinstance(rows, list) else "non-list"
            raise OfficialFailure(f"row count mismatch: {path.name} has {found} rows; expected {len(cases)}")
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                raise OfficialFailure(f"non-object judgement row: {path.name}:{index + 1}")
            case_id = _case_key(row, index)
            if case_id not in by_id:
                raise OfficialFailure(f"cannot resolve {path.name}:{index + 1} to public case: {case_id}")
            results = _results_of(row)
            case = by_id[case_id]
            positive = sum(_truthy(entry.get("criteria_met")) for entry in results)
            expected = len(case.get("rubrics", []))
            out.append(
                {
                    "model": model,
                    "case_id": case_id,
                    "difficulty": case.get("difficulty", ""),
                    "subject_labels": "|".join(map(str, case.get("subject_labels", []))),
                    "task_labels": "|".join(map(str, case.get("task_labels", []))),
                    "rubric_count": len(results),
                    "expected_rubric_count": expected,
                    "positive_count": positive,
                    "rubric_accuracy_pct": 100.0 * positive / len(results) if results else 0.0,
                    "pass_at_k": int(positive >= threshold),
                    "cacs_at_k_pct": _levels_share([positive], expected, threshold),
                    "_subjects": list(case.get("subject_labels", [])),
                }
            )
    return out


def eval_cacs(data: Path, judgements_dir: Path, threshold: int = 10) -> dict[tuple[str, str], dict]:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in case_rows(data, judgements_dir, threshold):
        groups[(row["model"], "overall")].append(row)
        groups[(row["model"], str(row["difficulty"]))].append(row)
        for label in row["_subjects"]:
            groups[(row["model"], f"subject:{label}")].append(row)
    summary = {}
    for key, records in sorted(groups.items()):
        judged = sum(r["rubric_count"] for r in records)
        positive = sum(r["positive_count"] for r in records)
        scores = [r["positive_count"] for r in records]
        summary[key] = {
            "cases": len(records),
            "rubric_accuracy_pct": 100.0 * positive / judged if judged else 0.0,
            "pass_at_k_pct": 100.0 * sum(s >= threshold for s in scores) / len(scores),
            "cacs_at_k_pct": _levels_share(scores, max(r["expected_rubric_count"] for r in records), threshold),
        }
    return summary


REQUIRED = {
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
}
FORBIDDEN_EXACT = {"reference_answer"}
FORBIDDEN_PARTS = ("source_file", "prompt_id", "row", "provenance", "physician", "doctor", "qc", "repair", "internal")
CONTACT = {
    "email_like": re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+"),
    "phone_like": re.compile(r"(?<!\d)1[3-9]\d{9}(?!\d)"),
    "id_card_like": re.compile(r"(?<!\d)\d{17}[0-9Xx](?!\d)"),
}


def validate_release(data: Path, strict_contact: bool = True) -> tuple[dict, list[str]]:
    """(report, errors) of the official validation of a cases.jsonl; no errors means VALIDATION PASSED."""
    rows = []
    for number, line in enumerate(Path(data).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise OfficialFailure(f"{data}:{number}: invalid JSON: {error}") from None
        if not isinstance(row, dict):
            raise OfficialFailure(f"{data}:{number}: record is not an object")
        rows.append(row)
    ids = [str(row.get("case_id", "")) for row in rows]
    report = {
        "records": len(rows),
        "unique_case_ids": len(set(ids)),
        "difficulty_counts": dict(Counter(str(row.get("difficulty", "")) for row in rows)),
        "total_rubrics": sum(len(row.get("rubrics", [])) for row in rows),
        "rubric_length_counts": dict(
            Counter(str(len(row["rubrics"]) if isinstance(row.get("rubrics"), list) else -1) for row in rows)
        ),
        "missing_required_fields": sorted(f for f in REQUIRED if any(f not in row for row in rows)),
        "forbidden_field_keys": sorted(
            {
                key
                for row in rows
                for key in row
                if key in FORBIDDEN_EXACT or any(part in key.lower() for part in FORBIDDEN_PARTS)
            }
        ),
        "contacts": {
            kind: sorted({m.group(0) for row in rows for m in pattern.finditer(json.dumps(row, ensure_ascii=False))})
            for kind, pattern in CONTACT.items()
        },
    }
    report["contacts"] = {kind: values for kind, values in report["contacts"].items() if values}
    errors = []
    if report["records"] != 900 or report["unique_case_ids"] != 900:
        errors.append("release must contain exactly 900 unique cases")
    if report["difficulty_counts"] != {"low": 900}:
        errors.append("release must contain only 900 low-tier cases")
    if report["rubric_length_counts"] != {"30": 900} or report["total_rubrics"] != 27000:
        errors.append("every case must contain exactly 30 rubrics")
    if report["records"] != report["unique_case_ids"]:
        errors.append("duplicate case IDs")
    if report["missing_required_fields"]:
        errors.append("missing required fields")
    if report["forbidden_field_keys"]:
        errors.append("reference-answer or internal-looking fields present")
    if strict_contact and report["contacts"]:
        errors.append("contact-like strings present")
    return report, errors
