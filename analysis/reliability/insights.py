"""Everything at once: the analysis-depth tables the report and the pages read."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED
from analysis.grid import DecisionGrid
from analysis.reliability.criteria import criterion_reliability
from analysis.reliability.physicians import (
    ANNOTATOR_COLUMNS,
    annotator_table,
    human_ceiling,
    pooled_mf1_intervals,
    slice_agreement_table,
)
from analysis.reliability.slices_and_judges import judge_slices, judges_by_model, slice_members

# Everything at once ------------------------------------------------------------------------------


@dataclass
class Insights:
    criteria: pd.DataFrame  # criterion_reliability
    judges_by_model: pd.DataFrame
    judge_slices: pd.DataFrame
    human_ceiling: dict
    annotators: pd.DataFrame
    agreement_slices: pd.DataFrame


def build_insights(grid: DecisionGrid, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> Insights:
    """Every figure of this module; the annotators' and slices' intervals share one resampling."""
    layers = grid.physicians
    annotators, annotator_counts = (
        annotator_table(grid, layers)
        if layers is not None
        else (pd.DataFrame(columns=ANNOTATOR_COLUMNS), np.zeros((len(grid.cases), 0, 4)))
    )
    members = slice_members(grid)
    slices, slice_counts = slice_agreement_table(grid, members)
    bounds = pooled_mf1_intervals(grid, np.concatenate([annotator_counts, slice_counts], axis=1), resamples, seed)
    split = len(annotators)
    annotators = annotators.assign(pooled_mf1_low=bounds[:split, 0], pooled_mf1_high=bounds[:split, 1])
    slices = slices.assign(pooled_mf1_low=bounds[split:, 0], pooled_mf1_high=bounds[split:, 1])
    ceiling = (
        human_ceiling(grid, layers)
        if layers is not None
        else {"pooled_mf1": float("nan"), "n_decisions": 0, "by_group": {}}
    )
    return Insights(
        criteria=criterion_reliability(grid),
        judges_by_model=judges_by_model(grid),
        judge_slices=judge_slices(grid, members),
        human_ceiling=ceiling,
        annotators=annotators,
        agreement_slices=slices,
    )
