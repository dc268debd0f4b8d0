"""The report's defensible scores (docs/REFERENCE.md §3.6, §4): paired comparisons, tiers, calibrated
scores, calibration samples, judge ranking fidelity and the held-out models they were measured on.

`build_section` is pure (grid and scores in, JSON-ready values out); `analysis.report` calls it and
writes its keys into report.json beside the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis import calibrated as calibrated_scores, comparisons as paired, ranking_fidelity
from analysis.grid import DecisionGrid
from analysis.metrics import Scores
from db.rules.errors import ValidationFailed

SECTION_KEYS = (
    "comparisons",
    "leaderboard",
    "calibrated",
    "calibration_samples",
    "judge_ranking",
    "human_ceiling_ranking",
    "heldout_models",
)


@dataclass
class ScoreSection:
    comparisons: dict
    leaderboard: list
    calibrated: dict
    calibration_samples: dict
    judge_ranking: dict
    human_ceiling_ranking: dict
    heldout_models: list | None

    def as_json(self) -> dict:
        return {key: getattr(self, key) for key in SECTION_KEYS}


def heldout_grid(grid: DecisionGrid, models: list[str] | None) -> DecisionGrid:
    """The grid of the held-out models' responses only (the whole grid without held-out models)."""
    if not models:
        return grid
    unknown = sorted(set(models) - set(grid.models))
    if unknown:
        known = ", ".join(grid.models) or "none"
        raise ValidationFailed(f"--heldout-models: no responses of model {unknown[0]!r} (models: {known})")
    return grid.subset(np.isin(grid.responses["model"].to_numpy(), list(models)))


def build_section(
    grid: DecisionGrid,
    scores: Scores,
    models: pd.DataFrame,
    intervals: pd.DataFrame | None,
    k: int,
    *,
    samples: pd.DataFrame | None = None,
    heldout_models: list[str] | None = None,
    min_responses: int = 1,
) -> ScoreSection:
    """Every value of the section; judge figures over the held-out models' responses when they are named.

    `min_responses`: the ranking minimum (docs/REFERENCE.md §4.1): Holm's family, the tiers and the judge
    ranking read the models with at least that many complete responses, the human ceiling the models with
    at least that many aligned pairs."""
    samples = samples if samples is not None else calibrated_scores.empty_samples()
    judged = heldout_grid(grid, heldout_models)
    ranked = paired.ranked_models(models, min_responses)
    pairs = paired.comparisons(grid, scores, k, ranked)
    return ScoreSection(
        comparisons=pairs,
        leaderboard=paired.leaderboard(models, intervals, pairs["cacs_at_k"], min_responses),
        calibrated=calibrated_scores.calibrated(judged, samples, k),
        calibration_samples=calibrated_scores.calibration_samples(grid, samples),
        judge_ranking=ranking_fidelity.judge_ranking(judged, k, ranked),
        human_ceiling_ranking=ranking_fidelity.human_ceiling_ranking(grid, k, min_responses),
        heldout_models=list(dict.fromkeys(heldout_models)) if heldout_models else None,
    )
