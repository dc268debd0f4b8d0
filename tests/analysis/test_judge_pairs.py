"""Judge-scored figures for every (judge, model) pair that exists (docs/REFERENCE.md §4), against pandas."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import metrics
from analysis.grid import prepare
from tools import metrics_reference as reference

K = 4


def test_every_pair_a_judge_graded_and_no_other_matches_pandas():
    frames = reference.synthetic_frames(18, 4, n=8, seed=9, adjudication_share=0.4)
    responses = frames.responses.set_index("response_id")
    judge = frames.judge.copy()
    model_of = judge["response_id"].map(responses["model"])
    models = sorted(responses["model"].unique())
    # judge-b never graded the last model, and graded one criterion only of the first model's first response
    judge = judge[~((judge["judge"] == "judge-b") & (model_of == models[-1]))]
    first = responses.index[responses["model"] == models[0]][0]
    keep_one = (judge["judge"] == "judge-b") & (judge["response_id"] == first)
    judge = judge[~keep_one | (judge["criterion_id"] == "c01")]
    frames.judge = judge.reset_index(drop=True)
    table = metrics.judge_pair_scores(prepare(frames), K).set_index(["judge", "model"])

    model_of = frames.judge["response_id"].map(responses["model"])
    expected_pairs = set(zip(frames.judge["judge"], model_of))
    assert set(table.index) == expected_pairs
    assert ("judge-b", models[-1]) not in table.index
    per_response = frames.judge.groupby(["judge", "response_id"]).agg(decided=("met", "size"), s=("met", "sum"))
    per_response = per_response.reset_index()
    per_response["model"] = per_response["response_id"].map(responses["model"])
    graded = per_response[per_response["decided"] == 8]
    for (judge_name, model), row in table.iterrows():
        mine = graded[(graded["judge"] == judge_name) & (graded["model"] == model)]
        assert row["n_graded"] == len(mine)
        assert row["n_responses"] == int((responses["model"] == model).sum())
        assert row["coverage"] == pytest.approx(len(mine) / row["n_responses"])
        s = mine["s"].to_numpy(float)
        expected = np.where(s >= K, (s - K + 1) / (8 - K + 1), 0.0).mean() if len(s) else np.nan
        assert row["cacs_at_k"] == pytest.approx(expected, nan_ok=True)
        assert row["rubric_accuracy"] == pytest.approx((s / 8).mean() if len(s) else np.nan, nan_ok=True)
