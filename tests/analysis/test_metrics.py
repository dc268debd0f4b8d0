"""Metric core on hand-computed cases (docs/REFERENCE.md §4), edge cases, and agreement with the
straightforward implementation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sklearn.metrics import f1_score

from analysis import agreement as agreement_extra, metrics
from analysis.bootstrap import confidence_intervals
from analysis.frames import Frames
from analysis.grid import RowLookup, prepare
from analysis.report import report_json, tables as report_tables
from db.rules.enums import NO_GROUP, Stage
from db.rules.errors import ValidationFailed
from tests.support.basis import report_as_written as build_report  # §4 as written (no checks in these frames)
from tools import metrics_reference as reference

A, C, J = Stage.annotation, Stage.check, Stage.adjudication


def make_frames(cases: list[dict], responses: list[tuple], labels: list[tuple], judge: list[tuple] = ()) -> Frames:
    """cases: dicts with case_pk, n (+ difficulty, task_labels, subject_labels, register, macro_category);
    responses: (response_id, case_pk, model, length); labels: (response_id, criterion_id, stage, group, met, user);
    judge: (judge, response_id, criterion_id, met). Criteria of a case are c1..cN."""
    case_rows = []
    for case in cases:
        row = {
            "case_pk": case["case_pk"],
            "case_id": f"CC-{case['case_pk']:03d}",
            "difficulty": case.get("difficulty", "medium"),
            "task": "",
            "task_labels": case.get("task_labels", ["differential_diagnosis"]),
            "subject": "",
            "subject_labels": case.get("subject_labels", ["心内科"]),
            "user_role": "患者家属",
            "register": case.get("register", "lay"),
            "macro_category": case.get("macro_category", "im_cardio_pulmonary"),
            "n_criteria": case["n"],
        }
        case_rows.append(row)
    criteria = pd.DataFrame(
        [
            {"case_pk": case["case_pk"], "rubric_version_id": case["case_pk"], "position": i, "criterion_id": f"c{i}"}
            for case in cases
            for i in range(1, case["n"] + 1)
        ],
        columns=["case_pk", "rubric_version_id", "position", "criterion_id"],
    )
    by_pk = {row["case_pk"]: row["case_id"] for row in case_rows}
    response_frame = pd.DataFrame(
        [{"response_id": r, "case_pk": pk, "case_id": by_pk[pk], "model": m, "length": n} for r, pk, m, n in responses]
    )
    label_frame = pd.DataFrame(
        [
            {
                "response_id": r,
                "criterion_id": c,
                "stage": s,
                "group_no": NO_GROUP if g is None else g,
                "met": bool(met),
                "user_id": u,
            }
            for r, c, s, g, met, u in labels
        ],
        columns=["response_id", "criterion_id", "stage", "group_no", "met", "user_id"],
    )
    judge_frame = pd.DataFrame(list(judge), columns=["judge", "response_id", "criterion_id", "met"])
    judge_frame["met"] = judge_frame["met"].astype(bool)
    return Frames(
        cases=pd.DataFrame(case_rows),
        criteria=criteria,
        responses=response_frame,
        labels=label_frame,
        judge=judge_frame,
        users=pd.DataFrame(columns=["user_id", "username", "role", "group_no"]),
    )


def both_groups(response_id: int, mets1: list[int], mets2: list[int] | None = None, users=(1, 2)) -> list[tuple]:
    """Annotation labels of both groups on criteria c1..cN of a response."""
    mets2 = mets1 if mets2 is None else mets2
    rows = [(response_id, f"c{i + 1}", A, 1, met, users[0]) for i, met in enumerate(mets1)]
    rows += [(response_id, f"c{i + 1}", A, 2, met, users[1]) for i, met in enumerate(mets2)]
    return rows


# CACS, Pass@k, rubric accuracy ----------------------------------------------------------------


@pytest.mark.parametrize("s, expected", [(9, 0.0), (10, 1 / 21), (15, 6 / 21), (30, 1.0), (0, 0.0)])
def test_cacs_behaviour_table_of_the_paper(s, expected):
    value = float(metrics.cacs(np.array([s]), np.array([30]), 10)[0])
    assert value == pytest.approx(expected, abs=1e-15)
    # equivalently the mean over thresholds L = k..N of [s ≥ L]
    assert value == pytest.approx(np.mean([s >= level for level in range(10, 31)]))


def test_paper_rounded_percentages():
    values = metrics.cacs(np.array([9, 10, 15, 30]), np.array([30] * 4), 10)
    assert [round(v * 100, 1) for v in values] == [0.0, 4.8, 28.6, 100.0]


def test_model_scores_by_hand():
    # N = 4, k = 2; model m1: s = 1 and s = 3; model m2: s = 4 (one complete) and an incomplete response.
    frames = make_frames(
        [{"case_pk": 1, "n": 4}, {"case_pk": 2, "n": 4}],
        [(1, 1, "m1", 100), (2, 2, "m1", 300), (3, 1, "m2", 50), (4, 2, "m2", 70)],
        both_groups(1, [1, 0, 0, 0])
        + both_groups(2, [1, 1, 1, 0])
        + both_groups(3, [1, 1, 1, 1])
        + [(4, "c1", A, 1, True, 1)],
    )
    report = build_report(frames, k=2, resamples=0)
    m1, m2 = report.models.loc["m1"], report.models.loc["m2"]
    assert m1["n_responses"] == 2 and m2["n_responses"] == 1
    assert m1["rubric_accuracy"] == pytest.approx((1 / 4 + 3 / 4) / 2)
    assert m1["pass_at_k"] == pytest.approx(0.5)
    assert m1["cacs_at_k"] == pytest.approx((0 + (3 - 2 + 1) / (4 - 2 + 1)) / 2)
    assert m1["mean_length"] == pytest.approx(200)
    assert m2["cacs_at_k"] == pytest.approx(1.0) and m2["mean_length"] == pytest.approx(50)
    # cacs_by_k: k' = 1 → s/N for every s ≥ 1
    assert m1["cacs@1"] == pytest.approx((1 / 4 + 3 / 4) / 2)
    assert report.pending == {"unresolved_disagreements": 0, "incomplete_responses": 1, "provisional_responses": 0}


def test_gold_prefers_adjudication_and_check_labels():
    # c1: groups disagree, adjudicated met; c2: group 1 annotation not met, but its check says met, group 2 met.
    labels = [
        (1, "c1", A, 1, True, 1),
        (1, "c1", A, 2, False, 2),
        (1, "c1", J, None, True, 9),
        (1, "c2", A, 1, False, 1),
        (1, "c2", C, 1, True, 3),
        (1, "c2", A, 2, True, 2),
        (1, "c3", A, 2, False, 2),
    ]  # c3: single
    frames = make_frames([{"case_pk": 1, "n": 3}], [(1, 1, "m", 10)], labels)
    report = build_report(frames, k=1, resamples=0)
    assert report.models.loc["m", "rubric_accuracy"] == pytest.approx(2 / 3)
    assert report.pending["unresolved_disagreements"] == 0
    # group 1 final of c2 is its check label
    assert report.grid.group1[0].tolist() == [1, 1, -1]


def test_unresolved_disagreement_makes_response_incomplete():
    frames = make_frames([{"case_pk": 1, "n": 2}], [(1, 1, "m", 10)], both_groups(1, [1, 1], [1, 0]))
    report = build_report(frames, k=1, resamples=0)
    assert report.pending == {"unresolved_disagreements": 1, "incomplete_responses": 1, "provisional_responses": 0}
    document = report_json(report)
    assert document["models"]["m"]["n_responses"] == 0
    assert document["models"]["m"]["cacs_at_k"] is None and document["models"]["m"]["mean_length"] is None


def test_labels_outside_the_current_rubric_are_ignored():
    labels = both_groups(1, [1, 1]) + [(1, "c9", A, 1, False, 1), (1, "c9", A, 2, True, 2)]
    frames = make_frames([{"case_pk": 1, "n": 2}], [(1, 1, "m", 10)], labels)
    report = build_report(frames, k=1, resamples=0)
    assert report.models.loc["m", "rubric_accuracy"] == 1.0
    assert report.pending["unresolved_disagreements"] == 0


# Sources --------------------------------------------------------------------------------------


def test_group_and_judge_sources():
    labels = both_groups(1, [1, 1, 0], [1, 0, 0]) + [(2, "c1", A, 1, True, 1)]
    judge = [("j", 1, "c1", True), ("j", 1, "c2", True), ("j", 1, "c3", True), ("j", 2, "c1", False)]
    frames = make_frames([{"case_pk": 1, "n": 3}], [(1, 1, "m", 10), (2, 1, "n", 10)], labels, judge)
    grid = prepare(frames)
    assert build_report(frames, 1, "group1", grid=grid, resamples=0).models.loc[
        "m", "rubric_accuracy"
    ] == pytest.approx(2 / 3)
    assert build_report(frames, 1, "group2", grid=grid, resamples=0).models.loc[
        "m", "rubric_accuracy"
    ] == pytest.approx(1 / 3)
    judged = build_report(frames, 1, "judge:j", grid=grid, resamples=0)
    assert judged.models.loc["m", "rubric_accuracy"] == 1.0
    assert judged.models.loc["n", "n_responses"] == 0 and judged.pending["incomplete_responses"] == 1
    with pytest.raises(ValidationFailed, match="no judge decisions named 'x'"):
        build_report(frames, 1, "judge:x", grid=grid, resamples=0)
    with pytest.raises(ValidationFailed, match="expected gold, group1, group2"):
        build_report(frames, 1, "experts", grid=grid, resamples=0)


@pytest.mark.parametrize("k", [0, 4, -1, 2.5, True])
def test_k_out_of_range_is_refused(k):
    frames = make_frames([{"case_pk": 1, "n": 3}], [(1, 1, "m", 10)], both_groups(1, [1, 1, 0]))
    with pytest.raises(ValidationFailed, match="from 1 to 3"):
        build_report(frames, k, resamples=0)


# Macro-F1 -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "g1, g2",
    [
        ([1] * 5, [1] * 5),  # identical all met → 1.0 (one class present)
        ([0] * 5, [0] * 5),
        ([1, 1, 1, 1, 0], [1, 1, 1, 1, 1]),  # class 0 present in one list only → its F1 is 0
        ([1, 0, 1, 0], [0, 1, 0, 1]),
        ([1, 0, 0, 1, 1, 0], [1, 0, 1, 1, 0, 0]),
        ([0, 0, 0], [1, 1, 1]),
    ],
)
def test_macro_f1_matches_sklearn(g1, g2):
    counts = metrics.confusion_counts(np.array([g1]), np.array([g2]), np.ones((1, len(g1)), bool))
    assert float(metrics.macro_f1(counts)[0]) == f1_score(g1, g2, average="macro")


def test_macro_f1_of_nothing_is_undefined():
    assert math.isnan(float(metrics.macro_f1(np.zeros(4))))


def test_case_and_pooled_mf1_by_hand_and_unaligned_pair():
    # m: two aligned pairs (identical all-met → 1.0; one disagreement) and one unaligned (group 2 lacks c3).
    labels = both_groups(1, [1, 1, 1]) + both_groups(2, [1, 0, 1], [1, 1, 1])
    labels += [
        (3, "c1", A, 1, True, 1),
        (3, "c2", A, 1, True, 1),
        (3, "c3", A, 1, True, 1),
        (3, "c1", A, 2, False, 2),
        (3, "c2", A, 2, False, 2),
    ]
    frames = make_frames(
        [{"case_pk": i, "n": 3} for i in (1, 2, 3)], [(1, 1, "m", 10), (2, 2, "m", 10), (3, 3, "m", 10)], labels
    )
    result = metrics.agreement(prepare(frames))
    row = result.per_model.loc["m"]
    assert row["n_aligned"] == 2
    second = f1_score([1, 0, 1], [1, 1, 1], average="macro")
    assert sorted(result.pairs["mf1"]) == [second, 1.0]
    assert row["case_mf1_mean"] == pytest.approx((1 + second) / 2)
    assert row["case_mf1_median"] == pytest.approx((1 + second) / 2)
    assert row["pooled_mf1"] == f1_score([1, 1, 1, 1, 0, 1], [1, 1, 1, 1, 1, 1], average="macro")
    assert result.overall_mf1 == row["pooled_mf1"] and result.n_aligned == 2


def test_rater_counts_per_model_and_group():
    labels = both_groups(1, [1, 1], users=(1, 2)) + both_groups(2, [1, 1], users=(3, 2))
    labels += [(2, "c1", C, 1, False, 7), (1, "c1", C, 2, False, 8), (1, "c2", C, 2, False, 9)]
    frames = make_frames([{"case_pk": 1, "n": 2}], [(1, 1, "m", 1), (2, 1, "n", 1)], labels)
    raters = prepare(frames).raters
    assert raters.loc["m"].tolist() == [1, 1, 0, 2]
    assert raters.loc["n"].tolist() == [1, 1, 1, 0]


# Judges and cross-grader ------------------------------------------------------------------------


def test_judge_fidelity_over_decisions_both_have():
    labels = both_groups(1, [1, 0, 1], [1, 1, 1])
    judge = [("j", 1, "c1", True), ("j", 1, "c2", False), ("j", 1, "c3", False), ("j", 1, "c9", True)]
    frames = make_frames([{"case_pk": 1, "n": 3}], [(1, 1, "m", 1)], labels, judge)
    fidelity = metrics.judge_fidelity(prepare(frames)).loc["j"]
    assert fidelity["mf1_group1"] == f1_score([1, 0, 1], [1, 0, 0], average="macro")
    assert fidelity["mf1_group2"] == f1_score([1, 1, 1], [1, 0, 0], average="macro")
    assert fidelity["mf1_mean"] == pytest.approx((fidelity["mf1_group1"] + fidelity["mf1_group2"]) / 2)
    # gold: c2 is an unresolved disagreement → only c1, c3 count
    assert fidelity["mf1_gold"] == f1_score([1, 1], [1, 0], average="macro")
    assert fidelity["n_decisions"] == 4


def test_single_judge_has_no_cross_grader_pairs_and_json_is_a_list():
    frames = make_frames([{"case_pk": 1, "n": 1}], [(1, 1, "m", 1)], both_groups(1, [1]), [("j", 1, "c1", True)])
    document = report_json(build_report(frames, 1, resamples=0))
    assert document["cross_grader"] == []
    assert list(document["judges"]) == ["j"]


def test_cross_grader_by_hand():
    # positive rates: judge a: m1 1.0, m2 0.5, m3 0.0; judge b: m1 0.5, m2 1.0, m3 0.0
    responses = [(1, 1, "m1", 1), (2, 1, "m2", 1), (3, 1, "m3", 1)]
    judge = [
        ("a", 1, "c1", 1),
        ("a", 1, "c2", 1),
        ("a", 2, "c1", 1),
        ("a", 2, "c2", 0),
        ("a", 3, "c1", 0),
        ("a", 3, "c2", 0),
        ("b", 1, "c1", 1),
        ("b", 1, "c2", 0),
        ("b", 2, "c1", 1),
        ("b", 2, "c2", 1),
        ("b", 3, "c1", 0),
        ("b", 3, "c2", 0),
        ("c", 1, "c1", 0),
    ]
    frames = make_frames([{"case_pk": 1, "n": 2}], responses, [], judge)
    table = metrics.cross_grader(prepare(frames))
    assert [tuple(pair) for pair in table[["judge_a", "judge_b"]].to_numpy()] == [("a", "b"), ("a", "c"), ("b", "c")]
    ab = table.iloc[0]
    assert ab["spearman"] == pytest.approx(0.5)
    assert ab["kendall_tau_b"] == pytest.approx(1 / 3)
    assert ab["mean_abs_diff_pp"] == pytest.approx((50 + 50 + 0) / 3)
    # three models ranked: top-5 overlap is over min(5, 3) = 3 (docs/REFERENCE.md §4)
    assert ab["top3"] == pytest.approx(1.0) and ab["top5"] == pytest.approx(3 / 3)
    # judge c rates only m1 (0.0): a single model → correlations undefined
    assert math.isnan(table.iloc[1]["spearman"])


def test_top_overlap_breaks_ties_by_model_name():
    x = pd.Series({"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.1})
    y = pd.Series({"a": 0.1, "b": 0.9, "c": 0.8, "d": 0.7})
    assert metrics.top_models(x, 1) == {"a"}
    assert metrics.top_overlap(x, y, 3) == pytest.approx(2 / 3)


# Threshold sensitivity, length, slices -----------------------------------------------------------


def test_threshold_sensitivity_skips_thresholds_above_n_and_handles_constant_input():
    frames = make_frames(
        [{"case_pk": 1, "n": 8}],
        [(1, 1, "m1", 1), (2, 1, "m2", 1)],
        both_groups(1, [1] * 8) + both_groups(2, [1] * 4 + [0] * 4),
    )
    report = build_report(frames, 3, resamples=0)
    assert list(report.sensitivity.index) == [6, 7, 8]
    document = report_json(report)
    # CACS@6..8 of m2 (s = 4) is 0 and of m1 is 1: ranks agree
    assert document["threshold_sensitivity"]["6"]["spearman"] == pytest.approx(1.0)
    frames = make_frames(
        [{"case_pk": 1, "n": 8}], [(1, 1, "m1", 1), (2, 1, "m2", 1)], both_groups(1, [0] * 8) + both_groups(2, [0] * 8)
    )
    document = report_json(build_report(frames, 3, resamples=0))
    assert document["threshold_sensitivity"]["6"]["spearman"] is None  # constant input
    assert document["length"]["pearson_cacs"] is None


def test_length_diagnostics_and_partial_by_hand():
    # two cases, two models; CACS@1 = s/N with N = 2
    labels = both_groups(1, [1, 1]) + both_groups(2, [0, 1]) + both_groups(3, [1, 0]) + both_groups(4, [0, 0])
    frames = make_frames(
        [{"case_pk": 1, "n": 2}, {"case_pk": 2, "n": 2}],
        [(1, 1, "m1", 300), (2, 1, "m2", 100), (3, 2, "m1", 250), (4, 2, "m2", 50)],
        labels,
    )
    report = build_report(frames, 1, resamples=0)
    length = np.array([300, 100, 250, 50.0])
    value = np.array([1.0, 0.5, 0.5, 0.0])
    assert report.length["pearson_cacs"] == pytest.approx(np.corrcoef(length, value)[0, 1])
    resid_length = length - np.array([200, 200, 150, 150])
    resid_value = value - np.array([0.75, 0.75, 0.25, 0.25])
    assert report.length["partial_cacs"] == pytest.approx(np.corrcoef(resid_length, resid_value)[0, 1])


def test_slices_count_multi_label_themes_once_per_family():
    cases = [
        {"case_pk": 1, "n": 1, "difficulty": "low", "task_labels": ["treatment_planning", "用药指导", "奇怪主题"]},
        {"case_pk": 2, "n": 1, "difficulty": "high", "task_labels": ["differential_diagnosis"]},
    ]
    frames = make_frames(cases, [(1, 1, "m", 1), (2, 2, "m", 1)], both_groups(1, [1]) + both_groups(2, [0]))
    document = report_json(build_report(frames, 1, resamples=0))
    slices = document["slices"]
    assert slices["difficulty"] == {"high": {"m": 0.0}, "low": {"m": 1.0}}
    assert slices["capability_family"]["treatment"] == {"m": 1.0}  # counted once for two treatment themes
    assert slices["capability_family"]["reasoning"] == {"m": 0.0}
    assert slices["task_theme"]["奇怪主题"] == {"m": 1.0} and slices["capability_family"]["奇怪主题"] == {"m": 1.0}
    assert slices["task_theme"]["treatment_planning"] == {"m": 1.0}
    families = report_slice_counts(frames)
    assert families.loc[families["value"] == "treatment", "n_responses"].item() == 1


def report_slice_counts(frames):
    report = build_report(frames, 1, resamples=0)
    return report.slices[report.slices["dimension"] == "capability_family"]


# Beyond the paper ----------------------------------------------------------------------------


def test_agreement_coefficients_by_hand():
    # Cohen's κ is checked against scikit-learn in tests/analysis/test_metrics_oracles.py.
    values = agreement_extra.coefficients(np.array([40, 10, 5, 45]))
    observed = 0.85
    assert values["pabak"] == pytest.approx(0.7)
    prevalence = (0.5 + 0.45) / 2
    assert values["ac1"] == pytest.approx(
        (observed - 2 * prevalence * (1 - prevalence)) / (1 - 2 * prevalence * (1 - prevalence))
    )
    assert math.isnan(float(agreement_extra.coefficients(np.array([5, 0, 0, 0]))["kappa"]))


def test_criterion_agreement_and_low_agreement_tail():
    labels = both_groups(1, [1, 1], [0, 1]) + both_groups(2, [1, 1], [0, 1]) + both_groups(3, [0, 0])
    frames = make_frames(
        [{"case_pk": 1, "n": 2}, {"case_pk": 2, "n": 2}], [(1, 1, "m1", 1), (2, 1, "m2", 1), (3, 2, "m1", 1)], labels
    )
    report = build_report(frames, 1, resamples=0)
    lowest = report.criterion_agreement.iloc[0]
    assert (lowest["case_id"], lowest["criterion_id"], lowest["n_decisions"], lowest["agreement"]) == (
        "CC-001",
        "c1",
        2,
        0.0,
    )
    assert report.low_agreement_cases["case_id"].tolist() == ["CC-001"]


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    frames = reference.synthetic_frames(30, 3, n=10, seed=5, adjudication_share=1.0)
    one = build_report(frames, 5, resamples=200, seed=11)
    two = build_report(frames, 5, resamples=200, seed=11)
    pd.testing.assert_frame_equal(one.intervals, two.intervals)
    for model, row in one.intervals.iterrows():
        estimate = one.models.loc[model, "cacs_at_k"]
        assert row["cacs_at_k_low"] <= estimate <= row["cacs_at_k_high"]
        assert row["pooled_mf1_low"] <= one.agreement.per_model.loc[model, "pooled_mf1"] <= row["pooled_mf1_high"]
    assert confidence_intervals(one.grid, one.scores, one.agreement, 5, resamples=50, seed=1).notna().all().all()


# Vectorised = straightforward, on random data -----------------------------------------------------


def _assert_close(mine, theirs, label):
    if theirs is None or mine is None:
        assert mine is None and theirs is None, label
    else:
        assert mine == pytest.approx(theirs, abs=1e-12), label


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n_cases=st.integers(1, 8),
    n_models=st.integers(1, 4),
    n=st.integers(1, 6),
    k=st.integers(1, 6),
    missing=st.sampled_from([0.0, 0.05, 0.3]),
    adjudicated=st.sampled_from([0.0, 0.5, 1.0]),
    source=st.sampled_from(["gold", "group1", "group2", "judge:judge-a"]),
)
def test_vectorised_matches_straightforward(seed, n_cases, n_models, n, k, missing, adjudicated, source):
    k = min(k, n)
    frames = reference.synthetic_frames(
        n_cases,
        n_models,
        n=n,
        seed=seed,
        missing_share=missing,
        adjudication_share=adjudicated,
        check_share=0.2,
        annotators_per_group=3,
    )
    if source.startswith("judge:") and source[6:] not in set(frames.judge["judge"]):
        with pytest.raises(ValidationFailed, match="no judge decisions named"):
            build_report(frames, k, source, resamples=0)
        return
    document = report_json(build_report(frames, k, source, resamples=0))
    for model, values in reference.reference_model_scores(frames, k, source).items():
        for key, value in values.items():
            _assert_close(document["models"][model][key], value, f"{model}.{key}")
    expected = reference.reference_agreement(frames)
    for model, values in expected["models"].items():
        for key, value in values.items():
            _assert_close(document["agreement"][model][key], value, f"agreement {model}.{key}")
    _assert_close(document["agreement_overall"]["pooled_mf1"], expected["overall"]["pooled_mf1"], "overall")
    for judge, values in reference.reference_judge_fidelity(frames).items():
        for key, value in values.items():
            _assert_close(document["judges"][judge][key], value, f"{judge}.{key}")
    for key, value in reference.reference_length(frames, k, source).items():
        _assert_close(document["length"][key], value, key)


def test_grid_subset_equals_the_report_of_the_filtered_frames():
    frames = reference.synthetic_frames(24, 4, n=6, seed=9, adjudication_share=0.8, check_share=0.2)
    grid = prepare(frames)
    high = set(frames.cases.loc[frames.cases["difficulty"] != "low", "case_pk"])
    keep = frames.responses[
        frames.responses["model"].isin(["model-a", "model-c"]) & frames.responses["case_pk"].isin(high)
    ]
    ids = set(keep["response_id"])
    filtered = reference.Frames(
        cases=frames.cases,
        criteria=frames.criteria,
        responses=keep,
        labels=frames.labels[frames.labels["response_id"].isin(ids)],
        judge=frames.judge[frames.judge["response_id"].isin(ids)],
        users=frames.users,
    )
    mask = grid.responses["response_id"].isin(ids).to_numpy()
    from_subset = report_json(build_report(None, 3, grid=grid.subset(mask), resamples=100))
    from_frames = report_json(build_report(filtered, 3, resamples=100))
    assert from_subset == from_frames
    assert set(from_subset["models"]) == {"model-a", "model-c"}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), check=st.sampled_from([0.0, 0.3]), missing=st.sampled_from([0.0, 0.2]))
def test_gold_rules_match_a_decision_by_decision_reading(seed, check, missing):
    """db.rules.gold (vectorised) against docs/REFERENCE.md §4 read literally, one decision at a time."""
    from db.rules.gold import gold_labels, group_final_labels, unresolved_disagreements

    frames = reference.synthetic_frames(
        5, 3, n=4, seed=seed, check_share=check, missing_share=missing, adjudication_share=0.5, annotators_per_group=2
    )
    by_decision: dict = {}
    for row in frames.labels.itertuples():
        by_decision.setdefault((row.response_id, row.criterion_id), {})[(str(row.stage), row.group_no)] = bool(row.met)
    expected_gold, expected_finals, expected_open = {}, {}, set()
    for decision, labels in by_decision.items():
        finals = {}
        for group in (1, 2):
            if (Stage.check.value, group) in labels:
                finals[group] = labels[(Stage.check.value, group)]
            elif (Stage.annotation.value, group) in labels:
                finals[group] = labels[(Stage.annotation.value, group)]
        expected_finals.update({(*decision, group): met for group, met in finals.items()})
        if (Stage.adjudication.value, NO_GROUP) in labels:
            expected_gold[decision] = (labels[(Stage.adjudication.value, NO_GROUP)], "adjudicated")
        elif len(finals) == 2 and finals[1] == finals[2]:
            expected_gold[decision] = (finals[1], "agreement")
        elif len(finals) == 1:
            expected_gold[decision] = (next(iter(finals.values())), "single")
        elif len(finals) == 2:
            expected_open.add(decision)
    gold = gold_labels(frames.labels)
    assert {(r.response_id, r.criterion_id): (bool(r.met), r.source) for r in gold.itertuples()} == expected_gold
    finals = group_final_labels(frames.labels)
    assert {(r.response_id, r.criterion_id, r.group_no): bool(r.met) for r in finals.itertuples()} == expected_finals
    unresolved = unresolved_disagreements(frames.labels)
    assert set(zip(unresolved["response_id"], unresolved["criterion_id"])) == expected_open


def test_figures_draw_the_report_numbers():
    from analysis import figures

    frames = reference.synthetic_frames(20, 3, n=10, seed=4, adjudication_share=1.0)
    report = build_report(frames, 4, resamples=50)
    built = dict(figures.figures(report, figures.translator("en")))
    assert set(built) >= {
        "case_mf1",
        "pooled_mf1",
        "accuracy_vs_cacs",
        "case_accuracy",
        "slice_difficulty",
        "slice_macro_category",
        "slice_register",
        "family_heatmap",
        "judge_fidelity",
        "rank_shifts",
        "threshold",
        "length",
    }
    bars = built["pooled_mf1"].data[0]
    assert list(bars.x) == report.grid.models
    assert list(bars.y) == pytest.approx(report.agreement.per_model["pooled_mf1"].tolist())
    heatmap = built["family_heatmap"].data[0]
    table = report.slices[report.slices["dimension"] == "capability_family"]
    first_family = sorted(table["value"].unique())[0]  # rows in id order, each shown by its name
    first = table[(table["value"] == first_family) & (table["model"] == heatmap.x[0])]["cacs_at_k"].item()
    assert heatmap.z[0][0] == pytest.approx(first - report.models.loc[heatmap.x[0], "cacs_at_k"])
    threshold_lines = built["threshold"].data
    for line in threshold_lines:  # one line a model, named by it
        assert list(line.y)[3] == pytest.approx(report.models.loc[line.name, "cacs@4"])
    assert built["judge_fidelity"].data[2].y[0] == pytest.approx(report.judges["mf1_gold"].iloc[0])
    html = figures.html_report(report, report_tables(report), lang="zh")
    assert "ClinConsensus 分析报告" in html and html.count("Plotly.newPlot") == len(built)


def test_case_accuracy_violins_and_family_values_match_an_independent_count():
    from analysis import figures

    frames = reference.synthetic_frames(30, 3, n=10, seed=6, adjudication_share=1.0)
    k = 4
    report = build_report(frames, k, resamples=20)
    built = dict(figures.figures(report, figures.translator("zh")))
    violins = [trace for trace in built["case_accuracy"].data if trace.type == "violin"]
    scored = reference.reference_scores(frames)
    assert sorted(trace.name for trace in violins) == sorted(report.grid.models)  # in the leaderboard's order
    for trace in violins:
        mine = scored[scored["model"] == trace.name]
        assert sorted(trace.y) == pytest.approx(sorted((mine["s"] / mine["n"]).tolist()))
    (markers,) = [trace for trace in built["case_accuracy"].data if trace.type == "scatter"]
    for model, value in zip(markers.x, markers.y, strict=True):
        mine = scored[(scored["model"] == model) & (scored["s"] >= k)]
        assert value == pytest.approx((mine["s"] / mine["n"]).mean())
    (band,) = built["case_accuracy"].layout.shapes
    assert (band.y0, band.y1) == (0, pytest.approx((k - 0.5) / 10))

    heatmap = built["family_heatmap"].data[0]
    table = report.slices[report.slices["dimension"] == "capability_family"]
    for row, family in zip(heatmap.text, sorted(table["value"].unique()), strict=True):
        for cell, model in zip(row, heatmap.x, strict=True):
            value = table[(table["value"] == family) & (table["model"] == model)]["cacs_at_k"]
            assert cell == ("—" if value.empty or np.isnan(value.item()) else f"{value.item() * 100:.1f}%")
    assert heatmap.texttemplate == "%{text}"


def test_correlations_of_a_hand_counted_example_and_their_undefined_cases():
    # One swapped pair of four: 5 concordant, 1 discordant pairs; rank differences 0, 1, 1, 0.
    x, y = [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]
    assert metrics.correlation("kendall", x, y) == pytest.approx((5 - 1) / 6)
    assert metrics.correlation("spearman", x, y) == pytest.approx(1 - 6 * 2 / (4 * (16 - 1)))
    assert metrics.correlation("pearson", x, y) == pytest.approx(0.8)
    # Ties: τ-b = (P − Q) / √((P + Q + T_x)(P + Q + T_y)) with x = [1, 1, 2], y = [1, 2, 3]: P = 2, Q = 0, T_x = 1.
    assert metrics.correlation("kendall", [1.0, 1.0, 2.0], [1.0, 2.0, 3.0]) == pytest.approx(2 / np.sqrt(3 * 2))
    for kind in ("pearson", "spearman", "kendall"):
        assert np.isnan(metrics.correlation(kind, np.ones(5), np.arange(5.0)))
        assert np.isnan(metrics.correlation(kind, [1.0], [2.0]))
    with pytest.raises(ValueError, match="unknown correlation"):
        metrics.correlation("cosine", x, y)


@pytest.mark.parametrize("size", [2, 3, 11, 60, metrics.KENDALL_PAIRWISE_MAX + 1])
def test_correlations_equal_scipy_stats_with_and_without_ties(size):
    from scipy import stats

    rng = np.random.default_rng(size)
    for x, y in (
        (rng.random(size), rng.random(size)),  # no ties
        (rng.integers(0, 4, size).astype(float), rng.integers(0, 3, size).astype(float)),  # many ties
        (np.arange(size, dtype=float), -np.arange(size, dtype=float)),  # perfectly reversed
    ):
        if np.all(x == x[0]) or np.all(y == y[0]):
            continue
        assert metrics.correlation("pearson", x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
        assert metrics.correlation("spearman", x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
        assert metrics.correlation("kendall", x, y) == pytest.approx(stats.kendalltau(x, y)[0], abs=1e-12)
        assert np.array_equal(metrics.average_ranks(x), stats.rankdata(x, method="average"))


def test_a_report_loads_no_scipy_stats(tmp_path):
    """The correlations and Student's t are in numpy and scipy.special: scipy.stats would cost each report about
    a second of import (docs/performance.md). The frames are made here (their generator uses scipy.stats) and
    the report is built in a fresh interpreter."""
    import pickle
    import subprocess
    import sys

    frames_file = tmp_path / "frames.pickle"
    frames_file.write_bytes(pickle.dumps(reference.synthetic_frames(40, 4, n=10, seed=3, adjudication_share=1.0)))
    script = (
        "import pickle, sys\n"
        "from analysis.report import build_report, report_json\n"
        f"frames = pickle.loads(open({str(frames_file)!r}, 'rb').read())\n"
        "document = report_json(build_report(frames, resamples=20))\n"
        "print(len(document['models']), 'scipy.stats' in sys.modules)\n"
    )
    answer = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert answer.stdout.split() == ["4", "False"]


def test_the_per_response_figures_send_compact_values_and_no_name_per_response():
    from analysis import figures

    frames = reference.synthetic_frames(30, 3, n=10, seed=6, adjudication_share=1.0)
    report = build_report(frames, 4, resamples=20)
    built = dict(figures.figures(report, figures.translator("zh")))
    spread = [t for name in ("case_accuracy", "case_mf1") for t in built[name].data if t.type in ("violin", "box")]
    assert len(spread) == 2 * len(report.grid.models)
    for trace in spread:
        assert trace.x is None, "a category's trace stands at its name, without a name per response"
        assert isinstance(trace.y, np.ndarray) and trace.y.dtype == np.float32
    # Plotly sends float32 arrays as typed arrays: 4 bytes a value, where a list of numbers took about 20.
    payload = built["case_accuracy"].to_plotly_json()["data"][0]["y"]
    assert payload["dtype"] == "f4"


@pytest.mark.parametrize("dense", [True, False])
def test_the_row_lookup_answers_as_a_pandas_index(dense):
    rng = np.random.default_rng(7)
    # Dense ids (as a database numbers rows) get a direct table; ids spread far apart are searched.
    ids = rng.permutation(np.arange(1, 5_000))[:3_000] if dense else rng.choice(10**9, 3_000, replace=False)
    lookup = RowLookup(ids)
    assert (lookup.table is not None) == dense
    extremes = np.array(
        [0, -1, -7, ids.max() + 1, ids.max() + 2, 10**12, np.iinfo(np.int64).max, np.iinfo(np.int64).min]
    )
    asked = np.concatenate([ids, extremes, rng.integers(-10, int(ids.max()) + 10, 2_000)])
    expected = pd.Index(ids).get_indexer(asked)
    assert (expected >= 0).sum() >= len(ids) and (expected == -1).sum() >= len(extremes)
    assert lookup(asked).tolist() == expected.tolist()
    unsigned = asked[asked >= 0].astype(np.uint64)
    assert lookup(unsigned).tolist() == pd.Index(ids).get_indexer(asked[asked >= 0]).tolist()
    assert lookup(np.array([], dtype=np.int64)).tolist() == []
