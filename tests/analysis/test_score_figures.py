"""The figures and the sample-size planner of the defensible scores, against a literal reading."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from analysis import calibrated, ppi, score_figures
from analysis.figures import translator
from analysis.report import build_report
from tests.support.demo_frames import build_demo_frames


def _smallest(predicate, limit=1_000_000):
    return next(n for n in range(1, limit) if predicate(n))


def test_responses_needed_is_the_smallest_sample_reaching_the_half_width():
    rng = np.random.default_rng(5)
    y = rng.random(40)
    yhat = np.clip(y + rng.normal(0, 0.1, 40), 0, 1)
    yhat_unlabeled = rng.random(2000)
    z = stats.norm.ppf(0.975)
    lam = ppi.tuned_lambda(y, yhat, yhat_unlabeled)
    fixed = lam**2 * np.var(yhat_unlabeled) / len(yhat_unlabeled)
    rectifier = np.var(y - lam * yhat)
    for half in (0.02, 0.05):
        needed = calibrated.responses_needed(y, yhat, yhat_unlabeled, half)
        assert needed["classical"] == _smallest(lambda n, h=half: z * np.std(y) / math.sqrt(n) <= h)
        assert needed["ppi"] == _smallest(lambda n, h=half: z * math.sqrt(fixed + rectifier / n) <= h)
        assert needed["ppi"] < needed["classical"]
    # a judge-only variance already wider than the target: no labeled sample is enough
    assert calibrated.responses_needed(y, yhat, yhat_unlabeled[:3], 0.001)["ppi"] is None
    assert calibrated.responses_needed(y[:1], yhat[:1], yhat_unlabeled, 0.02) == {"classical": None, "ppi": None}


@pytest.fixture(scope="module")
def sampled_report(sqlite_template, tmp_path_factory):
    frames = build_demo_frames(sqlite_template, tmp_path_factory)
    responses = frames.responses[frames.responses["model"] == "model-beta"]
    frames.calibration = responses[["model", "response_id"]].head(15).reset_index(drop=True)
    return build_report(frames, k=10, resamples=100, insights=False)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_score_figures_show_the_report_values(sampled_report, lang):
    t = translator(lang)
    built = dict(score_figures.score_figures(sampled_report, t))
    section = sampled_report.scores_section
    board = built["leaderboard"]
    assert len(board.data) == len({row["tier"] for row in section.leaderboard})
    shown = {model: x for trace in board.data for model, x in zip(trace.y, trace.x)}
    assert shown == pytest.approx({row["model"]: 100 * row["cacs_at_k"] for row in section.leaderboard})
    matrix = built["pairwise"].data[0]
    models = list(matrix.x)
    z = np.array(matrix.z, dtype=float)
    for entry in section.comparisons["cacs_at_k"]:
        a, b = (models.index(m) for m in entry["models"])
        if entry["diff"] is not None:
            assert z[a, b] == pytest.approx(100 * entry["diff"]) and z[b, a] == pytest.approx(-100 * entry["diff"])
    bars = built["calibrated"].data
    judges = section.calibrated
    expected = [
        100 * entry["cacs_at_k"]["estimate"] if entry["cacs_at_k"]["estimate"] is not None else None
        for models in judges.values()
        for entry in models.values()
    ]
    assert [None if np.isnan(v) else v for v in bars[0].y] == pytest.approx(expected)
    assert built["calibrated"].layout.title.text == t("analysis.fig.calibrated", k=10)
    plan = score_figures.sample_size_table(sampled_report)
    assert list(plan["model"].unique()) == ["model-beta"] and len(plan) == len(judges)
