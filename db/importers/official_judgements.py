"""What the official scorer accepts in a `<model>_judge.json`, read with its meaning (docs/REFERENCE.md §3.4).

The official `scripts/eval_cacs.py` of the public ClinConsensus code is lenient, and judgement files
written by other tools rely on it. These rules restate its reading, so a file it scores imports here
with the same decisions:

- a criterion is met when `criteria_met` is `true`, one of the strings "true", "1", "yes", "met"
  (any case, surrounding spaces ignored) or a non-zero number; anything else is not met — except
  `null` (or no `criteria_met` at all), which we skip and count instead of reading it as not met;
- the results are the first list among `criteria_results`, `rubric_results`, `rubric_judgments`;
  entries that are not objects are passed over, as the scorer passes them over;
- the case is `case_id`, else `id`; else an all-digit `prompt_id` N is case `CC-%04d`; else the
  item's place in the file (the first item is `CC-0001`);
- an entry without a `criterion_id` is the criterion at its place in the case's current rubric.
"""

from __future__ import annotations

from typing import Any

RESULT_KEYS = ("criteria_results", "rubric_results", "rubric_judgments")
CASE_KEYS = ("case_id", "id")
_MET_WORDS = frozenset({"true", "1", "yes", "met"})


def official_met(value: Any) -> bool | None:
    """The scorer's reading of `criteria_met`; None for a null, which is skipped rather than read as not met."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in _MET_WORDS
    if isinstance(value, int | float):
        return bool(value)
    return False


def official_case_id(item: dict[str, Any], index: int) -> str:
    """The case an item scores, by the scorer's keys; `index` is the item's 0-based place in the file."""
    for key in CASE_KEYS:
        value = item.get(key)
        text = "" if value is None else str(value).strip()
        if text:
            return text
    prompt_id = item.get("prompt_id")
    prompt_text = "" if prompt_id is None else str(prompt_id).strip()
    if prompt_text.isdigit():
        return f"CC-{int(prompt_text):04d}"
    return f"CC-{index + 1:04d}"


def official_results(item: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """(key, list) of the item's results, or None when it has none; entries that are not objects are the
    caller's to pass over (their places still count for criteria matched by position)."""
    for key in RESULT_KEYS:
        value = item.get(key)
        if isinstance(value, list):
            return key, value
    return None


def consumed_case_keys(results_key: str) -> set[str]:
    """Keys of an item that the decisions themselves store; the rest travel with each decision."""
    return {"case_id", "model", results_key}
