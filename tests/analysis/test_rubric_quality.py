"""Rubric quality (docs/REFERENCE.md §4.2) on both demos: item–rest and redundancy against pandas on both gold
bases, every flag shown.

The independent computation reads gold with the definition's own rule (db.rules.gold.gold_labels) from the
label rows, pivots each case's complete responses with pandas and correlates with `Series.corr`; nothing of
analysis.rubric_quality is used to compute the expected values.
"""

from __future__ import annotations

import math

import pytest
from sqlmodel import func, select

from analysis.grid import prepare
from analysis.loader import load_frames
from analysis.rubric_quality import cases_below_k, criteria_quality, flag_counts
from analysis.validity_section import load_validity
from db.rules.gold import FINAL, PROVISIONAL, gold_labels
from db.store.engine import make_engine, session_scope
from db.store.models import AnchorDecision, JudgeDecision, ReferenceAnswer
from demo import generator as demo
from tests.conftest import new_sqlite_url
from tests.support.final_reading import final_responses

#: The full demo's shape (every model, mostly final) on few cases, so a test builds it in seconds.
FULL_SHAPE_CASES = 40


@pytest.fixture(scope="module", params=["small", "full"])
def demo_engine(request, sqlite_template, tmp_path_factory):
    engine = make_engine(new_sqlite_url(sqlite_template, tmp_path_factory.mktemp("quality")))
    if request.param == "small":
        demo.build_demo(engine, scale="small", seed=7)
    else:
        demo.build_demo(engine, scale="full", seed=7, n_cases=FULL_SHAPE_CASES)
    yield engine
    engine.dispose()


def independent_quality(frames, basis: str = PROVISIONAL) -> dict[tuple[str, str], tuple[float | None, set[str]]]:
    gold = gold_labels(frames.labels)
    gold = gold[["response_id", "criterion_id", "met"]]
    if basis == FINAL:  # "complete" means final (§4.1), read literally from the label rows
        gold = gold[gold["response_id"].isin(final_responses(frames.labels))]
    responses = frames.responses[["response_id", "case_pk"]]
    cases = dict(zip(frames.cases["case_pk"], frames.cases["case_id"]))
    expected = {}
    for case_pk, rubric in frames.criteria.groupby("case_pk"):
        ids = rubric.sort_values("position")["criterion_id"].tolist()
        mine = gold[gold["response_id"].isin(responses.loc[responses["case_pk"] == case_pk, "response_id"])]
        table = mine.pivot_table(index="response_id", columns="criterion_id", values="met", aggfunc="first")
        table = table.reindex(columns=ids).dropna()  # complete responses: every criterion has gold
        table = table.astype(int)
        for criterion in ids:
            item_rest, same = None, set()
            if len(table) >= 5:
                rest = table.drop(columns=criterion).sum(axis=1)
                item = table[criterion]
                if item.nunique() > 1 and rest.nunique() > 1:
                    item_rest = float(item.corr(rest))
                if item.nunique() > 1:
                    same = {other for other in ids if other != criterion and table[other].equals(item)}
            expected[(cases[case_pk], criterion)] = (item_rest, same)
    return expected


@pytest.mark.parametrize("basis", [FINAL, PROVISIONAL])
def test_item_rest_and_redundancy_equal_an_independent_pandas_computation(demo_engine, basis):
    frames = load_frames(demo_engine)
    quality = criteria_quality(prepare(frames).on_basis(basis))
    expected = independent_quality(frames, basis)
    assert len(quality) == len(expected) > 0
    valued = 0
    for case_id, criterion_id, item_rest, redundant in quality.itertuples(index=False):
        want_value, want_same = expected[(case_id, criterion_id)]
        got = None if item_rest is None or (isinstance(item_rest, float) and math.isnan(item_rest)) else item_rest
        if want_value is None:
            assert got is None, (case_id, criterion_id)
        else:
            valued += 1
            assert got == pytest.approx(want_value, abs=1e-12), (case_id, criterion_id)
        assert set(redundant) == want_same, (case_id, criterion_id)
    assert valued > 50  # the demo has cases with enough complete responses


def test_the_demo_shows_every_flag(demo_engine):
    frames = load_frames(demo_engine)
    grid = prepare(frames)
    validity = load_validity(demo_engine, grid, 10)
    with session_scope(demo_engine, read_only=True) as session:
        n_references = session.exec(select(func.count()).select_from(ReferenceAnswer)).one()
        n_anchor = session.exec(select(func.count()).select_from(AnchorDecision)).one()
        n_judge_demo = session.exec(
            select(func.count()).select_from(JudgeDecision).where(JudgeDecision.judge == "anchor-judge")
        ).one()
    n_cases = len(frames.cases)
    assert 0.6 * n_cases < n_references < n_cases  # most cases, not all
    assert n_anchor > 0 and n_judge_demo == 0  # anchors stay out of judge decisions
    macro = dict(zip(frames.cases["case_id"], frames.cases["macro_category"]))
    counts = flag_counts(validity, macro).groupby("flag")["n_criteria"].sum()
    assert counts.get("reference_not_met", 0) > 0 and counts.get("weak_met", 0) > 0
    assert cases_below_k(validity, 10)  # a brief reference does not reach k
    clean = [entry for entry in validity.values() if not entry["flags"]]
    assert clean  # and most rubrics pass
