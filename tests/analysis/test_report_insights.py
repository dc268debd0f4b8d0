"""report.json's criteria, judges_by_model, judge slices, human ceiling and per-annotator agreement, end to
end from a small database (SQLite and PostgreSQL), each value recomputed with sklearn from the labels."""

from __future__ import annotations

import json
import math
import warnings

import pytest
from sklearn.metrics import cohen_kappa_score, f1_score

from cli.main import main
from tests.analysis.test_report import small_database  # noqa: F401  (fixture)
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")

# The small database's final labels per response (criteria c01..c03), as populate_small_database writes them.
GROUP1 = {"1a": [1, 1, 1], "1b": [1, 0, 0], "2a": [1, 1, 1], "2b": [0, 0, 0]}  # 2a c03: the check says met
GROUP1_OWN = {"1a": [1, 1, 1], "1b": [1, 0, 0], "2a": [1, 1, 0], "2b": [0, 0, 0]}  # annotations before the check
GROUP2 = {"1a": [1, 1, 1], "1b": [1, 1, 0], "2a": [1, 1, 0], "2b": [0, 0, 0]}
GOLD = {"1a": [1, 1, 1], "1b": [1, 0, 0], "2a": [1, 1, None], "2b": [0, 0, 0]}  # 1b c02 adjudicated; 2a c03 open
JUDGE = {"1a": [1, 1, 1], "1b": [1, 0, 0]}
MODEL = {"1a": "model-a", "1b": "model-b", "2a": "model-a", "2b": "model-b"}


def mf1(truth, predicted):
    return f1_score(truth, predicted, average="macro")


@pytest.fixture
def report(small_database, tmp_path):  # noqa: F811
    path = tmp_path / "report.json"
    assert main(["report", "--k", "1", "--json", str(path)]) == 0
    return json.loads(path.read_text(encoding="utf-8"))


def test_criteria_block(report):
    criteria = report["criteria"]
    assert sorted(criteria) == ["CC-0001", "CC-0002"]
    for case, keys in (("CC-0001", ["1a", "1b"]), ("CC-0002", ["2a", "2b"])):
        for index, criterion in enumerate(["c01", "c02", "c03"]):
            entry = criteria[case][criterion]
            g1 = [GROUP1[k][index] for k in keys]
            g2 = [GROUP2[k][index] for k in keys]
            gold = [GOLD[k][index] for k in keys if GOLD[k][index] is not None]
            assert entry["n_aligned"] == 2
            assert entry["agreement"] == pytest.approx(sum(a == b for a, b in zip(g1, g2)) / 2)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                kappa = cohen_kappa_score(g1, g2)
            assert entry["kappa"] is None if math.isnan(kappa) else entry["kappa"] == pytest.approx(kappa)
            assert entry["prevalence_g1"] == pytest.approx(sum(g1) / 2)
            assert entry["prevalence_g2"] == pytest.approx(sum(g2) / 2)
            assert entry["gold_met_rate"] == pytest.approx(sum(gold) / len(gold))
            judged = [(GOLD[k][index], JUDGE[k][index]) for k in keys if k in JUDGE]
            expected = mf1(*zip(*judged)) if judged else None
            assert entry["judge_mf1"] == {"jx": expected if expected is None else pytest.approx(expected)}
            assert entry["flag"] is None  # two aligned pairs are far too few to flag anything
    assert report["criteria_flags"]["counts"] == {"unreliable": 0, "never_met": 0, "always_met": 0}


def test_judges_by_model_and_slices(report):
    by_model = report["judges_by_model"]["jx"]
    for model in ("model-a", "model-b"):
        keys = [k for k in JUDGE if MODEL[k] == model]
        judge = [v for k in keys for v in JUDGE[k]]
        assert by_model[model]["n_decisions"] == len(judge)
        for column, reference in (("mf1_group1", GROUP1), ("mf1_group2", GROUP2), ("mf1_gold", GOLD)):
            truth = [v for k in keys for v in reference[k]]
            assert by_model[model][column] == pytest.approx(mf1(truth, judge))
    difficulty = report["judge_slices"]["jx"]["difficulty"]
    assert set(difficulty) == {"medium"}  # the judge decided only case 1 (medium)
    assert difficulty["medium"]["mf1_group2"] == pytest.approx(
        mf1(GROUP2["1a"] + GROUP2["1b"], JUDGE["1a"] + JUDGE["1b"])
    )
    assert report["judge_slices"]["jx"]["criterion_tag"]["(none)"]["n_decisions"] == 6


def test_human_ceiling_and_annotators(report):
    keys = list(GROUP1)
    own1 = [v for k in keys for v in GROUP1_OWN[k]]
    own2 = [v for k in keys for v in GROUP2[k]]
    other1 = [v for k in keys for v in GROUP2[k]]
    other2 = [v for k in keys for v in GROUP1[k]]
    ceiling = report["human_ceiling"]
    assert ceiling["pooled_mf1"] == pytest.approx(mf1(other1 + other2, own1 + own2))
    assert ceiling["n_decisions"] == 24
    assert ceiling["by_group"]["1"]["pooled_mf1"] == pytest.approx(mf1(other1, own1))
    annotators = report["annotators"]
    assert annotators["ann-1"]["pooled_mf1"] == pytest.approx(mf1(other1, own1))
    assert annotators["ann-2"]["pooled_mf1"] == pytest.approx(mf1(other2, own2))
    assert (annotators["ann-1"]["n_checked"], annotators["ann-1"]["n_corrected"]) == (1, 1)
    assert annotators["ann-1"]["correction_rate"] == 1.0 and annotators["ann-2"]["correction_rate"] is None
    low, high = annotators["ann-1"]["interval"]
    assert low <= annotators["ann-1"]["pooled_mf1"] + 1e-9 and high >= low
    slices = report["agreement_slices"]["difficulty"]
    assert slices["high"]["pooled_mf1"] == pytest.approx(mf1(GROUP1["2a"] + GROUP1["2b"], GROUP2["2a"] + GROUP2["2b"]))
    assert slices["high"]["n_aligned"] == 2 and slices["high"]["n_decisions"] == 6
