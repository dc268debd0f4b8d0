"""Agreement beyond macro-F1: chance-corrected coefficients, per-criterion agreement, the low-agreement tail.

All work on the decision grid of `analysis.metrics` and on (both met, group 1 only, group 2 only,
neither) counts; undefined values are NaN.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.grid import MET, DecisionGrid
from analysis.metrics import Agreement

LOWEST_CRITERIA = 20
TAIL_SHARE = 0.05


def coefficients(counts) -> dict[str, np.ndarray]:
    """Cohen's κ, PABAK and Gwet's AC1 (two raters, two categories) from (a, b, c, d) counts."""
    counts = np.asarray(counts, dtype=np.float64)
    a, b, c, d = counts[..., 0], counts[..., 1], counts[..., 2], counts[..., 3]
    total = a + b + c + d
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (a + d) / total
        first, second = (a + b) / total, (a + c) / total
        chance = first * second + (1 - first) * (1 - second)
        kappa = np.where(chance < 1, (observed - chance) / (1 - chance), np.nan)
        prevalence = (first + second) / 2
        chance_ac1 = 2 * prevalence * (1 - prevalence)
        ac1 = (observed - chance_ac1) / (1 - chance_ac1)
    return {"observed": observed, "kappa": kappa, "pabak": 2 * observed - 1, "ac1": ac1}


def agreement_coefficients(result: Agreement) -> pd.DataFrame:
    """Per model and overall ("(all)"): macro-F1 beside κ, PABAK, AC1 and raw agreement, over aligned pairs."""
    per_model = result.per_model
    counts = per_model[["a", "b", "c", "d"]].to_numpy(np.float64)
    counts = np.vstack([counts, result.overall_counts[None, :]]) if len(counts) else result.overall_counts[None, :]
    frame = pd.DataFrame(index=pd.Index([*per_model.index, ALL], name="model"))
    frame["pooled_mf1"] = [*per_model["pooled_mf1"], result.overall_mf1]
    for name, values in coefficients(counts).items():
        frame[name] = values
    frame["n_decisions"] = counts.sum(axis=1).astype(np.int64)
    return frame


ALL = "(all)"


def criterion_agreement(grid: DecisionGrid) -> pd.DataFrame:
    """Per criterion of each case: decisions both groups labelled, share they agree on, each group's met rate."""
    both = (grid.group1 >= 0) & (grid.group2 >= 0) & grid.valid
    agree = both & (grid.group1 == grid.group2)
    width = grid.width
    flat_case = np.repeat(grid.case_rows.astype(np.int64) * width, width) + np.tile(np.arange(width), len(grid.n))
    size = len(grid.cases) * width
    n_both = np.bincount(flat_case, weights=both.ravel(), minlength=size)
    n_agree = np.bincount(flat_case, weights=agree.ravel(), minlength=size)
    met1 = np.bincount(flat_case, weights=(both & (grid.group1 == MET)).ravel(), minlength=size)
    met2 = np.bincount(flat_case, weights=(both & (grid.group2 == MET)).ravel(), minlength=size)
    criteria = grid.criteria
    index = criteria["case_row"].to_numpy(np.int64) * width + criteria["slot"].to_numpy(np.int64)
    frame = pd.DataFrame(
        {
            "case_id": grid.cases["case_id"].to_numpy()[criteria["case_row"].to_numpy()],
            "criterion_id": criteria["criterion_id"].to_numpy(),
            "n_decisions": n_both[index].astype(np.int64),
        }
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        frame["agreement"] = n_agree[index] / n_both[index]
        frame["met_rate_group1"] = met1[index] / n_both[index]
        frame["met_rate_group2"] = met2[index] / n_both[index]
    frame = frame[frame["n_decisions"] > 0]
    return frame.sort_values(
        ["agreement", "n_decisions", "case_id", "criterion_id"], ascending=[True, False, True, True], ignore_index=True
    )


def low_agreement_cases(result: Agreement, share: float = TAIL_SHARE) -> pd.DataFrame:
    """Cases in the lowest `share` by mean case-level macro-F1 over their aligned pairs (at least one case)."""
    pairs = result.pairs
    if pairs.empty:
        return pd.DataFrame(columns=["case_id", "n_aligned", "mean_case_mf1", "min_case_mf1"])
    grouped = pairs.groupby("case_id")["mf1"].agg(n_aligned="size", mean_case_mf1="mean", min_case_mf1="min")
    per_case = grouped.reset_index().sort_values(["mean_case_mf1", "case_id"], ignore_index=True)
    return per_case.head(max(1, math.ceil(len(per_case) * share)))
