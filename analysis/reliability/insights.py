"""Everything at once: the analysis-depth tables the report and the pages read."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import pandas as pd

from analysis import metrics
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


# On a gold basis ---------------------------------------------------------------------------------

View = TypeVar("View")


def basis_counts(grid: DecisionGrid) -> dict[str, int]:
    """What figures on either gold basis stand on (docs/REFERENCE.md §4.1), from the grid's per-response states
    (`grid` on the provisional basis): responses complete (gold on every decision), final, provisional (complete,
    not final), and those whose group 1 / group 2 labels are checked."""
    complete = metrics.complete_mask(grid, grid.gold)
    final = grid.final & complete
    return {
        "complete": int(complete.sum()),
        "final": int(final.sum()),
        "provisional": int((complete & ~final).sum()),
        "checked1": int(grid.checked[:, 0].sum()) if len(grid.checked) else 0,
        "checked2": int(grid.checked[:, 1].sum()) if len(grid.checked) else 0,
    }


class BasisViews(Generic[View]):
    """The figures of one grid (on the provisional basis, as loaded) per gold basis: `build(grid.on_basis(basis))`,
    computed on the first request of a basis and kept (the bases in `eager` at once), with `basis_counts` of the
    grid. Under final, gold stays on final responses only and a group's labels only where that group is checked
    (`DecisionGrid.on_basis`)."""

    def __init__(self, grid: DecisionGrid, build: Callable[[DecisionGrid], View], eager: tuple[str, ...] = ()) -> None:
        self.grid = grid
        self.counts = basis_counts(self.grid)
        self._build = build
        self._views: dict[str, View] = {}
        self._lock = threading.Lock()
        for basis in eager:
            self.view(basis)

    def view(self, basis: str) -> View:
        with self._lock:
            if basis not in self._views:
                self._views[basis] = self._build(self.grid.on_basis(basis))
            return self._views[basis]
