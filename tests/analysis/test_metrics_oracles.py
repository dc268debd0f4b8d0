"""Agreement coefficients and bootstrap intervals checked against scikit-learn and scipy.

The oracles are the libraries' own implementations, not a second copy of our formulas:
`sklearn.metrics.cohen_kappa_score` for Cohen's κ and `scipy.stats.bootstrap(method="percentile")`
for the case-resampling intervals (given the same random draws, it must find the same bounds).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.stats import bootstrap
from sklearn.metrics import cohen_kappa_score

from analysis import agreement as agreement_extra
from analysis.bootstrap import LEVEL
from analysis.metrics import cacs
from tests.support.basis import report_as_written as build_report  # §4 as written (no checks in these frames)
from tools import metrics_reference as reference


def _counts(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """(both met, first only, second only, neither)."""
    return np.array(
        [(first & second).sum(), (first & ~second).sum(), (~first & second).sum(), (~first & ~second).sum()]
    )


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=60))
def test_cohen_kappa_equals_sklearn(pairs):
    first = np.array([a for a, _ in pairs])
    second = np.array([b for _, b in pairs])
    mine = float(agreement_extra.coefficients(_counts(first, second))["kappa"])
    if len(set(first.tolist()) | set(second.tolist())) < 2:
        # One category only: κ is undefined (sklearn divides 0 by 0 and warns).
        assert np.isnan(mine)
    else:
        assert mine == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)


def test_report_kappa_per_model_equals_sklearn_over_aligned_decisions():
    frames = reference.synthetic_frames(20, 3, n=8, seed=3, adjudication_share=0.3, missing_share=0.01)
    report = build_report(frames, 4, resamples=0)
    grid = report.grid
    coefficients = agreement_extra.agreement_coefficients(report.agreement)
    both = (grid.group1 >= 0) & (grid.group2 >= 0)
    aligned = (grid.n > 0) & (both | ~grid.valid).all(axis=1)
    models = np.asarray(grid.models, dtype=object)[grid.model_codes]
    for model in grid.models:
        rows = aligned & (models == model)
        first = grid.group1[rows][grid.valid[rows]] == 1
        second = grid.group2[rows][grid.valid[rows]] == 1
        assert coefficients.loc[model, "kappa"] == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)


def test_bootstrap_intervals_equal_scipy_percentile_bootstrap():
    # Every response complete (all adjudicated, nothing missing), so every resample scores every model.
    frames = reference.synthetic_frames(25, 3, n=6, seed=8, adjudication_share=1.0, missing_share=0.0)
    k, resamples, seed = 3, 300, 17
    report = build_report(frames, k, resamples=resamples, seed=seed)
    scores, grid = report.scores, report.grid
    assert scores.complete.all()
    case_order = np.unique(grid.case_rows)
    value = cacs(scores.s, scores.n, k)
    models = np.asarray(grid.models, dtype=object)[scores.model_codes]
    for model in grid.models:
        mine = models == model
        position = np.searchsorted(case_order, scores.case_rows[mine])
        sums = np.bincount(position, weights=value[mine], minlength=len(case_order))
        counts = np.bincount(position, minlength=len(case_order)).astype(float)

        def mean_over_drawn_cases(sums, counts, axis=-1):
            return sums.sum(axis=axis) / counts.sum(axis=axis)

        result = bootstrap(
            (sums, counts),
            mean_over_drawn_cases,
            paired=True,
            vectorized=True,
            n_resamples=resamples,
            batch=None,
            confidence_level=LEVEL,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
        interval = report.intervals.loc[model]
        assert interval["cacs_at_k_low"] == pytest.approx(result.confidence_interval.low, abs=1e-12)
        assert interval["cacs_at_k_high"] == pytest.approx(result.confidence_interval.high, abs=1e-12)
        assert interval["cacs_at_k_low"] < interval["cacs_at_k_high"]
