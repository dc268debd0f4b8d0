"""Criterion reliability, judges by model and slice, the human ceiling, per-annotator and per-slice agreement:
hand-made cases, and every value against sklearn / scipy computed straight from the label rows."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score

from analysis.grid import DecisionGrid, prepare
from analysis.reliability import criteria, judge_errors, physicians, slices_and_judges, thresholds_and_counts
from db.rules.enums import Stage
from db.rules.gold import gold_labels, group_final_labels
from tests.analysis.test_metrics import J, both_groups, make_frames
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tools import metrics_reference

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")


def prepared(frames) -> DecisionGrid:
    grid = prepare(frames)
    if "tags" in frames.criteria and "tags" not in grid.criteria:
        tags = frames.criteria.set_index(["case_pk", "criterion_id"])["tags"]
        keys = pd.MultiIndex.from_arrays(
            [
                grid.cases["case_pk"].to_numpy()[grid.criteria["case_row"].to_numpy()],
                grid.criteria["criterion_id"].to_numpy(),
            ]
        )
        grid.criteria = grid.criteria.assign(tags=tags.reindex(keys).to_numpy())
    return grid


def close(mine, theirs):
    if theirs is None or (isinstance(theirs, float) and math.isnan(theirs)):
        return mine is None or (isinstance(mine, float) and math.isnan(mine))
    return mine == pytest.approx(theirs, abs=1e-12)


# Hand-made flags -------------------------------------------------------------------------------


def flag_frames():
    models = [f"m{i}" for i in range(1, 6)]
    cases = [{"case_pk": 1, "n": 3}, {"case_pk": 2, "n": 3}, {"case_pk": 3, "n": 3}]
    responses = [(pk * 10 + i, pk, model, 100) for pk in (1, 2) for i, model in enumerate(models)]
    responses += [(30 + i, 3, model, 100) for i, model in enumerate(models[:4])]
    plan = {
        1: ([[1, 1, 0, 0, 1], [0] * 5, [1] * 5], [[1, 0, 1, 0, 0], [0, 0, 0, 0, 1], [1] * 5]),
        2: ([[1, 0, 1, 0, 1], [1, 1, 0, 0, 1], [1, 0, 0, 0, 0]], [[1, 0, 1, 0, 1], [1, 1, 0, 0, 0], [0, 1, 0, 0, 0]]),
        3: ([[1, 0, 1, 0], [0] * 4, [1] * 4], [[0, 1, 0, 1], [0] * 4, [1] * 4]),
    }
    labels = []
    for pk, (first, second) in plan.items():
        for i in range(len(first[0])):
            labels += both_groups(pk * 10 + i, [row[i] for row in first], [row[i] for row in second])
    labels.append((14, "c2", J, None, False, 9))  # the one slip on case 1's c2 is adjudicated
    judge = [("jx", rid, f"c{c}", (rid + c) % 3 == 0) for rid, _, _, _ in responses for c in (1, 2, 3)]
    return make_frames(cases, responses, labels, judge)


def test_flags_by_hand():
    table = criteria.criterion_reliability(prepared(flag_frames()), min_aligned=5, min_disagreements=2)
    flags = dict(zip(zip(table["case_id"], table["criterion_id"]), table["flag"]))
    assert flags == {
        ("CC-001", "c1"): "unreliable",
        ("CC-001", "c2"): "never_met",
        ("CC-001", "c3"): "always_met",
        ("CC-002", "c1"): None,
        ("CC-002", "c2"): None,
        ("CC-002", "c3"): "unreliable",
        ("CC-003", "c1"): None,
        ("CC-003", "c2"): None,
        ("CC-003", "c3"): None,
    }  # 4 pairs: too few
    row = table.set_index(["case_id", "criterion_id"]).loc[("CC-001", "c2")]
    assert row["kappa"] == 0.0 and row["n_disagree"] == 1 and row["gold_met_rate"] == 0.0  # the κ paradox
    assert math.isnan(table.set_index(["case_id", "criterion_id"]).loc[("CC-001", "c3"), "kappa"])
    unresolved = table.set_index(["case_id", "criterion_id"]).loc[("CC-002", "c3")]
    assert unresolved["n_aligned"] == 5 and unresolved["n_gold"] == 3  # two unresolved disagreements
    ordered = criteria.flagged_criteria(table)
    assert list(zip(ordered["case_id"], ordered["criterion_id"])) == [
        ("CC-002", "c3"),
        ("CC-001", "c1"),
        ("CC-001", "c2"),
        ("CC-001", "c3"),
    ]
    assert ordered["kappa"].iloc[0] == pytest.approx(-0.25) and ordered["kappa"].iloc[1] == pytest.approx(-0.08 / 0.52)
    cases = criteria.flagged_cases(table)
    assert cases["case_id"].tolist() == ["CC-001", "CC-002"] and cases["n_flagged"].tolist() == [3, 1]


def test_threshold_and_minimum_are_parameters():
    grid = prepared(flag_frames())
    lenient = criteria.criterion_reliability(grid, kappa_threshold=-0.5, min_aligned=4, min_disagreements=2)
    flags = dict(zip(zip(lenient["case_id"], lenient["criterion_id"]), lenient["flag"]))
    assert flags[("CC-001", "c1")] is None and flags[("CC-002", "c3")] is None  # κ above −0.5
    assert flags[("CC-003", "c1")] == "unreliable" and flags[("CC-003", "c2")] == "never_met"  # 4 pairs now count


def test_default_rule_needs_ten_pairs_and_four_disagreements():
    assert (
        thresholds_and_counts.KAPPA_THRESHOLD,
        thresholds_and_counts.MIN_ALIGNED,
        thresholds_and_counts.MIN_DISAGREEMENTS,
    ) == (0.40, 10, 4)
    columns = {
        "c1": ([1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0]),  # 4 differ, κ ≈ 0.27
        "c2": ([1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),  # 3 differ, κ < 0
        "c3": ([0] * 11, [0] * 11),
        "c4": ([1, 0] * 5 + [1], [1, 0] * 5 + [1]),
    }
    labels = []
    for i in range(11):
        labels += both_groups(i + 1, [columns[c][0][i] for c in columns], [columns[c][1][i] for c in columns])
    frames = make_frames([{"case_pk": 1, "n": 4}], [(i + 1, 1, f"m{i:02d}", 10) for i in range(11)], labels)
    table = criteria.criterion_reliability(prepared(frames)).set_index("criterion_id")
    assert table["flag"].to_dict() == {"c1": "unreliable", "c2": None, "c3": "never_met", "c4": None}
    g1, g2 = columns["c1"]
    assert table.loc["c1", "kappa"] == pytest.approx(cohen_kappa_score(g1, g2)) and table.loc["c1", "kappa"] < 0.4
    assert table.loc["c2", "kappa"] < 0 and table.loc["c2", "n_disagree"] == 3 and table.loc["c2", "n_gold"] == 8


# Against sklearn, from the label rows --------------------------------------------------------------


@pytest.fixture(scope="module")
def synthetic():
    frames = metrics_reference.synthetic_frames(
        n_cases=24, n_models=6, n=8, seed=7, check_share=0.15, missing_share=0.01, annotators_per_group=4
    )
    rng = np.random.default_rng(3)
    tags = ["hallucination", "safety", "omission"]
    frames.criteria["tags"] = [
        list(rng.choice(tags, size=rng.integers(0, 3), replace=False)) for _ in range(len(frames.criteria))
    ]
    return frames, prepared(frames)


def _finals_table(frames):
    finals = group_final_labels(frames.labels)
    wide = finals.pivot_table(
        index=["response_id", "criterion_id"], columns="group_no", values="met", aggfunc="first"
    ).reindex(columns=[1, 2])
    gold = gold_labels(frames.labels).set_index(["response_id", "criterion_id"])["met"]
    table = pd.DataFrame({"g1": wide[1], "g2": wide[2]}).join(gold.rename("gold"), how="outer")
    return table.reset_index()


def _decisions(frames):
    """One row per (response, current criterion) with case and model columns, group finals, gold, each judge."""
    table = frames.responses.merge(frames.criteria[["case_pk", "criterion_id", "tags"]], on="case_pk")
    table = table.merge(_finals_table(frames), on=["response_id", "criterion_id"], how="left")
    for judge, part in frames.judge.groupby("judge"):
        table = table.merge(
            part[["response_id", "criterion_id", "met"]].rename(columns={"met": f"judge:{judge}"}),
            on=["response_id", "criterion_id"],
            how="left",
        )
    return table.merge(
        frames.cases[["case_pk", "difficulty", "register", "macro_category", "subject_labels", "task_labels"]],
        on="case_pk",
    )


def _aligned(table, frames):
    n = frames.cases.set_index("case_pk")["n_criteria"]
    complete = table.groupby("response_id").apply(
        lambda part: part["g1"].notna().sum() == n[part["case_pk"].iloc[0]] == part["g2"].notna().sum()
    )
    return table[table["response_id"].isin(complete[complete].index)]


def _mf1(truth, predicted):
    truth, predicted = list(map(bool, truth)), list(map(bool, predicted))
    return float(f1_score(truth, predicted, average="macro")) if truth else float("nan")


def test_criterion_reliability_matches_sklearn(synthetic):
    frames, grid = synthetic
    table = criteria.criterion_reliability(grid, min_aligned=5, min_disagreements=2)
    table = table.set_index(["case_id", "criterion_id"])
    decisions = _aligned(_decisions(frames), frames)
    checked = 0
    for (case_id, criterion_id), part in decisions.groupby(["case_id", "criterion_id"]):
        row = table.loc[(case_id, criterion_id)]
        g1, g2 = part["g1"].astype(bool).to_numpy(), part["g2"].astype(bool).to_numpy()
        assert row["n_aligned"] == len(part)
        assert close(row["agreement"], float(np.mean(g1 == g2)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert close(row["kappa"], float(cohen_kappa_score(g1, g2)))
        assert close(row["prevalence_g1"], float(g1.mean())) and close(row["prevalence_g2"], float(g2.mean()))
        with_gold = part[part["gold"].notna()]
        assert row["n_gold"] == len(with_gold)
        assert close(row["gold_met_rate"], float(with_gold["gold"].astype(bool).mean()) if len(with_gold) else None)
        for judge in ("judge-a", "judge-b"):
            judged = with_gold[with_gold[f"judge:{judge}"].notna()]
            assert close(row[f"judge_mf1:{judge}"], _mf1(judged["gold"], judged[f"judge:{judge}"]))
        checked += 1
    assert checked == len(table) and checked > 100
    assert table["flag"].notna().any()


def test_judges_by_model_match_sklearn(synthetic):
    frames, grid = synthetic
    table = slices_and_judges.judges_by_model(grid).set_index(["judge", "model"])
    decisions = _decisions(frames)
    for (judge, model), row in table.iterrows():
        part = decisions[decisions["model"] == model]
        for column, reference in (("mf1_group1", "g1"), ("mf1_group2", "g2"), ("mf1_gold", "gold")):
            both = part[part[reference].notna() & part[f"judge:{judge}"].notna()]
            assert close(row[column], _mf1(both[reference], both[f"judge:{judge}"]))
        mine = frames.judge[
            (frames.judge["judge"] == judge)
            & frames.judge["response_id"].isin(frames.responses.loc[frames.responses["model"] == model, "response_id"])
        ]
        assert row["n_decisions"] == len(mine)
    assert len(table) == 2 * 6


def _members(decisions, dimension):
    column = {"subject": "subject_labels", "task_theme": "task_labels", "criterion_tag": "tags"}.get(
        dimension, dimension
    )
    if dimension in ("subject", "task_theme", "criterion_tag"):
        exploded = decisions.assign(value=decisions[column].map(lambda v: list(v) if len(v) else ["(none)"]))
        exploded = exploded.explode("value")
        if dimension == "task_theme":
            from db.rules.taxonomy import get_taxonomy

            exploded["value"] = exploded["value"].map(get_taxonomy().theme_or_raw)
            exploded = exploded.drop_duplicates(["response_id", "criterion_id", "value"])
        return exploded
    return decisions.assign(value=decisions[column])


@pytest.mark.parametrize("dimension", thresholds_and_counts.SLICE_DIMENSIONS)
def test_judge_fidelity_by_slice_matches_sklearn(synthetic, dimension):
    frames, grid = synthetic
    table = slices_and_judges.judge_slices(grid)
    table = table[table["dimension"] == dimension].set_index(["judge", "value"])
    members = _members(_decisions(frames), dimension)
    assert set(table.index.get_level_values("value")) == set(members["value"])
    for (judge, value), row in table.iterrows():
        part = members[members["value"] == value]
        for column, reference in (("mf1_group1", "g1"), ("mf1_group2", "g2"), ("mf1_gold", "gold")):
            both = part[part[reference].notna() & part[f"judge:{judge}"].notna()]
            assert close(row[column], _mf1(both[reference], both[f"judge:{judge}"]))
        assert row["n_decisions"] == part[f"judge:{judge}"].notna().sum()


def _annotations(frames):
    finals = group_final_labels(frames.labels)
    own = frames.labels[frames.labels["stage"] == Stage.annotation]
    other = finals.assign(group_no=3 - finals["group_no"])[["response_id", "criterion_id", "group_no", "met"]]
    current = frames.responses.merge(frames.criteria[["case_pk", "criterion_id"]], on="case_pk")[
        ["response_id", "criterion_id"]
    ]
    own = own.merge(current, on=["response_id", "criterion_id"])
    return own.merge(other, on=["response_id", "criterion_id", "group_no"], suffixes=("", "_other"))


def test_human_ceiling_matches_sklearn(synthetic):
    frames, grid = synthetic
    ceiling = physicians.human_ceiling(grid, grid.physicians)
    pairs = _annotations(frames)
    assert close(ceiling["pooled_mf1"], _mf1(pairs["met_other"], pairs["met"]))
    assert ceiling["n_decisions"] == len(pairs)
    for group in (1, 2):
        part = pairs[pairs["group_no"] == group]
        assert close(ceiling["by_group"][group]["pooled_mf1"], _mf1(part["met_other"], part["met"]))


def test_per_annotator_agreement_and_corrections_match_sklearn(synthetic):
    frames, grid = synthetic
    table = physicians.annotator_agreement(grid, grid.physicians, resamples=40, seed=11).set_index("username")
    pairs = _annotations(frames)
    names = dict(zip(frames.users["user_id"], frames.users["username"]))
    labels = frames.labels
    checks = labels[labels["stage"] == Stage.check][["response_id", "criterion_id", "group_no", "met"]]
    annotations = labels[labels["stage"] == Stage.annotation].merge(
        checks, on=["response_id", "criterion_id", "group_no"], how="left", suffixes=("", "_check")
    )
    case_of_response = dict(zip(frames.responses["response_id"], frames.responses["case_pk"]))
    all_cases = np.sort(frames.responses["case_pk"].unique())
    draws = np.random.default_rng(11).integers(0, len(all_cases), size=(40, len(all_cases)))
    assert len(table) == 8
    for user_id, part in pairs.groupby("user_id"):
        row = table.loc[names[user_id]]
        assert close(row["pooled_mf1"], _mf1(part["met_other"], part["met"]))
        assert row["n_decisions"] == len(part)
        mine = annotations[annotations["user_id"] == user_id]
        checked = mine[mine["met_check"].notna()]
        assert row["n_checked"] == len(checked) > 0
        assert row["n_corrected"] == (checked["met"] != checked["met_check"].astype(bool)).sum()
        assert close(row["correction_rate"], row["n_corrected"] / row["n_checked"])
        # the interval: pooled MF1 over each resample's drawn cases (with repeats), 2.5th and 97.5th percentiles
        by_case = dict(tuple(part.assign(case=part["response_id"].map(case_of_response)).groupby("case")))
        values = []
        for draw in draws:
            chosen = [by_case[all_cases[i]] for i in draw if all_cases[i] in by_case]
            if chosen:
                sample = pd.concat(chosen)
                values.append(_mf1(sample["met_other"], sample["met"]))
        low, high = np.percentile(values, [2.5, 97.5])
        assert row["pooled_mf1_low"] == pytest.approx(low, abs=1e-12)
        assert row["pooled_mf1_high"] == pytest.approx(high, abs=1e-12)


@pytest.mark.parametrize("dimension", thresholds_and_counts.SLICE_DIMENSIONS)
def test_agreement_by_slice_matches_sklearn(synthetic, dimension):
    frames, grid = synthetic
    table = physicians.agreement_slices(grid, resamples=30, seed=5)
    table = table[table["dimension"] == dimension].set_index("value")
    members = _members(_aligned(_decisions(frames), frames), dimension)
    all_cases = np.sort(frames.responses["case_pk"].unique())
    draws = np.random.default_rng(5).integers(0, len(all_cases), size=(30, len(all_cases)))
    assert set(table.index) == set(members["value"])
    for value, row in table.iterrows():
        part = members[members["value"] == value]
        assert close(row["pooled_mf1"], _mf1(part["g1"], part["g2"]))
        assert row["n_decisions"] == len(part) and row["n_aligned"] == part["response_id"].nunique()
        by_case = dict(tuple(part.groupby("case_pk")))
        values = []
        for draw in draws:
            chosen = [by_case[all_cases[i]] for i in draw if all_cases[i] in by_case]
            if chosen:
                sample = pd.concat(chosen)
                values.append(_mf1(sample["g1"], sample["g2"]))
        assert row["pooled_mf1_low"] == pytest.approx(np.percentile(values, 2.5), abs=1e-12)
        assert row["pooled_mf1_high"] == pytest.approx(np.percentile(values, 97.5), abs=1e-12)


def test_judge_errors_list_every_disagreement_with_gold(synthetic):
    frames, grid = synthetic
    errors = judge_errors.judge_errors(grid, "judge-a")
    decisions = _decisions(frames)
    wrong = decisions[
        decisions["gold"].notna()
        & decisions["judge:judge-a"].notna()
        & (decisions["gold"].astype(float) != decisions["judge:judge-a"].astype(float))
    ]
    assert set(zip(errors["response_id"], errors["criterion_id"])) == set(
        zip(wrong["response_id"], wrong["criterion_id"])
    )
    assert len(errors) == len(wrong) > 0
    positive = errors[errors["kind"] == thresholds_and_counts.FALSE_POSITIVE]
    assert (positive["judge"] == 1).all() and (positive["gold"] == 0).all()
    assert judge_errors.judge_errors(grid, "nobody").empty


def test_subset_keeps_the_physician_layers(synthetic):
    frames, grid = synthetic
    rows = (grid.responses["model"] == "model-a").to_numpy()
    subset = grid.subset(rows)
    assert subset.physicians.annotation.shape[1] == rows.sum()
    ceiling = physicians.human_ceiling(subset, subset.physicians)
    pairs = _annotations(frames)
    pairs = pairs[
        pairs["response_id"].isin(frames.responses.loc[frames.responses["model"] == "model-a", "response_id"])
    ]
    assert close(ceiling["pooled_mf1"], _mf1(pairs["met_other"], pairs["met"]))


def test_figures_draw_the_insight_numbers(synthetic):
    from analysis import figures
    from analysis.report import build_report

    frames, _ = synthetic
    report = build_report(frames, 4, resamples=30)
    built = dict(figures.figures(report, figures.translator("zh")))
    names = {f"judge_slice_{d}" for d in thresholds_and_counts.SLICE_DIMENSIONS}
    names |= {f"agreement_slice_{d}" for d in thresholds_and_counts.SLICE_DIMENSIONS}
    assert names | {
        "criterion_kappa",
        "judges_vs_ceiling",
        "judges_by_model",
        "annotator_agreement",
        "check_corrections",
    } <= set(built)
    insights = report.insights
    heatmap = built["judges_by_model"].data[0]
    first = insights.judges_by_model.set_index(["judge", "model"]).loc[(heatmap.y[0], heatmap.x[0]), "mf1_gold"]
    assert heatmap.z[0][0] == pytest.approx(first)
    bars = built["annotator_agreement"].data[0]
    group1 = insights.annotators[insights.annotators["group"] == 1]
    assert list(bars.x) == group1["username"].tolist()
    assert list(bars.y) == pytest.approx(group1["pooled_mf1"].tolist())
    ceiling = built["judges_vs_ceiling"]
    assert list(ceiling.data[0].y) == pytest.approx(report.judges["mf1_group1"].tolist())
    assert "人类上限" in ceiling.layout.title.text
    difficulty = insights.agreement_slices[insights.agreement_slices["dimension"] == "difficulty"]
    assert list(built["agreement_slice_difficulty"].data[0].y) == pytest.approx(difficulty["pooled_mf1"].tolist())
