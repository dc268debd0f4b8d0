"""Judge ranking fidelity and the physicians' ranking ceiling (docs/REFERENCE.md §4), against scipy."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis import metrics, ranking_fidelity
from analysis.report import report_json
from tests.support.basis import report_as_written as build_report  # §4 as written (no checks in these frames)
from tests.support.demo_frames import build_demo_frames


@pytest.fixture(scope="module")
def demo_frames(sqlite_template, tmp_path_factory):
    return build_demo_frames(sqlite_template, tmp_path_factory)


def _top(values: dict, size: int) -> set:
    return {model for model, _ in sorted(values.items(), key=lambda item: (-item[1], item[0]))[:size]}


def _cacs_means(grid, labels: np.ndarray, rows: np.ndarray, k: int) -> dict:
    """A literal per-response reading: (s − k + 1)/(N − k + 1) when s ≥ k, averaged per model — in exact
    fractions, so two models whose means are equal tie here as they do in exact arithmetic, whatever the order
    of a floating-point sum."""
    per_model: dict[str, list[Fraction]] = {}
    for row in np.flatnonzero(rows):
        s = int((labels[row] == 1).sum())
        n = int(grid.n[row])
        value = Fraction(s - k + 1, n - k + 1) if s >= k else Fraction(0)
        per_model.setdefault(grid.responses["model"].iloc[row], []).append(value)
    return {model: float(sum(values) / len(values)) for model, values in per_model.items()}


def _expected(x: dict, y: dict) -> dict:
    models = sorted(x)
    a, b = [x[m] for m in models], [y[m] for m in models]
    return {
        "spearman": stats.spearmanr(a, b).statistic,
        "kendall_tau_b": stats.kendalltau(a, b).statistic,
        "top3": len(_top(x, 3) & _top(y, 3)) / min(3, len(models)),
        "top5": len(_top(x, 5) & _top(y, 5)) / min(5, len(models)),
        "n_models": len(models),
    }


def test_judge_ranking_and_ceiling_on_the_demo_match_scipy(demo_frames):
    report = build_report(demo_frames, k=10, resamples=0, insights=False)
    document = report_json(report)
    grid = report.grid
    gold_complete = metrics.complete_mask(grid, grid.gold)
    assert set(document["judge_ranking"]) == set(grid.judges) and grid.judges
    for judge, labels in grid.judges.items():
        rows = gold_complete & ((labels >= 0) | ~grid.valid).all(axis=1) & (grid.n > 0)
        expected = _expected(_cacs_means(grid, grid.gold, rows, 10), _cacs_means(grid, labels, rows, 10))
        assert document["judge_ranking"][judge] == pytest.approx(expected, abs=1e-12)
    aligned = metrics.complete_mask(grid, grid.group1) & metrics.complete_mask(grid, grid.group2)
    expected = _expected(_cacs_means(grid, grid.group1, aligned, 10), _cacs_means(grid, grid.group2, aligned, 10))
    assert document["human_ceiling_ranking"] == pytest.approx(expected, abs=1e-12)


def test_heldout_models_restrict_the_judge_figures(demo_frames):
    report = build_report(demo_frames, k=10, resamples=0)
    held = ["model-beta", "model-gamma"]
    heldout = build_report(demo_frames, k=10, resamples=0, heldout_models=held)
    document, whole = report_json(heldout), report_json(report)
    assert document["heldout_models"] == held and whole["heldout_models"] is None
    for judge in document["judge_ranking"]:
        assert document["judge_ranking"][judge]["n_models"] == 2
        assert set(document["judges_by_model"][judge]) == set(held)
        assert document["judges_by_model"][judge] == {model: whole["judges_by_model"][judge][model] for model in held}
        assert document["judges"][judge]["n_decisions"] == sum(
            whole["judges_by_model"][judge][model]["n_decisions"] for model in held
        )
    # model scores and comparisons stay over every model
    assert document["models"] == whole["models"] and document["comparisons"] == whole["comparisons"]
    with pytest.raises(Exception, match="no responses of model 'nobody'"):
        build_report(demo_frames, k=10, resamples=0, heldout_models=["nobody"])


def test_too_few_models_or_constant_scores_give_null():
    one = pd.Series({"a": 0.3})
    assert ranking_fidelity.ranking_agreement(one, one) == {
        "spearman": None,
        "kendall_tau_b": None,
        "top3": None,
        "top5": None,
        "n_models": 1,
    }
    flat = ranking_fidelity.ranking_agreement(pd.Series({"a": 0.5, "b": 0.5}), pd.Series({"a": 0.1, "b": 0.7}))
    assert flat["spearman"] is None and flat["kendall_tau_b"] is None
    assert flat["top3"] == 1.0 and flat["n_models"] == 2
