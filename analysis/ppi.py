"""The prediction-powered mean (PPI++, Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453), pure numpy/scipy.

Y: the metric from gold on the n labeled responses L; Ŷ_L: the judge's metric on L; Ŷ_U: the judge's
metric on the N unlabeled responses U. For a tuning weight λ,

    θ̂(λ) = λ · mean(Ŷ_U) + mean(Y − λ · Ŷ_L)                         (unbiased for every λ)
    se(λ)² = λ² · var(Ŷ_U) / N + var(Y − λ · Ŷ_L) / n                (variances with ddof 0)
    interval = θ̂(λ) ± z_{1−α/2} · se(λ)

λ = 0 is the classical estimate from gold alone; λ = 1 is plain PPI. Power tuning (the paper's
§2, mean estimation) takes the variance-minimising weight, estimated from the data and clipped to
[0, 1]:

    λ̂ = cov(Y, Ŷ_L) / ((1 + n/N) · var(Ŷ_L ∪ Ŷ_U))

with cov the 1/n covariance over L and var the ddof-1 variance over L and U pooled — the
estimator of the authors' package `ppi-python` (`ppi_mean_pointestimate` / `ppi_mean_ci`), whose
values these functions reproduce; the app does not need that package at run time.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np


def tuned_lambda(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray) -> float:
    """The power-tuning weight λ̂ in [0, 1] (NaN when the judge's values are constant)."""
    y, yhat, yhat_unlabeled = _arrays(y, yhat, yhat_unlabeled)
    n, big_n = len(y), len(yhat_unlabeled)
    covariance = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    pooled = np.concatenate([yhat, yhat_unlabeled])
    variance = float(np.var(pooled, ddof=1)) if len(pooled) > 1 else math.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.float64(covariance) / np.float64((1 + n / big_n) * variance)
    return float(np.clip(weight, 0.0, 1.0))


def _weight(lam: float | None, y, yhat, yhat_unlabeled) -> float:
    return tuned_lambda(y, yhat, yhat_unlabeled) if lam is None else float(lam)


def ppi_mean(y, yhat, yhat_unlabeled, lam: float | None = None) -> float:
    """θ̂(λ), with λ tuned when `lam` is None."""
    y, yhat, yhat_unlabeled = _arrays(y, yhat, yhat_unlabeled)
    weight = _weight(lam, y, yhat, yhat_unlabeled)
    return float(weight * yhat_unlabeled.mean() + np.mean(y - weight * yhat))


def ppi_interval(y, yhat, yhat_unlabeled, alpha: float = 0.05, lam: float | None = None) -> tuple[float, float]:
    """The two-sided (1 − α) normal interval around θ̂(λ), with λ tuned when `lam` is None."""
    y, yhat, yhat_unlabeled = _arrays(y, yhat, yhat_unlabeled)
    weight = _weight(lam, y, yhat, yhat_unlabeled)
    estimate = float(weight * yhat_unlabeled.mean() + np.mean(y - weight * yhat))
    imputed = np.std(weight * yhat_unlabeled) / math.sqrt(len(yhat_unlabeled))
    rectifier = np.std(y - weight * yhat) / math.sqrt(len(y))
    half = NormalDist().inv_cdf(1 - alpha / 2) * math.sqrt(imputed**2 + rectifier**2)
    return estimate - half, estimate + half


def _arrays(*values) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(value, dtype=np.float64).ravel() for value in values)
