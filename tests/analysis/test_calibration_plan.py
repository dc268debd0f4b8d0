"""The calibration plan (docs/REFERENCE.md §4.4) against the formula computed independently, and a simulation.

On the small demo: σ²_Y, ρ and the smallest n are recomputed here with pandas, scipy's Pearson r and normal
quantile, and a plain loop over n; both ways of choosing the basis (the model's own final judged responses,
and every final response the judge graded when the model has fewer than 10) are met. The simulation
draws 200 calibration samples of the planned size from a population and measures the PPI++ interval
with the authors' package (ppi-python): its coverage and mean half-width against what the plan promised.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import ppi_py
import pytest
from scipy import stats

from analysis import calibration_plan
from analysis.grid import prepare
from analysis.metrics import DEFAULT_K
from db.rules.errors import ValidationFailed
from tests.support.demo_frames import build_demo_frames
from tests.support.final_reading import final_responses


@pytest.fixture(scope="module")
def demo(sqlite_template, tmp_path_factory):
    frames = build_demo_frames(sqlite_template, tmp_path_factory)
    return prepare(frames), final_responses(frames.labels)


@pytest.fixture(scope="module")
def grid(demo):
    return demo[0]


def _per_response(grid, labels: np.ndarray) -> pd.DataFrame:
    """Each response's met count, decided count and CACS@k, from the label array as the definition reads it."""
    frame = grid.responses[["response_id", "model"]].copy()
    valid = grid.valid
    frame["decided"] = ((labels >= 0) & valid).sum(axis=1)
    frame["s"] = ((labels == 1) & valid).sum(axis=1)
    frame["n"] = grid.n
    k = DEFAULT_K
    frame["cacs"] = [(s - k + 1) / (n - k + 1) if s >= k else 0.0 for s, n in zip(frame["s"], frame["n"])]
    return frame


def _independent_plan(grid, final_ids: set[int], judge: str, model: str, target: float, alpha: float) -> dict:
    gold = _per_response(grid, grid.gold)
    judged = _per_response(grid, grid.judges[judge])
    complete = (gold["decided"] == gold["n"]) & (gold["n"] > 0)
    final = complete & gold["response_id"].isin(final_ids)
    graded = (judged["decided"] == judged["n"]) & (judged["n"] > 0)
    basis = final & graded & (gold["model"] == model)
    if basis.sum() < 10:
        basis = final & graded
    y, yhat = gold.loc[basis, "cacs"].to_numpy(), judged.loc[basis, "cacs"].to_numpy()
    sigma2 = float(pd.Series(y).var(ddof=0))
    rho = float(stats.pearsonr(y, yhat).statistic)
    n_judged = int((graded & (gold["model"] == model)).sum())
    z = float(stats.norm.ppf(1 - alpha / 2))
    chosen, width = None, None
    for n in range(1, n_judged):
        unlabeled = n_judged - n
        width = z * math.sqrt(sigma2 / n * (1 - rho**2 * unlabeled / (unlabeled + n)))
        if width <= target:
            chosen = n
            break
    n = chosen if chosen is not None else n_judged - 1
    return {
        "n": n,
        "half_width": width,
        "classical_half_width": z * math.sqrt(sigma2) / math.sqrt(n),
        "sigma_y": math.sqrt(sigma2),
        "rho": rho,
        "n_unlabeled": n_judged - n,
        "n_basis": int(basis.sum()),
    }


@pytest.mark.parametrize(
    ("model", "target", "alpha"),
    [("model-gamma", 0.2, 0.05), ("model-gamma", 0.03, 0.05), ("model-alpha", 0.25, 0.1), ("model-alpha", 0.5, 0.05)],
)
def test_plan_equals_the_formula_on_the_small_demo(demo, model, target, alpha):
    grid, final_ids = demo
    found = calibration_plan.plan(grid, "judge-a", model, DEFAULT_K, target, alpha)
    expected = _independent_plan(grid, final_ids, "judge-a", model, target, alpha)
    assert found.as_json() == pytest.approx(expected, rel=1e-9)
    assert list(found.as_json()) == list(calibration_plan.JSON_KEYS)
    assert found.decisions == expected["n"] * grid.rubric_size * 2
    assert found.reached == (expected["half_width"] <= target)


def _final_judged(grid, final_ids: set[int], judge: str) -> pd.DataFrame:
    judged = _per_response(grid, grid.judges[judge])
    judged["graded"] = (judged["decided"] == judged["n"]) & (judged["n"] > 0)
    judged["final"] = judged["response_id"].isin(final_ids)
    return judged


