"""Thresholds, flag names, slice dimensions and the confusion-count helpers every part of the analysis depth shares."""

from __future__ import annotations

import numpy as np

from analysis import metrics
from analysis.grid import MET, DecisionGrid

KAPPA_THRESHOLD = 0.40
MIN_ALIGNED = 10
MIN_DISAGREEMENTS = 4
UNRELIABLE, NEVER_MET, ALWAYS_MET = "unreliable", "never_met", "always_met"
FLAGS = (UNRELIABLE, NEVER_MET, ALWAYS_MET)
CASE_DIMENSIONS = ("difficulty", "register", "macro_category", "subject", "task_theme")
SLICE_DIMENSIONS = (*CASE_DIMENSIONS, "criterion_tag")
NO_TAG = "(none)"
REFERENCES = (("mf1_group1", "group1"), ("mf1_group2", "group2"), ("mf1_gold", "gold"))
FALSE_POSITIVE, FALSE_NEGATIVE = "false_positive", "false_negative"


# Counting helpers --------------------------------------------------------------------------------


def confusion_counts_by(
    key: np.ndarray, truth: np.ndarray, predicted: np.ndarray, mask: np.ndarray, size: int
) -> np.ndarray:
    """(size, 4) confusion counts (both met, truth only, predicted only, neither) of the masked cells by `key`."""
    # (met, met) → 0, (met, not) → 1, (not, met) → 2, (not, not) → 3
    code = (truth[mask] != MET).astype(np.int64) * 2 + (predicted[mask] != MET)
    return np.bincount(key[mask] * 4 + code, minlength=size * 4).reshape(size, 4).astype(np.int64)


def cell_keys(grid: DecisionGrid) -> np.ndarray:
    """(R, W) index of each cell's (case row, criterion position): case_row × W + slot."""
    width = grid.width
    return grid.case_rows.astype(np.int64)[:, None] * width + np.arange(width)[None, :]


def aligned_rows(grid: DecisionGrid) -> np.ndarray:
    """Responses both groups labelled completely (the aligned pairs of docs/REFERENCE.md §4)."""
    return metrics.complete_mask(grid, grid.group1) & metrics.complete_mask(grid, grid.group2)


def reference_labels(grid: DecisionGrid, name: str) -> np.ndarray:
    """The labels a reference name stands for: group1, group2 or gold."""
    return {"group1": grid.group1, "group2": grid.group2, "gold": grid.gold}[name]
