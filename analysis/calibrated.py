"""Calibrated (prediction-powered) scores of judge-scored models (docs/REFERENCE.md §4), pure.

A model's calibration sample is a uniform random sample of its responses (drawn by `assign
calibration`) that physicians label like any other work. Under judge j:
- L: the sampled responses that are final (docs/REFERENCE.md §4.1: whatever the basis of the other
  figures) and that j graded on all N criteria;
- U: the model's responses outside the sample that j graded on all N (their gold, if any, unused);
- sampled responses not yet final are left out and counted as `n_pending`.
A judge is listed beside a model only when it graded at least one of the model's responses.
Y is the per-response metric from gold on L, Ŷ_L from j's decisions on L, Ŷ_U from j on U;
`estimate` and its interval are the PPI++ mean (`analysis.ppi`, power tuning on), `classical`
the interval from gold alone (λ = 0), `judge_only` the mean of Ŷ over L ∪ U. All values are
clipped to [0, 1]; they are given when |L| ≥ 10 and |U| ≥ 1 and every one is finite, otherwise
they are None and the counts stay.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pandas as pd

from analysis import ppi
from analysis.grid import DecisionGrid
from analysis.metrics import cacs, complete_mask, met_counts
from db.rules.gold import FINAL

MIN_LABELED = 10
ALPHA = 0.05
METRICS = ("cacs_at_k", "rubric_accuracy")
VALUE_KEYS = ("estimate", "ci_low", "ci_high", "classical_low", "classical_high", "judge_only")
CALIBRATION_COLUMNS = ["model", "response_id"]


def empty_samples() -> pd.DataFrame:
    return pd.DataFrame({"model": pd.Series(dtype=object), "response_id": pd.Series(dtype=np.int64)})


def sampled_rows(grid: DecisionGrid, samples: pd.DataFrame) -> np.ndarray:
    """(R,) bool: grid rows whose response is in a calibration sample of its own model."""
    drawn = pd.MultiIndex.from_arrays(
        [samples["model"].astype(str).to_numpy(object), samples["response_id"].to_numpy(np.int64)]
    )
    rows = pd.MultiIndex.from_arrays(
        [grid.responses["model"].astype(str).to_numpy(object), grid.responses["response_id"].to_numpy(np.int64)]
    )
    return np.asarray(rows.isin(drawn), dtype=bool)


def calibration_samples(grid: DecisionGrid, samples: pd.DataFrame) -> dict[str, list[str]]:
    """`calibration_samples` of report.json: each sampled model's case ids, in case order."""
    sampled = sampled_rows(grid, samples)
    result: dict[str, list[str]] = {}
    for model in sorted(set(samples["model"].astype(str))):
        rows = np.flatnonzero(sampled & (grid.responses["model"].to_numpy() == model))
        rows = rows[np.argsort(grid.case_rows[rows], kind="stable")]
        result[model] = grid.responses["case_id"].to_numpy()[rows].tolist()
    return result


def _metric(labels: np.ndarray, n: np.ndarray, k: int) -> dict[str, np.ndarray]:
    s = met_counts(labels)
    return {"cacs_at_k": cacs(s, n, k), "rubric_accuracy": s / np.maximum(n, 1)}


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def estimate_values(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray) -> dict:
    """The six values of one metric (None for all when |L| < 10, |U| < 1 or one is not finite)."""
    nothing = dict.fromkeys(VALUE_KEYS)
    if len(y) < MIN_LABELED or len(yhat_unlabeled) < 1:
        return nothing
    with np.errstate(invalid="ignore", divide="ignore"):
        low, high = ppi.ppi_interval(y, yhat, yhat_unlabeled, alpha=ALPHA)
        classical_low, classical_high = ppi.ppi_interval(y, yhat, yhat_unlabeled, alpha=ALPHA, lam=0)
        values = {
            "estimate": ppi.ppi_mean(y, yhat, yhat_unlabeled),
            "ci_low": low,
            "ci_high": high,
            "classical_low": classical_low,
            "classical_high": classical_high,
            "judge_only": float(np.mean(np.concatenate([yhat, yhat_unlabeled]))),
        }
    if not all(math.isfinite(value) for value in values.values()):
        return nothing
    return {key: _clip(float(value)) for key, value in values.items()}


