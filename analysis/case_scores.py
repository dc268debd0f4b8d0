"""`case_scores.csv` of `report --out DIR`: one row per scored response, in the official scorer's per-case columns.

The public `eval_cacs.py` writes a `case_scores.csv` beside its summary; ours has the same columns
with the same meaning, so the two can be compared row by row: `rubric_count` the decisions of the
response (all N of a complete one), `expected_rubric_count` the N of its case's rubric,
`positive_count` the met criteria s, `rubric_accuracy_pct` 100·s/N, `pass_at_k` 1 when s ≥ k,
`cacs_at_k_pct` 100·CACS@k; labels joined with `|`. Rows are the source's complete responses (§4),
by model name, then in case order. The values come from `analysis.metrics`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.grid import DecisionGrid
from analysis.metrics import Scores, cacs

CASE_SCORE_COLUMNS = [
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
]


def _joined(labels) -> str:
    return "|".join(str(label) for label in labels or [])


def case_scores(grid: DecisionGrid, scores: Scores, k: int) -> pd.DataFrame:
    """The per-case table of the official scorer, over the complete responses of `scores`."""
    cases = grid.cases.iloc[scores.case_rows]
    s = scores.s.astype(np.int64)
    n = scores.n.astype(np.int64)
    frame = pd.DataFrame(
        {
            "model": np.asarray(grid.models, dtype=object)[scores.model_codes] if len(grid.models) else [],
            "case_id": cases["case_id"].to_numpy(dtype=object),
            "difficulty": cases["difficulty"].astype(str).to_numpy(dtype=object),
            "subject_labels": [_joined(labels) for labels in cases["subject_labels"]],
            "task_labels": [_joined(labels) for labels in cases["task_labels"]],
            "rubric_count": n,
            "expected_rubric_count": n,
            "positive_count": s,
            "rubric_accuracy_pct": 100.0 * s / np.maximum(n, 1),
            "pass_at_k": (s >= k).astype(np.int64),
            "cacs_at_k_pct": 100.0 * cacs(s, n, k),
            "_case_row": scores.case_rows,
        }
    )
    frame = frame.sort_values(["model", "_case_row"], kind="stable", ignore_index=True)
    return frame[CASE_SCORE_COLUMNS]
