"""Paired model comparisons and leaderboard tiers (docs/REFERENCE.md §4), pure: scores in, numbers out.

**Paired comparison** of models A and B on a metric m (`cacs_at_k`, `rubric_accuracy`): over the n
cases where both have a complete response, d_c = m(A on c) − m(B on c); `diff` = mean(d); with
t = diff / (sd(d) / √n) on n − 1 degrees of freedom, `p_value` = 2 · P(T ≥ |t|) and the interval
diff ± t_{0.975, n−1} · sd(d) / √n — what `scipy.stats.ttest_1samp(d, 0.0)` and its `confidence_interval(0.95)`
give (the tests compare). Student's t comes from `scipy.special`, not from scipy.stats, whose import a report
would otherwise pay for this alone (docs/performance.md).

Pairing on the case removes the variance the two models share through the case's difficulty (Miller
2024, "Adding Error Bars to Evals", §4: per-question paired differences). When every d_c is equal the
t statistic is undefined: the interval is [diff, diff] and p = 1 if diff = 0 else 0. With n < 2 every
value but `n_cases` is undefined (None).

**Holm's step-down adjustment** (Holm 1979, "A simple sequentially rejective multiple test
procedure") over the M pairs of one metric that have a p-value and whose two models are both ranked
(at least `min_responses` complete responses, docs/REFERENCE.md §4.1): with p sorted ascending,
p_holm(i) = max_{j ≤ i} min(1, (M − j + 1) · p(j)); it controls the family-wise error over the
55 pairs of 11 models without assuming the tests independent.

**Leaderboard tiers**: the ranked models by CACS@k best first (ties by name); the first opens tier 1;
each next model stays in the current tier unless its comparison with the tier's first model has
p_holm < 0.05, in which case it opens the next tier; a null p_holm there means "not comparable": the
model gets no tier and neither opens nor joins one. Models with at least one but fewer than
`min_responses` complete responses follow the ranked ones, `ranked: false`, without a tier, so an
unranked model never moves a ranked one.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pandas as pd

from analysis.grid import DecisionGrid
from analysis.metrics import Scores, cacs

METRICS = ("cacs_at_k", "rubric_accuracy")
LEVEL = 0.95
TIER_ALPHA = 0.05
COMPARISON_KEYS = ("models", "n_cases", "diff", "ci_low", "ci_high", "p_value", "p_holm")


def per_case_values(grid: DecisionGrid, scores: Scores, k: int, metric: str) -> pd.DataFrame:
    """cases × models: the metric of each model's complete response to each case (NaN where it has none)."""
    if metric == "cacs_at_k":
        values = cacs(scores.s, scores.n, k)
    elif metric == "rubric_accuracy":
        values = scores.s / np.maximum(scores.n, 1)
    else:
        raise ValueError(f"unknown metric {metric!r}")
    n_models = len(grid.models)
    n_cases = len(grid.cases)
    keys = scores.case_rows.astype(np.int64) * n_models + scores.model_codes
    size = n_cases * n_models
    sums = np.bincount(keys, weights=values, minlength=size).reshape(n_cases, n_models)
    counts = np.bincount(keys, minlength=size).reshape(n_cases, n_models)
    with np.errstate(invalid="ignore", divide="ignore"):
        table = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return pd.DataFrame(table, columns=pd.Index(grid.models, name="model"))


def differing_cases(
    grid: DecisionGrid, scores: Scores, k: int, a: str, b: str, *, metric: str = "cacs_at_k", limit: int = 20
) -> pd.DataFrame:
    """The cases behind one paired comparison, largest |d_c| first (ties in case order): case_id, a, b, diff
    (d_c = m(a on c) − m(b on c), over the cases where both have a complete response)."""
    values = per_case_values(grid, scores, k, metric)
    both = values[[a, b]].notna().all(axis=1).to_numpy()
    rows = np.flatnonzero(both)
    d = values[a].to_numpy()[rows] - values[b].to_numpy()[rows]
    order = rows[np.lexsort((rows, -np.abs(d)))][:limit]
    return pd.DataFrame(
        {
            "case_id": grid.cases["case_id"].to_numpy()[order],
            "model_a": values[a].to_numpy()[order],
            "model_b": values[b].to_numpy()[order],
            "diff": values[a].to_numpy()[order] - values[b].to_numpy()[order],
        }
    )