def test_the_two_bases(demo):
    grid, final_ids = demo
    judged = _final_judged(grid, final_ids, "judge-a")
    own = calibration_plan.plan(grid, "judge-a", "model-gamma", DEFAULT_K, 0.2)
    gamma = judged["model"] == "model-gamma"
    assert own.n_basis == int((gamma & judged["graded"] & judged["final"]).sum()) >= 10, "its own basis"
    assert own.n_judged == int((gamma & judged["graded"]).sum())
    # With all but five of model-gamma's final responses left out, the plan reads every final response graded.
    drop = judged.index[gamma & judged["final"]][5:]
    keep = np.ones(len(judged), dtype=bool)
    keep[drop] = False
    fallback = calibration_plan.plan(grid.subset(keep), "judge-a", "model-gamma", DEFAULT_K, 0.2)
    assert fallback.n_basis == int((judged["graded"] & judged["final"] & keep).sum())


def test_an_unreachable_target_says_so_at_n_judged_minus_one(demo):
    grid, final_ids = demo
    judged = _final_judged(grid, final_ids, "judge-a")
    n_judged = int(((judged["model"] == "model-gamma") & judged["graded"]).sum())
    found = calibration_plan.plan(grid, "judge-a", "model-gamma", DEFAULT_K, 0.001)
    assert not found.reached and found.n == found.n_judged - 1 == n_judged - 1 and found.half_width > 0.001


@pytest.mark.parametrize(
    ("judge", "model", "half", "alpha", "words"),
    [
        ("no-judge", "model-gamma", 0.03, 0.05, "no decisions"),
        ("judge-a", "no-model", 0.03, 0.05, "no responses"),
        ("judge-a", "model-gamma", 0.0, 0.05, "--half-width"),
        ("judge-a", "model-gamma", 0.03, 1.5, "--alpha"),
    ],
)
def test_refusals_are_one_line(grid, judge, model, half, alpha, words):
    with pytest.raises(ValidationFailed) as refused:
        calibration_plan.plan(grid, judge, model, DEFAULT_K, half, alpha)
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_a_constant_judge_metric_is_refused(grid):
    always = np.where(grid.valid, 1, -1).astype(grid.judges["judge-a"].dtype)
    constant = type(grid)(**{**vars(grid), "judges": {**grid.judges, "judge-a": always}})
    with pytest.raises(ValidationFailed, match="constant"):
        calibration_plan.plan(constant, "judge-a", "model-gamma", DEFAULT_K)


def test_a_grid_without_gold_is_refused_with_the_count(grid):
    emptied = type(grid)(**{**vars(grid), "gold": np.full_like(grid.gold, -1)})
    with pytest.raises(ValidationFailed, match="0 final responses graded by the judge, at least 10 needed"):
        calibration_plan.plan(emptied, "judge-a", "model-gamma", DEFAULT_K)


def test_the_promised_half_width_is_met_in_200_draws():
    """A population like a judged model's: CACS-like values in [0, 1], a judge correlated with gold."""
    rng = np.random.default_rng(44)
    n_judged = 2500
    truth = rng.beta(2, 3, n_judged)
    y = np.clip(truth + rng.normal(0, 0.05, n_judged), 0, 1)
    yhat = np.clip(truth + rng.normal(0.03, 0.08, n_judged), 0, 1)
    planned = calibration_plan.sample_size(y, yhat, n_judged, 0.03, 0.05)
    assert planned["reached"]
    n = planned["n"]
    theta = float(y.mean())
    covered, widths = 0, []
    for _ in range(200):
        labeled = rng.choice(n_judged, size=n, replace=False)
        rest = np.setdiff1d(np.arange(n_judged), labeled)
        low, high = ppi_py.ppi_mean_ci(y[labeled], yhat[labeled], yhat[rest], alpha=0.05)
        low, high = float(np.ravel(low)[0]), float(np.ravel(high)[0])
        covered += low <= theta <= high
        widths.append((high - low) / 2)
    coverage, mean_width = covered / 200, float(np.mean(widths))
    print(
        f"plan n={n} (classical {planned['classical_half_width']:.4f}); coverage {coverage:.3f}, "
        f"mean half-width {mean_width:.4f} for a promised {planned['half_width']:.4f}"
    )
    # 200 draws: coverage's standard error is about 0.015 at 0.95.
    assert coverage >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / 200)
    assert mean_width <= 0.03 * 1.05
    assert mean_width == pytest.approx(planned["half_width"], rel=0.05)
