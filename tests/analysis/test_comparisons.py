"""Paired comparisons, Holm's adjustment and leaderboard tiers (docs/REFERENCE.md §4), against scipy and statsmodels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from analysis import comparisons, metrics
from analysis.grid import MET
from analysis.report import report_json
from tests.support.basis import report_as_written as build_report  # §4 as written (no checks in these frames)
from tests.support.demo_frames import build_demo_frames
from tools import metrics_reference as reference


def _scipy_pair(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, float]:
    d = a - b
    test = stats.ttest_1samp(d, 0.0)
    interval = test.confidence_interval(0.95)
    return float(d.mean()), float(interval.low), float(interval.high), float(test.pvalue)


def test_paired_comparison_is_scipys_one_sample_t_test_on_the_shared_cases():
    rng = np.random.default_rng(3)
    values = pd.DataFrame(rng.random((40, 3)), columns=["m-c", "m-a", "m-b"])
    values.iloc[:5, 0] = np.nan  # m-c lacks five cases: its pairs use the other 35
    values.iloc[10, 2] = np.nan
    pairs = comparisons.compare_models(values)
    assert [entry["models"] for entry in pairs] == [["m-a", "m-b"], ["m-a", "m-c"], ["m-b", "m-c"]]
    for entry in pairs:
        a, b = entry["models"]
        both = values[a].notna() & values[b].notna()
        diff, low, high, p = _scipy_pair(values.loc[both, a].to_numpy(), values.loc[both, b].to_numpy())
        assert entry["n_cases"] == int(both.sum())
        assert entry["diff"] == pytest.approx(diff, abs=1e-9)
        assert entry["ci_low"] == pytest.approx(low, abs=1e-9)
        assert entry["ci_high"] == pytest.approx(high, abs=1e-9)
        assert entry["p_value"] == pytest.approx(p, abs=1e-9)
    expected = multipletests([entry["p_value"] for entry in pairs], method="holm")[1]
    assert [entry["p_holm"] for entry in pairs] == pytest.approx(list(expected), abs=1e-12)


def test_holm_is_the_step_down_maximum_and_skips_missing_p_values():
    p = [0.01, None, 0.04, 0.03, 0.2, 0.005]
    adjusted = comparisons.holm(p)
    # literal reading over M = 5: sorted 0.005, 0.01, 0.03, 0.04, 0.2 → 5p, 4p, 3p, 2p, 1p with running maximum
    assert adjusted[1] is None
    assert adjusted[5] == pytest.approx(0.025)
    assert adjusted[0] == pytest.approx(0.04)
    assert adjusted[3] == pytest.approx(0.09)
    assert adjusted[2] == pytest.approx(0.09)  # 2 · 0.04 = 0.08, raised to the earlier 0.09
    assert adjusted[4] == pytest.approx(0.2)
    present = [value for value in p if value is not None]
    assert [value for value in adjusted if value is not None] == pytest.approx(
        list(multipletests(present, method="holm")[1])
    )
    assert comparisons.holm([0.9, 0.8]) == [1.0, 1.0]  # capped at 1


def test_equal_differences_and_too_few_cases():
    values = pd.DataFrame(
        {"a": [0.5, 0.7, 0.2, np.nan], "b": [0.4, 0.6, 0.1, 0.3], "c": [0.5, 0.7, 0.2, np.nan], "d": [np.nan] * 3 + [1]}
    )
    by_pair = {tuple(entry["models"]): entry for entry in comparisons.compare_models(values)}
    shifted = by_pair[("a", "b")]  # every d equals 0.1 (to rounding)
    assert shifted["diff"] == pytest.approx(0.1)
    assert shifted["p_value"] == pytest.approx(0.0, abs=1e-12)
    assert shifted["ci_low"] == pytest.approx(0.1) and shifted["ci_high"] == pytest.approx(0.1)
    same = by_pair[("a", "c")]
    assert (same["diff"], same["ci_low"], same["ci_high"], same["p_value"]) == (0.0, 0.0, 0.0, 1.0)
    for pair in (("a", "d"), ("b", "d"), ("c", "d")):
        entry = by_pair[pair]
        assert entry["n_cases"] == (1 if pair == ("b", "d") else 0)
        assert all(entry[key] is None for key in ("diff", "ci_low", "ci_high", "p_value", "p_holm"))
    # M counts only the three pairs with a p-value
    assert same["p_holm"] == 1.0


def test_exactly_equal_differences_follow_the_rule():
    entry = comparisons.paired_difference(np.array([0.25, 0.25, 0.25]))
    assert (entry["diff"], entry["ci_low"], entry["ci_high"], entry["p_value"]) == (0.25, 0.25, 0.25, 0.0)
    assert comparisons.paired_difference(np.zeros(4))["p_value"] == 1.0


def test_tiers_open_when_the_tier_head_is_beaten_after_holm():
    ranked = ["w", "x", "y", "z"]
    pairs = [
        {"models": ["w", "x"], "p_holm": 0.2},
        {"models": ["w", "y"], "p_holm": 0.01},  # y opens tier 2
        {"models": ["w", "z"], "p_holm": 0.001},
        {"models": ["y", "z"], "p_holm": None},  # compared with the head of tier 2: not comparable, no tier
        {"models": ["x", "y"], "p_holm": 0.001},
    ]
    assert comparisons.tiers(ranked, pairs) == {"w": 1, "x": 1, "y": 2, "z": None}
    assert comparisons.tiers(["a"], []) == {"a": 1}


def test_leaderboard_orders_by_score_then_name_and_takes_the_bootstrap_interval():
    models = pd.DataFrame(
        {"n_responses": [3, 3, 0, 2], "cacs_at_k": [0.4, 0.6, np.nan, 0.4]}, index=pd.Index(["b", "c", "d", "a"])
    )
    intervals = pd.DataFrame(
        {"cacs_at_k_low": [0.3, 0.5, np.nan, np.nan], "cacs_at_k_high": [0.5, 0.7, np.nan, np.nan]},
        index=models.index,
    )
    rows = comparisons.leaderboard(models, intervals, [{"models": ["a", "c"], "p_holm": 0.01}])
    assert [row["model"] for row in rows] == ["c", "a", "b"]
    assert rows[0] == {
        "model": "c",
        "cacs_at_k": 0.6,
        "ci_low": 0.5,
        "ci_high": 0.7,
        "tier": 1,
        "ranked": True,
        "n_responses": 3,
    }
    assert rows[1]["tier"] == 2 and rows[1]["ci_low"] is None
    assert rows[2]["tier"] is None and rows[2]["ranked"]  # no comparison with tier 2's head a: not comparable


def test_unranked_models_follow_the_ranked_ones_without_a_tier():
    models = pd.DataFrame(
        {"n_responses": [3, 1, 4, 2], "cacs_at_k": [0.4, 0.9, 0.2, 0.5]}, index=pd.Index(["a", "b", "c", "d"])
    )
    pairs = [{"models": ["a", "c"], "p_holm": 0.3}]
    rows = comparisons.leaderboard(models, None, pairs, min_responses=3)
    assert [(row["model"], row["ranked"], row["tier"], row["n_responses"]) for row in rows] == [
        ("a", True, 1, 3),
        ("c", True, 1, 4),
        ("b", False, None, 1),  # unranked, best first among themselves, after every ranked model
        ("d", False, None, 2),
    ]
    assert comparisons.ranked_models(models, 3) == {"a", "c"}


def test_holm_reads_ranked_pairs_only():
    rng = np.random.default_rng(4)
    values = pd.DataFrame(rng.random((12, 4)), columns=["a", "b", "c", "d"])
    values["d"] = values["a"] + 0.05 + rng.normal(0, 0.01, 12)  # d: a clear difference, but d is unranked
    every = comparisons.compare_models(values)
    ranked_only = comparisons.compare_models(values, ranked={"a", "b", "c"})
    family = [entry for entry in ranked_only if "d" not in entry["models"]]
    expected = multipletests([entry["p_value"] for entry in family], method="holm")[1]
    assert [entry["p_holm"] for entry in family] == pytest.approx(list(expected), abs=1e-12)
    assert all(entry["p_holm"] is None for entry in ranked_only if "d" in entry["models"])
    # The unranked model's pairs keep their p-values, and leaving them out of the family changed nothing else.
    assert [entry["p_value"] for entry in ranked_only] == [entry["p_value"] for entry in every]


@pytest.fixture(scope="module")
def demo_frames(sqlite_template, tmp_path_factory):
    return build_demo_frames(sqlite_template, tmp_path_factory)


def test_report_comparisons_on_the_demo_match_scipy(demo_frames):
    report = build_report(demo_frames, k=10, resamples=200)
    document = report_json(report)
    grid = report.grid
    gold = grid.gold
    complete = metrics.complete_mask(grid, gold)
    s = (gold == MET).sum(axis=1)
    per_response = pd.DataFrame(
        {
            "case": grid.responses["case_id"],
            "model": grid.responses["model"],
            "cacs_at_k": np.where(s >= 10, (s - 9) / np.maximum(grid.n - 9, 1), 0.0),
            "rubric_accuracy": s / np.maximum(grid.n, 1),
        }
    )[complete]
    assert len(document["comparisons"]["cacs_at_k"]) == len(grid.models) * (len(grid.models) - 1) // 2
    for metric in ("cacs_at_k", "rubric_accuracy"):
        table = per_response.pivot(index="case", columns="model", values=metric)
        for entry in document["comparisons"][metric]:
            a, b = entry["models"]
            both = table[a].notna() & table[b].notna()
            assert entry["n_cases"] == int(both.sum())
            if both.sum() < 2:
                assert entry["p_value"] is None
                continue
            diff, low, high, p = _scipy_pair(table.loc[both, a].to_numpy(), table.loc[both, b].to_numpy())
            assert entry["diff"] == pytest.approx(diff, abs=1e-9)
            assert entry["ci_low"] == pytest.approx(low, abs=1e-9)
            assert entry["ci_high"] == pytest.approx(high, abs=1e-9)
            assert entry["p_value"] == pytest.approx(p, abs=1e-9)
    board = document["leaderboard"]
    assert all(row["ranked"] for row in board)  # every scored model is ranked here (minimum 1)
    scored = {model: row["cacs_at_k"] for model, row in document["models"].items() if row["n_responses"]}
    assert [row["model"] for row in board] == sorted(scored, key=lambda model: (-scored[model], model))
    assert board[0]["tier"] == 1
    for row in board:
        low, high = document["confidence_intervals"]["models"][row["model"]]["cacs_at_k"]
        assert (row["ci_low"], row["ci_high"]) == (low, high)


def test_the_cases_behind_a_comparison_are_the_largest_paired_differences():
    from analysis.comparisons import differing_cases

    frames = reference.synthetic_frames(40, 3, n=10, seed=21, adjudication_share=1.0)
    report = build_report(frames, 4, resamples=0, insights=False)
    a, b = report.grid.models[0], report.grid.models[2]
    found = differing_cases(report.grid, report.scores, 4, a, b, limit=7)
    # Independently: each complete response's CACS@4 from the reference scorer, paired on the case.
    scored = reference.reference_scores(frames)
    scored["cacs"] = [(s - 3) / (n - 3) if s >= 4 else 0.0 for s, n in zip(scored["s"], scored["n"], strict=True)]
    case_ids = dict(zip(frames.cases["case_pk"], frames.cases["case_id"], strict=True))
    by_case = scored.pivot_table(index="case_pk", columns="model", values="cacs").dropna(subset=[a, b])
    by_case["diff"] = by_case[a] - by_case[b]
    largest = sorted(by_case.index, key=lambda pk: (-abs(by_case.loc[pk, "diff"]), pk))[:7]
    assert found["case_id"].tolist() == [case_ids[pk] for pk in largest]
    assert found["diff"].tolist() == pytest.approx([by_case.loc[pk, "diff"] for pk in largest])
    assert found["model_a"].tolist() == pytest.approx([by_case.loc[pk, a] for pk in largest])


def test_the_judge_scored_table_puts_the_calibrated_score_first_where_a_sample_allows():
    import pandas as pd

    from analysis.score_figures import calibrated_columns

    scored = pd.DataFrame({"model": ["new", "other"], "n_responses": [5, 4], "cacs_at_k": [0.4, 0.3]})
    calibrated = {"j": {"new": {"cacs_at_k": {"estimate": 0.35, "ci_low": 0.3, "ci_high": 0.41}}}}
    table = calibrated_columns(scored, calibrated, "j")
    assert list(table.columns) == [
        "model",
        "calibrated_cacs",
        "calibrated_cacs_low",
        "calibrated_cacs_high",
        "n_responses",
        "raw_cacs",
    ]
    assert table.loc[0, ["calibrated_cacs", "calibrated_cacs_low", "calibrated_cacs_high"]].tolist() == [
        0.35,
        0.3,
        0.41,
    ]
    assert table["calibrated_cacs"].isna().tolist() == [False, True] and table["raw_cacs"].tolist() == [0.4, 0.3]
    # No sample allows one yet (or another judge): the table is the judge's as it was.
    assert calibrated_columns(scored, calibrated, "other-judge").equals(scored)
    empty = {"j": {"new": {"cacs_at_k": {"estimate": None, "ci_low": None, "ci_high": None}}}}
    assert calibrated_columns(scored, empty, "j").equals(scored)