def paired_difference(d: np.ndarray) -> dict:
    """n_cases, diff, ci_low, ci_high, p_value of the paired differences `d` (None where undefined)."""
    d = np.asarray(d, dtype=np.float64)
    n = len(d)
    result: dict = {"n_cases": n, "diff": None, "ci_low": None, "ci_high": None, "p_value": None}
    if n < 2:
        return result
    diff = float(np.mean(d))
    if np.all(d == d[0]):
        result.update(diff=diff, ci_low=diff, ci_high=diff, p_value=1.0 if diff == 0 else 0.0)
        return result
    from scipy import special  # imported where used, like every part of scipy

    freedom = n - 1
    standard_error = float(np.std(d, ddof=1)) / math.sqrt(n)
    p_value = float(2.0 * special.stdtr(freedom, -abs(diff / standard_error)))
    half = float(special.stdtrit(freedom, 0.5 + LEVEL / 2)) * standard_error
    result.update(diff=diff, ci_low=diff - half, ci_high=diff + half, p_value=min(p_value, 1.0))
    return result


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm-adjusted p-values in the given order; None stays None and is not counted in M."""
    present = [(p, i) for i, p in enumerate(p_values) if p is not None and not math.isnan(p)]
    m = len(present)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(present, key=lambda item: item[0])):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def compare_models(values: pd.DataFrame, ranked: set[str] | None = None) -> list[dict]:
    """One entry per pair a < b by name over the columns of `values` (cases × models), Holm-adjusted over the
    pairs of `ranked` models (every model when None); p_holm is None for a pair with an unranked model."""
    models = sorted(values.columns)
    table = values[models].to_numpy(np.float64) if models else np.zeros((0, 0))
    rows = []
    for i, j in combinations(range(len(models)), 2):
        both = ~np.isnan(table[:, i]) & ~np.isnan(table[:, j])
        entry = {"models": [models[i], models[j]], **paired_difference(table[both, i] - table[both, j])}
        rows.append(entry)
    in_family = [ranked is None or set(entry["models"]) <= ranked for entry in rows]
    p_values = [entry["p_value"] if member else None for entry, member in zip(rows, in_family)]
    for entry, adjusted in zip(rows, holm(p_values)):
        entry["p_holm"] = adjusted
    return [{key: entry[key] for key in COMPARISON_KEYS} for entry in rows]


def comparisons(grid: DecisionGrid, scores: Scores, k: int, ranked: set[str] | None = None) -> dict[str, list[dict]]:
    """`comparisons` of report.json: every pair of models on CACS@k and rubric accuracy (Holm over `ranked`)."""
    return {metric: compare_models(per_case_values(grid, scores, k, metric), ranked) for metric in METRICS}


def ranked_models(models: pd.DataFrame, min_responses: int) -> set[str]:
    """The models with at least `min_responses` complete responses (`models`: model_scores' frame)."""
    return {str(model) for model, n in models["n_responses"].items() if n >= min_responses}


def tiers(ranked: list[str], pairs: list[dict]) -> dict[str, int | None]:
    """Tier of each model of `ranked` (best first), from the Holm-adjusted comparisons of one metric; None
    where the comparison with the tier's first model has no p_holm (not comparable)."""
    p_holm: dict[tuple[str, str], float | None] = {
        (a, b): entry["p_holm"] for entry in pairs for a, b in [entry["models"]]
    }
    result: dict[str, int | None] = {}
    tier, head = 0, ""
    for model in ranked:
        if not tier:
            tier, head = 1, model
            result[model] = tier
            continue
        p = p_holm.get((min(head, model), max(head, model)))
        if p is None:
            result[model] = None
        elif p < TIER_ALPHA:
            tier, head = tier + 1, model
            result[model] = tier
        else:
            result[model] = tier
    return result


def leaderboard(
    models: pd.DataFrame, intervals: pd.DataFrame | None, cacs_pairs: list[dict], min_responses: int = 1
) -> list[dict]:
    """`leaderboard` of report.json: the ranked models best first with the bootstrap interval and their tier,
    then the models with fewer than `min_responses` complete responses (`ranked: false`, no tier)."""
    scored = models[models["n_responses"] > 0]
    score_of = {str(model): float(value) for model, value in scored["cacs_at_k"].items()}
    n_of = {str(model): int(n) for model, n in scored["n_responses"].items()}
    order = sorted(score_of, key=lambda model: (-score_of[model], model))
    ranked = [model for model in order if n_of[model] >= min_responses]
    tier_of = tiers(ranked, cacs_pairs)
    rows = []
    for model in ranked + [model for model in order if n_of[model] < min_responses]:
        low = high = None
        if intervals is not None and model in intervals.index:
            low, high = _finite(intervals.loc[model, "cacs_at_k_low"]), _finite(intervals.loc[model, "cacs_at_k_high"])
        rows.append(
            {
                "model": model,
                "cacs_at_k": score_of[model],
                "ci_low": low,
                "ci_high": high,
                "tier": tier_of.get(model),
                "ranked": model in tier_of,
                "n_responses": n_of[model],
            }
        )
    return rows


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
