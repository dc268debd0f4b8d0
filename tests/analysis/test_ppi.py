"""The prediction-powered mean (analysis.ppi, analysis.calibrated) against the authors' package `ppi_py`,
and its coverage and width in simulation."""

from __future__ import annotations

import numpy as np
import ppi_py
import pytest
from sklearn.metrics import f1_score

from analysis import calibrated, metrics, ppi


def _scalar(value) -> float:
    return float(np.asarray(value, dtype=np.float64).ravel()[0])


def _reference(y, yhat, yhat_unlabeled, lam):
    estimate = _scalar(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_unlabeled, lam=lam))
    low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_unlabeled, alpha=0.05, lam=lam)
    return estimate, _scalar(low), _scalar(high)


HAND_MADE = [
    ([1.0, 0.0, 1.0, 1.0, 0.0], [0.9, 0.2, 0.8, 0.6, 0.1], [0.7, 0.4, 0.9, 0.3]),
    ([0.2, 0.4, 0.4, 0.9, 0.0, 0.6], [0.3, 0.3, 0.5, 0.8, 0.1, 0.9], [0.5, 0.5, 0.2, 0.6, 0.1, 0.9, 0.7]),
    # a judge that runs opposite to gold: the tuned λ clips at 0
    ([0.0, 0.5, 1.0, 0.25], [1.0, 0.5, 0.0, 0.75], [0.2, 0.6]),
]


@pytest.mark.parametrize("y, yhat, yhat_unlabeled", HAND_MADE)
@pytest.mark.parametrize("lam", [None, 0])
def test_estimate_and_interval_equal_ppi_py_on_hand_made_data(y, yhat, yhat_unlabeled, lam):
    estimate, low, high = _reference(np.array(y), np.array(yhat), np.array(yhat_unlabeled), lam)
    assert ppi.ppi_mean(y, yhat, yhat_unlabeled, lam=lam) == pytest.approx(estimate, abs=1e-9)
    ours = ppi.ppi_interval(y, yhat, yhat_unlabeled, alpha=0.05, lam=lam)
    assert ours == pytest.approx((low, high), abs=1e-9)


def test_estimate_and_interval_equal_ppi_py_on_generated_data():
    rng = np.random.default_rng(11)
    for n, big_n, noise in [(10, 5, 0.3), (60, 900, 0.1), (200, 40, 1.0), (30, 3000, 0.02)]:
        y = rng.random(n)
        yhat = np.clip(y + rng.normal(0, noise, n), 0, 1)
        yhat_unlabeled = rng.random(big_n)
        for lam in (None, 0, 1, 0.4):
            estimate, low, high = _reference(y, yhat, yhat_unlabeled, lam)
            assert ppi.ppi_mean(y, yhat, yhat_unlabeled, lam=lam) == pytest.approx(estimate, abs=1e-9)
            assert ppi.ppi_interval(y, yhat, yhat_unlabeled, 0.05, lam) == pytest.approx((low, high), abs=1e-9)


def test_values_need_ten_labeled_and_one_unlabeled_and_are_clipped():
    y = np.ones(12)
    assert calibrated.estimate_values(y[:9], y[:9], np.ones(3)) == dict.fromkeys(calibrated.VALUE_KEYS)
    assert calibrated.estimate_values(y, y, np.ones(0)) == dict.fromkeys(calibrated.VALUE_KEYS)
    # constant judge values: the tuned λ is 0/0, so the values are null (the counts stay, elsewhere)
    assert calibrated.estimate_values(y, y, np.ones(3))["estimate"] is None
    values = calibrated.estimate_values(np.r_[np.ones(10), 0.9, 1.0], np.r_[np.ones(11), 0.8], np.ones(5))
    assert values["ci_high"] == 1.0 and values["classical_high"] == 1.0  # clipped from above 1
    assert 0 <= values["ci_low"] <= values["estimate"] <= 1
    assert values["judge_only"] == pytest.approx(np.mean(np.r_[np.ones(11), 0.8, np.ones(5)]))


def _population(rng, size=3000, n=30, flip=0.06):
    quality = rng.beta(2, 2, size)
    gold = (rng.random((size, n)) < quality[:, None]).astype(int)
    judge = np.where(rng.random((size, n)) < flip, 1 - gold, gold)
    return gold, judge


def test_interval_covers_the_true_cacs_and_is_narrower_than_gold_alone():
    rng = np.random.default_rng(20260101)
    gold, judge = _population(rng)
    n = np.full(len(gold), 30)
    y_all = metrics.cacs(gold.sum(axis=1), n, 10)
    yhat_all = metrics.cacs(judge.sum(axis=1), n, 10)
    assert f1_score(gold.ravel(), judge.ravel(), average="macro") >= 0.8
    truth = float(y_all.mean())
    covered, narrower, ratios = 0, 0, []
    for _ in range(400):
        sample = np.zeros(len(gold), dtype=bool)
        sample[rng.choice(len(gold), 60, replace=False)] = True
        values = calibrated.estimate_values(y_all[sample], yhat_all[sample], yhat_all[~sample])
        covered += values["ci_low"] <= truth <= values["ci_high"]
        width, classical = values["ci_high"] - values["ci_low"], values["classical_high"] - values["classical_low"]
        narrower += width < classical
        ratios.append(width / classical)
    assert covered / 400 >= 0.92
    assert narrower / 400 >= 0.95 and np.median(ratios) < 0.8
