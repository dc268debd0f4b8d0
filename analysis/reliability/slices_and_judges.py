"""Slice membership (case dimensions, criterion tags) and judge fidelity by model and by slice."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse

from analysis import metrics
from analysis.grid import DecisionGrid
from analysis.reliability.thresholds_and_counts import (
    CASE_DIMENSIONS,
    NO_TAG,
    REFERENCES,
    cell_keys,
    confusion_counts_by,
    reference_labels,
)

# Judges by model and by slice ----------------------------------------------------------------------


def judges_by_model(grid: DecisionGrid) -> pd.DataFrame:
    """Rows (judge, model): mf1_group1, mf1_group2, mf1_gold against the model's decisions, n_decisions."""
    size = len(grid.models)
    rows = []
    for name in sorted(grid.judges):
        judge = grid.judges[name]
        entry = {}
        for column, reference_name in REFERENCES:
            reference = reference_labels(grid, reference_name)
            both = (judge >= 0) & (reference >= 0)
            per_row = metrics.confusion_counts(reference, judge, both)
            per_model = (
                np.stack(
                    [np.bincount(grid.model_codes, weights=per_row[:, i], minlength=size) for i in range(4)], axis=-1
                )
                if size
                else np.zeros((0, 4))
            )
            entry[column] = metrics.macro_f1(per_model)
        decisions = grid.judge_rows[name][0] if name in grid.judge_rows else (judge >= 0).sum(axis=1)
        entry["n_decisions"] = np.bincount(grid.model_codes, weights=decisions, minlength=size).astype(np.int64)
        for code, model in enumerate(grid.models):
            rows.append({"judge": name, "model": model, **{key: values[code] for key, values in entry.items()}})
    return pd.DataFrame(rows, columns=["judge", "model", "mf1_group1", "mf1_group2", "mf1_gold", "n_decisions"])


def case_dimension_members(cases: pd.DataFrame, dimension: str) -> pd.DataFrame:
    """(case_row, value) of a case-level slice; `subject` is every subject label of a case (multi-label)."""
    if dimension == "subject":
        rows, values = [], []
        for row, labels in enumerate(cases["subject_labels"]):
            chosen = sorted({str(label) for label in (labels if labels is not None else [])})
            rows += [row] * len(chosen)
            values += chosen
        return pd.DataFrame({"case_row": np.asarray(rows, dtype=np.int64), "value": np.asarray(values, dtype=object)})
    return metrics.case_slice_values(cases, dimension)


def criterion_tag_members(grid: DecisionGrid) -> pd.DataFrame:
    """(cell key, value) of each current criterion's tags; criteria without a tag under NO_TAG."""
    criteria = grid.criteria
    keys = criteria["case_row"].to_numpy(np.int64) * grid.width + criteria["slot"].to_numpy(np.int64)
    tags = criteria["tags"].tolist() if "tags" in criteria else [None] * len(criteria)
    rows, values = [], []
    for key, labels in zip(keys.tolist(), tags):
        chosen = sorted({str(label) for label in labels}) if labels is not None and len(labels) else [NO_TAG]
        rows += [key] * len(chosen)
        values += chosen
    return pd.DataFrame({"key": np.asarray(rows, dtype=np.int64), "value": np.asarray(values, dtype=object)})


def slice_membership(member: pd.DataFrame, unit: str, n_units: int) -> tuple[list, sparse.csr_matrix]:
    """The slice values (sorted) and a (values × units) 0/1 matrix of which units belong to each."""
    codes, values = pd.factorize(member["value"], sort=True)
    units = member[unit].to_numpy(np.int64)
    matrix = sparse.csr_matrix((np.ones(len(codes)), (codes, units)), shape=(len(values), n_units))
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return list(values), matrix


def counts_per_criterion_and_case(grid, truth, predicted, mask) -> tuple[np.ndarray, np.ndarray]:
    """Confusion counts per (case row × W + slot) and per case row."""
    size = len(grid.cases) * grid.width
    by_key = confusion_counts_by(cell_keys(grid), truth, predicted, mask, size)
    return by_key, by_key.reshape(len(grid.cases), grid.width, 4).sum(axis=1)


def slice_members(grid: DecisionGrid) -> dict[str, tuple[pd.DataFrame, str]]:
    """Per slice dimension: which units belong to which value, and the unit (case row, or criterion key for tags)."""
    members = {dimension: (case_dimension_members(grid.cases, dimension), "case_row") for dimension in CASE_DIMENSIONS}
    members["criterion_tag"] = (criterion_tag_members(grid), "key")
    return members


def _judge_counts_by_key(grid: DecisionGrid, judge: np.ndarray) -> np.ndarray:
    """(cases × W, 13): confusion counts of the judge against group 1, group 2 and gold (4 each), and the
    judge's decisions, per (case row, criterion position)."""
    size = len(grid.cases) * grid.width
    valid = grid.valid
    keys = cell_keys(grid)[valid] * 9
    said = judge[valid].astype(np.int64) + 1
    result = np.empty((size, 13), dtype=np.float64)
    for index, reference in enumerate((grid.group1, grid.group2, grid.gold)):
        # Each cell's (reference, judge) state, each −1/0/1, as one number in 0..8.
        table = np.bincount(keys + (reference[valid].astype(np.int64) + 1) * 3 + said, minlength=size * 9)
        table = table.reshape(size, 3, 3)
        result[:, index * 4 : index * 4 + 4] = np.stack(
            [table[:, 2, 2], table[:, 2, 1], table[:, 1, 2], table[:, 1, 1]], axis=-1
        )
        if index == 0:
            result[:, 12] = table[:, :, 1:].sum(axis=(1, 2))
    return result


def judge_slices(grid: DecisionGrid, members: dict | None = None) -> pd.DataFrame:
    """Long frame: judge, dimension, value, mf1_group1, mf1_group2, mf1_gold, n_decisions."""
    columns = ["judge", "dimension", "value", "mf1_group1", "mf1_group2", "mf1_gold", "n_decisions"]
    names = sorted(grid.judges)
    if not names:
        return pd.DataFrame(columns=columns)
    by_key = np.concatenate([_judge_counts_by_key(grid, grid.judges[name]) for name in names], axis=1)
    by_case = by_key.reshape(len(grid.cases), grid.width, -1).sum(axis=1)
    parts = []
    for dimension, (member, unit) in (members or slice_members(grid)).items():
        if member.empty:
            continue
        per_unit = by_key if unit == "key" else by_case
        values, matrix = slice_membership(member, unit, len(per_unit))
        summed = np.asarray(matrix @ per_unit).reshape(len(values), len(names), 13)
        for index, name in enumerate(names):
            counts = summed[:, index]
            parts.append(
                pd.DataFrame(
                    {
                        "judge": name,
                        "dimension": dimension,
                        "value": values,
                        "mf1_group1": metrics.macro_f1(counts[:, 0:4]),
                        "mf1_group2": metrics.macro_f1(counts[:, 4:8]),
                        "mf1_gold": metrics.macro_f1(counts[:, 8:12]),
                        "n_decisions": counts[:, 12].astype(np.int64),
                    }
                )
            )
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)
    frame = frame[frame["n_decisions"] > 0]  # slice values the judge never decided on say nothing of it
    return frame.sort_values(["judge"], kind="stable", ignore_index=True)[columns]
