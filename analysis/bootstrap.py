"""Bootstrap 95% confidence intervals of model scores, resampling cases (seeded, so reproducible).

Each resample draws as many cases as there are (with replacement); a model's CACS@k and rubric
accuracy are the means over the complete responses of the drawn cases, its pooled macro-F1 is
computed over the decisions of their aligned pairs. Sums per (case, model) are weighted by how
often each case was drawn, so one resample is a matrix product, not a loop over cases.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.grid import DecisionGrid
from analysis.metrics import Agreement, Scores, cacs, macro_f1

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 20260101
LEVEL = 0.95


def _per_case(
    case_codes: np.ndarray, model_codes: np.ndarray, values: np.ndarray, n_cases: int, n_models: int
) -> np.ndarray:
    return np.bincount(case_codes * n_models + model_codes, weights=values, minlength=n_cases * n_models).reshape(
        n_cases, n_models
    )


def confidence_intervals(
    grid: DecisionGrid,
    scores: Scores,
    agreement: Agreement,
    k: int,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Per model: lower and upper bounds of CACS@k, rubric accuracy and pooled macro-F1 (NaN when undefined)."""
    n_models = len(grid.models)
    columns = [
        f"{metric}_{bound}" for metric in ("cacs_at_k", "rubric_accuracy", "pooled_mf1") for bound in ("low", "high")
    ]
    frame = pd.DataFrame(np.nan, index=pd.Index(grid.models, name="model"), columns=columns)
    case_ids, case_codes_all = np.unique(grid.case_rows, return_inverse=True)
    n_cases = len(case_ids)
    if n_cases == 0 or n_models == 0:
        return frame
    weights = resample_weights(n_cases, resamples, seed)
    code_of_case = pd.Index(case_ids)
    scored_cases = code_of_case.get_indexer(pd.Index(scores.case_rows))
    count = _per_case(scored_cases, scores.model_codes, np.ones(len(scored_cases)), n_cases, n_models)
    sums = {
        "cacs_at_k": _per_case(scored_cases, scores.model_codes, cacs(scores.s, scores.n, k), n_cases, n_models),
        "rubric_accuracy": _per_case(
            scored_cases, scores.model_codes, scores.s / np.maximum(scores.n, 1), n_cases, n_models
        ),
    }
    drawn = weights @ count
    for metric, per_case in sums.items():
        with np.errstate(invalid="ignore", divide="ignore"):
            _store(frame, metric, np.where(drawn > 0, (weights @ per_case) / drawn, np.nan))
    pairs = agreement.pairs
    if len(pairs):
        pair_cases = code_of_case.get_indexer(pd.Index(pairs["case_row"]))
        pair_models = pd.Index(grid.models).get_indexer(pd.Index(pairs["model"]))
        confusion = np.stack(
            [
                weights @ _per_case(pair_cases, pair_models, pairs[name].to_numpy(np.float64), n_cases, n_models)
                for name in "abcd"
            ],
            axis=-1,
        )
        _store(frame, "pooled_mf1", macro_f1(confusion))
    return frame


def resample_weights(n_cases: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples × cases) how often each case is drawn."""
    draws = np.random.default_rng(seed).integers(0, n_cases, size=(resamples, n_cases))
    offsets = (np.arange(resamples) * n_cases)[:, None]
    return (
        np.bincount((draws + offsets).ravel(), minlength=resamples * n_cases)
        .reshape(resamples, n_cases)
        .astype(np.float64)
    )


def _store(frame: pd.DataFrame, metric: str, values: np.ndarray) -> None:
    """Percentile bounds per model column, ignoring resamples in which the model had nothing to score."""
    tail = (1 - LEVEL) / 2 * 100
    for column, model in enumerate(frame.index):
        defined = values[:, column][~np.isnan(values[:, column])]
        if len(defined):
            frame.loc[model, f"{metric}_low"] = float(np.percentile(defined, tail))
            frame.loc[model, f"{metric}_high"] = float(np.percentile(defined, 100 - tail))
