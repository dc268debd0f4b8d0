"""A judge's false positives and false negatives against gold, for the error browser."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.grid import MET, DecisionGrid
from analysis.reliability.thresholds_and_counts import FALSE_NEGATIVE, FALSE_POSITIVE

# Judge errors --------------------------------------------------------------------------------------


def judge_errors(grid: DecisionGrid, judge: str) -> pd.DataFrame:
    """Every decision where `judge` differs from gold: response_id, case_id, model, criterion_id, group1,
    group2, gold, judge (1/0/-1) and kind (false_positive: judge met, gold not; false_negative: the reverse)."""
    columns = ["response_id", "case_id", "model", "criterion_id", "group1", "group2", "gold", "judge", "kind"]
    if judge not in grid.judges:
        return pd.DataFrame(columns=columns)
    values = grid.judges[judge]
    wrong = (values >= 0) & (grid.gold >= 0) & (values != grid.gold) & grid.valid
    rows, slots = np.nonzero(wrong)
    names = np.full((len(grid.cases), grid.width), None, dtype=object)
    names[grid.criteria["case_row"].to_numpy(np.int64), grid.criteria["slot"].to_numpy(np.int64)] = grid.criteria[
        "criterion_id"
    ].to_numpy(object)
    said = values[rows, slots]
    return pd.DataFrame(
        {
            "response_id": grid.responses["response_id"].to_numpy()[rows],
            "case_id": grid.responses["case_id"].to_numpy()[rows],
            "model": grid.responses["model"].to_numpy()[rows],
            "criterion_id": names[grid.case_rows[rows], slots],
            "group1": grid.group1[rows, slots],
            "group2": grid.group2[rows, slots],
            "gold": grid.gold[rows, slots],
            "judge": said,
            "kind": np.where(said == MET, FALSE_POSITIVE, FALSE_NEGATIVE),
        }
    )[columns]
