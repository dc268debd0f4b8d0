"""Does a judge rank models as physicians do? (docs/REFERENCE.md §4 "Judge ranking fidelity"), pure.

Judge j: over the models with at least one complete (gold) response that j graded on all N
criteria, model-level CACS@k from gold against CACS@k from j on exactly those responses:
Spearman ρ, Kendall τ-b, top-3 and top-5 overlap, `n_models`. The human ceiling beside it: the
same statistics between group 1's and group 2's model-level CACS@k (their final labels) over each
model's aligned pairs — how well one physician group ranks models like the other. Only ranked models
count (docs/REFERENCE.md §4.1): for a judge, the models with at least `min_responses` complete
responses; for the ceiling, the models with at least `min_responses` aligned pairs. With fewer than
two models, or a statistic that is not finite, that value is None.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.grid import DecisionGrid
from analysis.metrics import TOP_SETS, cacs, complete_mask, correlation, met_counts, top_overlap


def _model_means(grid: DecisionGrid, labels: np.ndarray, rows: np.ndarray, k: int) -> pd.Series:
    values = cacs(met_counts(labels[rows]), grid.n[rows], k)
    models = np.asarray(grid.models, dtype=object)[grid.model_codes[rows]] if len(grid.models) else []
    return pd.Series(values, index=pd.Index(models, name="model"), dtype=np.float64).groupby(level=0).mean()


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def ranking_agreement(x: pd.Series, y: pd.Series) -> dict:
    """spearman, kendall_tau_b, top3, top5, n_models of two model-level scores over the same models."""
    n_models = len(x)
    result: dict = {"spearman": None, "kendall_tau_b": None, "top3": None, "top5": None, "n_models": n_models}
    if n_models < 2:
        return result
    x, y = x.sort_index(), y.reindex(x.sort_index().index)
    result["spearman"] = _finite(correlation("spearman", x.to_numpy(), y.to_numpy()))
    result["kendall_tau_b"] = _finite(correlation("kendall", x.to_numpy(), y.to_numpy()))
    for size in TOP_SETS:
        result[f"top{size}"] = _finite(top_overlap(x, y, size))
    return result


def _with_minimum(grid: DecisionGrid, rows: np.ndarray, min_responses: int) -> np.ndarray:
    """`rows` of the models that have at least `min_responses` of them."""
    if not len(grid.models):
        return rows
    counts = np.bincount(grid.model_codes[rows], minlength=len(grid.models))
    return rows & (counts >= min_responses)[grid.model_codes]


def judge_ranking(grid: DecisionGrid, k: int, ranked: set[str] | None = None) -> dict[str, dict]:
    """`judge_ranking` of report.json, one entry per judge by name, over the `ranked` models (all when None)."""
    gold_complete = complete_mask(grid, grid.gold)
    if ranked is not None:
        gold_complete &= np.isin(grid.responses["model"].to_numpy(), sorted(ranked))
    result = {}
    for judge in sorted(grid.judges):
        rows = gold_complete & complete_mask(grid, grid.judges[judge])
        result[judge] = ranking_agreement(
            _model_means(grid, grid.gold, rows, k), _model_means(grid, grid.judges[judge], rows, k)
        )
    return result


def human_ceiling_ranking(grid: DecisionGrid, k: int, min_responses: int = 1) -> dict:
    """`human_ceiling_ranking` of report.json: group 1's model ranking against group 2's, over aligned pairs,
    among the models with at least `min_responses` of them."""
    aligned = _with_minimum(grid, complete_mask(grid, grid.group1) & complete_mask(grid, grid.group2), min_responses)
    return ranking_agreement(_model_means(grid, grid.group1, aligned, k), _model_means(grid, grid.group2, aligned, k))