def calibration_sets(grid: DecisionGrid, samples: pd.DataFrame, k: int):
    """(judge, model, n_pending, {metric: (Y, Ŷ_L, Ŷ_U)}) per judge by name and sampled model by name."""
    grid = grid.on_basis(FINAL)  # L holds final responses only, whatever the basis of the rest
    sampled = sampled_rows(grid, samples)
    gold_complete = complete_mask(grid, grid.gold)
    models = [model for model in sorted(set(samples["model"].astype(str))) if model in grid.models]
    model_of_row = grid.responses["model"].to_numpy()
    gold = _metric(grid.gold, grid.n, k)
    for judge in sorted(grid.judges):
        graded = complete_mask(grid, grid.judges[judge])
        predicted = _metric(grid.judges[judge], grid.n, k)
        any_decision = grid.judge_rows[judge][0] > 0 if judge in grid.judge_rows else graded
        for model in models:
            own = model_of_row == model
            if not (own & any_decision).any():
                continue  # the judge never graded this model: nothing to calibrate, nothing to list
            labeled = own & sampled & gold_complete & graded
            unlabeled = own & ~sampled & graded
            arrays = {
                metric: (gold[metric][labeled], predicted[metric][labeled], predicted[metric][unlabeled])
                for metric in METRICS
            }
            yield judge, model, int((own & sampled & ~gold_complete).sum()), arrays


def calibrated(grid: DecisionGrid, samples: pd.DataFrame, k: int) -> dict[str, dict[str, dict]]:
    """report.json `calibrated`: {judge: {model: {n_labeled, n_unlabeled, n_pending, cacs_at_k, rubric_accuracy}}}"""
    result: dict[str, dict[str, dict]] = {judge: {} for judge in sorted(grid.judges)}
    for judge, model, pending, arrays in calibration_sets(grid, samples, k):
        y, _, yhat_unlabeled = arrays["cacs_at_k"]
        entry: dict = {"n_labeled": len(y), "n_unlabeled": len(yhat_unlabeled), "n_pending": pending}
        entry.update({metric: estimate_values(*arrays[metric]) for metric in METRICS})
        result[judge][model] = entry
    return result


def responses_needed(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray, half_width: float) -> dict:
    """Labeled responses for a 95 % interval of ± `half_width`, from the current variances (None when unknown).

    Classical: n = (z · sd(Y) / h)². Prediction-powered, with the current λ and judge-scored responses:
    the n with z² · (λ² var(Ŷ_U)/N + var(Y − λŶ_L)/n) ≤ h², None when the judge-only part alone exceeds h².
    """
    z2 = NormalDist().inv_cdf(1 - ALPHA / 2) ** 2
    h2 = half_width**2
    if len(y) < 2 or len(yhat_unlabeled) < 1:
        return {"classical": None, "ppi": None}
    classical = math.ceil(z2 * float(np.var(y)) / h2)
    weight = ppi.tuned_lambda(y, yhat, yhat_unlabeled)
    if not math.isfinite(weight):
        return {"classical": classical, "ppi": None}
    fixed = z2 * weight**2 * float(np.var(yhat_unlabeled)) / len(yhat_unlabeled)
    rectifier = z2 * float(np.var(y - weight * yhat))
    needed = math.ceil(rectifier / (h2 - fixed)) if h2 > fixed else None
    return {"classical": classical, "ppi": needed}


def sample_size_plan(grid: DecisionGrid, samples: pd.DataFrame, k: int, half_widths=(0.02, 0.05)) -> pd.DataFrame:
    """Per judge and sampled model: CACS@k responses needed for each half-width, classical and prediction-powered."""
    rows = []
    for judge, model, _, arrays in calibration_sets(grid, samples, k):
        row: dict = {"judge": judge, "model": model, "n_labeled": len(arrays["cacs_at_k"][0])}
        y, yhat, yhat_unlabeled = arrays["cacs_at_k"]
        for half in half_widths:
            needed = responses_needed(y, yhat, yhat_unlabeled, half)
            points = round(half * 100)
            row[f"needed_classical_{points}"] = needed["classical"]
            row[f"needed_ppi_{points}"] = needed["ppi"]
        rows.append(row)
    columns = ["judge", "model", "n_labeled"] + [
        f"needed_{kind}_{round(h * 100)}" for h in half_widths for kind in ("classical", "ppi")
    ]
    return pd.DataFrame(rows, columns=columns)
