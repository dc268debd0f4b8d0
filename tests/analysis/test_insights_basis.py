"""The insights pages' figures and the New model page's judge fidelity on a stated gold basis (docs/REFERENCE.md
§4.1), on both databases, against a literal pandas / scikit-learn reading of the raw label table.

The world (tests/analysis/test_gold_basis.py) mixes final, provisional and open responses and checked and
unchecked groups; the reference shares no code with `db.rules.gold`, the grid or `analysis.reliability`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score
from sqlalchemy import text

from analysis import metrics, model_pipeline
from analysis.grid import DecisionGrid, prepare
from analysis.loader import load_frames
from analysis.reliability.insights import BasisViews, build_insights
from db.rules.gold import FINAL, PROVISIONAL
from tests.analysis.test_gold_basis import _reference, _world


@pytest.fixture
def world(engine):
    _world(engine, seed=5, n_cases=40)  # enough responses with both groups checked for aligned pairs under final
    return engine


def _state(grid: DecisionGrid):
    return grid, build_insights(grid, resamples=0), metrics.judge_fidelity(grid)


def _keys(engine) -> pd.DataFrame:
    with engine.connect() as connection:
        return pd.read_sql(
            text('SELECT r.id AS response_id, c.case_id FROM response r JOIN "case" c ON c.id = r.case_pk'), connection
        ).set_index("response_id")


def _judge(engine) -> pd.Series:
    with engine.connect() as connection:
        judge = pd.read_sql(text("SELECT response_id, criterion_id, met FROM judge_decision"), connection)
    return judge.set_index(["response_id", "criterion_id"])["met"].astype(float).rename("judge")


def _macro_f1(truth: pd.Series, predicted: pd.Series) -> float:
    return float(f1_score(truth, predicted, average="macro")) if len(truth) else float("nan")


def _same(value: float, wanted: float) -> bool:
    return (np.isnan(value) and np.isnan(wanted)) or value == pytest.approx(wanted, abs=1e-12)


def test_basis_counts_say_what_each_basis_stands_on(world):
    _, expected = _reference(world)
    views = BasisViews(prepare(load_frames(world)), _state)
    complete, final = expected["complete"], expected["final"]
    assert views.counts == {
        "complete": int(complete.sum()),
        "final": int(final.sum()),
        "provisional": int((complete & ~final).sum()),
        "checked1": int(expected["checked1"].sum()),
        "checked2": int(expected["checked2"].sum()),
    }
    assert views.counts["final"] >= 3 and views.counts["provisional"] >= 3


@pytest.mark.parametrize("basis", [FINAL, PROVISIONAL])
def test_insights_figures_on_each_basis_match_pandas_and_sklearn(world, basis):
    decisions, expected = _reference(world)
    expected = expected.join(_keys(world))
    judge = _judge(world)
    views = BasisViews(prepare(load_frames(world)), _state, eager=(FINAL,))
    grid, insights, fidelity = views.view(basis)
    assert grid.basis == basis and views.view(basis)[1] is insights  # kept, not computed again

    on_basis = expected["final"] if basis == FINAL else expected["complete"] | True
    gold_rows = decisions["gold"].notna() & on_basis.reindex(decisions.index, level="response_id").to_numpy()
    with_gold = decisions.loc[gold_rows].join(judge, how="inner")
    # Judge against gold, overall (the judge errors page) and per model.
    assert _same(fidelity.loc["j1", "mf1_gold"], _macro_f1(with_gold["gold"], with_gold["judge"]))
    assert fidelity.loc["j1", "n_gold"] == len(with_gold)
    models = expected["model"].reindex(with_gold.index, level="response_id").to_numpy()
    by_model = insights.judges_by_model.set_index(["judge", "model"])
    for model in sorted(set(expected["model"])):
        mine = with_gold.loc[models == model]
        assert _same(by_model.loc[("j1", model), "mf1_gold"], _macro_f1(mine["gold"], mine["judge"]))

    # Criterion reliability: aligned pairs (both groups' finals on all N; under final both groups checked).
    aligned = (decisions["g1"].notna() & decisions["g2"].notna()).groupby(level="response_id").all()
    if basis == FINAL:
        aligned &= expected["checked1"] & expected["checked2"]
    pairs = decisions.loc[aligned.reindex(decisions.index, level="response_id").to_numpy()]
    pairs = pairs.join(expected["case_id"], on="response_id")
    criteria = insights.criteria.set_index(["case_id", "criterion_id"])
    wanted = pairs.groupby(["case_id", pairs.index.get_level_values("criterion_id")])
    assert len(criteria) == wanted.ngroups > 0
    for (case_id, criterion), chosen in wanted:
        row = criteria.loc[(case_id, criterion)]
        assert row["n_aligned"] == len(chosen)
        assert row["agreement"] == pytest.approx((chosen["g1"] == chosen["g2"]).mean(), abs=1e-12)
        if chosen["g1"].nunique() + chosen["g2"].nunique() > 2:
            assert _same(row["kappa"], cohen_kappa_score(chosen["g1"], chosen["g2"]))

    # Human ceiling: each group's own annotation labels against the other group's finals (under final only
    # where the other group is checked).
    with world.connect() as connection:
        labels = pd.read_sql(text("SELECT response_id, criterion_id, stage, group_no, met FROM label"), connection)
    own = labels[labels["stage"] == "annotation"].set_index(["response_id", "criterion_id"])
    truth, predicted = [], []
    for g, other in ((1, 2), (2, 1)):
        mine = own.loc[own["group_no"] == g, "met"].astype(float)
        finals = decisions[f"g{other}"].dropna()
        if basis == FINAL:
            checked = expected[f"checked{other}"].reindex(finals.index, level="response_id").to_numpy()
            finals = finals.loc[checked]
        both = pd.concat([mine.rename("own"), finals.rename("other")], axis=1, join="inner")
        truth.append(both["other"])
        predicted.append(both["own"])
    ceiling = insights.human_ceiling
    assert ceiling["n_decisions"] == sum(len(values) for values in truth)
    assert _same(ceiling["pooled_mf1"], _macro_f1(pd.concat(truth), pd.concat(predicted)))


def test_new_model_judge_fidelity_reads_final_gold_by_default(world):
    decisions, expected = _reference(world)
    judge = _judge(world)
    figures = model_pipeline.PipelineFigures(prepare(load_frames(world)))
    for basis, counted in ((FINAL, expected["final"]), (PROVISIONAL, expected["complete"] | True)):
        rows = decisions["gold"].notna() & counted.reindex(decisions.index, level="response_id").to_numpy()
        both = decisions.loc[rows].join(judge, how="inner")
        found = figures.fidelity([], basis)
        assert found.loc["j1", "n_gold"] == len(both)
        assert _same(found.loc["j1", "mf1_gold"], _macro_f1(both["gold"], both["judge"]))
    assert figures.fidelity([]).equals(figures.fidelity([], FINAL))  # the default basis is final
    assert figures.fidelity([], FINAL)["n_gold"].iloc[0] < figures.fidelity([], PROVISIONAL)["n_gold"].iloc[0]
