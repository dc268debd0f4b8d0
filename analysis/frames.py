"""The frames the metric code reads: plain pandas tables, filled by `analysis.loader` (or by a test).

Column names are the contract of the metric and export code:
- cases:     case_pk, case_id, difficulty, task, task_labels, subject, subject_labels, user_role,
             register, macro_category, n_criteria (+ clinical_context, user_request, extra with text=True)
- criteria:  case_pk, rubric_version_id, position, criterion_id (+ text, tags with text=True) — the
             current approved rubric of each case
- responses: response_id, case_pk, case_id, model, length (+ text with text=True)
- labels:    response_id, criterion_id, stage, group_no, met, user_id (+ note with notes=True)
- judge:     judge, response_id, criterion_id, met
- users:     user_id, username, role, group_no
- timings:   user_id, response_id, stage, active_ms, n_criteria — one row per timed save (may be absent)
- calibration: model, response_id — the responses of each model's calibration sample (may be absent)
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from db.rules.errors import ValidationFailed

#: Where the labels that score the models come from (`--source`).
SOURCES = ("gold", "group1", "group2")
JUDGE_PREFIX = "judge:"


@dataclass
class Frames:
    cases: pd.DataFrame
    criteria: pd.DataFrame
    responses: pd.DataFrame
    labels: pd.DataFrame
    judge: pd.DataFrame
    users: pd.DataFrame
    timings: pd.DataFrame | None = None
    calibration: pd.DataFrame | None = None


def parse_source(source: str | None) -> tuple[str, str | None]:
    """`gold`, `group1`, `group2` or `judge:NAME` as (kind, judge name or None); empty means gold."""
    source = (source or "gold").strip()
    if source in SOURCES:
        return source, None
    if source.startswith(JUDGE_PREFIX) and source[len(JUDGE_PREFIX) :].strip():
        return "judge", source[len(JUDGE_PREFIX) :].strip()
    raise ValidationFailed(f"source {source!r}: expected gold, group1, group2 or judge:NAME")
