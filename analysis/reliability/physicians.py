"""The human ceiling, each annotator against the other group, correction rates and agreement by slice."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import metrics
from analysis.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, LEVEL, resample_weights
from analysis.grid import DecisionGrid, PhysicianLayers
from analysis.reliability.slices_and_judges import counts_per_criterion_and_case, slice_members, slice_membership
from analysis.reliability.thresholds_and_counts import aligned_rows, confusion_counts_by

# Physicians: ceiling, per annotator, agreement by slice ------------------------------------------------


def _physician_pairs(grid: DecisionGrid, layers: PhysicianLayers):
    """Per group g: (own annotation labels, other group's finals, cells both have)."""
    finals = (grid.group1, grid.group2)
    for g in (0, 1):
        own = layers.annotation[g]
        other = finals[1 - g]
        yield g, own, other, (own >= 0) & (other >= 0) & grid.valid


def human_ceiling(grid: DecisionGrid, layers: PhysicianLayers) -> dict:
    """Pooled macro-F1 of each physician's labels against the other group's finals: overall and per group."""
    total = np.zeros(4, dtype=np.int64)
    result: dict = {"by_group": {}}
    for g, own, other, both in _physician_pairs(grid, layers):
        counts = metrics.confusion_counts(other.ravel()[None, :], own.ravel()[None, :], both.ravel()[None, :])[0]
        total += counts
        result["by_group"][g + 1] = {"pooled_mf1": float(metrics.macro_f1(counts)), "n_decisions": int(counts.sum())}
    result["pooled_mf1"] = float(metrics.macro_f1(total))
    result["n_decisions"] = int(total.sum())
    return result


def pooled_mf1_intervals(grid: DecisionGrid, per_case: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """(units, 2) percentile bounds of pooled macro-F1 under the report's case resampling (NaN if never defined)."""
    units = per_case.shape[1]
    bounds = np.full((units, 2), np.nan)
    if not resamples or not units:
        return bounds
    case_ids, _ = np.unique(grid.case_rows, return_inverse=True)
    if not len(case_ids):
        return bounds
    weights = resample_weights(len(case_ids), resamples, seed).astype(np.float32)
    # Macro-F1 needs both-met, differing and neither: three sums per unit. float32 holds every partial
    # sum exactly (integers below 2**24: at most cases × decisions per case).
    counts = per_case[case_ids]
    three = np.stack([counts[..., 0], counts[..., 1] + counts[..., 2], counts[..., 3]], axis=-1)
    drawn = (weights @ three.reshape(len(case_ids), -1).astype(np.float32)).astype(np.float64)
    drawn = drawn.reshape(resamples, units, 3)
    values = metrics.macro_f1(
        np.stack([drawn[..., 0], drawn[..., 1], np.zeros_like(drawn[..., 1]), drawn[..., 2]], axis=-1)
    )
    tail = (1 - LEVEL) / 2 * 100
    for unit in range(units):
        defined = values[:, unit][~np.isnan(values[:, unit])]
        if len(defined):
            bounds[unit] = np.percentile(defined, [tail, 100 - tail])
    return bounds


ANNOTATOR_COLUMNS = [
    "user_id",
    "username",
    "group",
    "pooled_mf1",
    "pooled_mf1_low",
    "pooled_mf1_high",
    "n_decisions",
    "n_labels",
    "n_checked",
    "n_corrected",
    "correction_rate",
]
SLICE_AGREEMENT_COLUMNS = [
    "dimension",
    "value",
    "pooled_mf1",
    "pooled_mf1_low",
    "pooled_mf1_high",
    "n_aligned",
    "n_decisions",
]


def annotator_agreement(
    grid: DecisionGrid,
    layers: PhysicianLayers,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Per annotator: group, pooled_mf1 against the other group's finals (with bootstrap bounds), n_decisions,
    and the within-group check: n_labels, n_checked, n_corrected, correction_rate."""
    frame, per_case = annotator_table(grid, layers)
    return _with_bounds(grid, frame, per_case, resamples, seed)


def _with_bounds(grid, frame: pd.DataFrame, per_case: np.ndarray, resamples: int, seed: int) -> pd.DataFrame:
    bounds = pooled_mf1_intervals(grid, per_case, resamples, seed)
    return frame.assign(pooled_mf1_low=bounds[:, 0], pooled_mf1_high=bounds[:, 1])


def annotator_table(grid: DecisionGrid, layers: PhysicianLayers) -> tuple[pd.DataFrame, np.ndarray]:
    """The annotator frame (without bounds) and its confusion counts per (case row, annotator) in frame order."""
    parts, counts = [], []
    n_cases = len(grid.cases)
    case_of_cell = np.broadcast_to(grid.case_rows.astype(np.int64)[:, None], grid.valid.shape)
    for g, own, other, both in _physician_pairs(grid, layers):
        who = layers.annotator[g]
        labelled = (own >= 0) & grid.valid
        ids = who[labelled]
        if not len(ids):
            continue
        # User ids are small integers: a lookup table numbers them without sorting 800 k labels.
        users = np.flatnonzero(np.bincount(ids))
        lookup = np.full(int(users[-1]) + 1, -1, dtype=np.int64)
        lookup[users] = np.arange(len(users))
        codes = lookup[ids]
        code_grid = np.full(who.shape, -1, dtype=np.int64)
        code_grid[labelled] = codes
        key = case_of_cell * len(users) + code_grid
        per_case = confusion_counts_by(key, other, own, both, n_cases * len(users)).reshape(n_cases, len(users), 4)
        checked = labelled & (layers.check[g] >= 0)
        corrected = checked & (layers.check[g] != own)
        frame = pd.DataFrame(
            {
                "user_id": users,
                "group": g + 1,
                "n_labels": np.bincount(codes, minlength=len(users)),
                "n_checked": np.bincount(code_grid[checked], minlength=len(users)),
                "n_corrected": np.bincount(code_grid[corrected], minlength=len(users)),
            }
        )
        pooled = per_case.sum(axis=0)
        frame["pooled_mf1"] = metrics.macro_f1(pooled)
        frame["n_decisions"] = pooled.sum(axis=1)
        parts.append(frame)
        counts.append(per_case)
    if not parts:
        return pd.DataFrame(columns=ANNOTATOR_COLUMNS), np.zeros((n_cases, 0, 4), dtype=np.int64)
    frame = pd.concat(parts, ignore_index=True)
    per_case = np.concatenate(counts, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        frame["correction_rate"] = np.where(
            frame["n_checked"] > 0, frame["n_corrected"] / frame["n_checked"].clip(1), np.nan
        )
    frame["username"] = [layers.usernames.get(int(uid), f"user-{int(uid)}") for uid in frame["user_id"]]
    frame["pooled_mf1_low"] = frame["pooled_mf1_high"] = np.nan
    order = np.lexsort((frame["username"].to_numpy(str), frame["group"].to_numpy()))
    return frame.iloc[order].reset_index(drop=True)[ANNOTATOR_COLUMNS], per_case[:, order]


def agreement_slices(
    grid: DecisionGrid, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> pd.DataFrame:
    """Long frame: dimension, value, pooled_mf1 (with bootstrap bounds), n_aligned, n_decisions — the two
    groups over the aligned pairs' decisions of each slice value."""
    frame, per_case = slice_agreement_table(grid)
    return _with_bounds(grid, frame, per_case, resamples, seed)


def slice_agreement_table(grid: DecisionGrid, members: dict | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """The groups' agreement per slice value (without bounds) and its confusion counts per (case row, value)."""
    aligned = aligned_rows(grid)
    mask = aligned[:, None] & grid.valid
    by_key, by_case = counts_per_criterion_and_case(grid, grid.group1, grid.group2, mask)
    pairs_by_case = np.bincount(grid.case_rows[aligned], minlength=len(grid.cases)).astype(np.float64)
    rows, per_case_units = [], []
    width = grid.width
    n_cases = len(grid.cases)
    for dimension, (member, unit) in (members or slice_members(grid)).items():
        if member.empty:
            continue
        values, matrix = slice_membership(member, unit, len(by_key) if unit == "key" else n_cases)
        units, codes = matrix.nonzero()[1], matrix.nonzero()[0]
        case_of_member = units // width if unit == "key" else units
        source = by_key[units] if unit == "key" else by_case[units]
        # (cases × values × 4): a case's counts under each value it has (summed over its criteria for tags)
        flat = case_of_member * len(values) + codes
        per_case = np.stack(
            [np.bincount(flat, weights=source[:, i], minlength=n_cases * len(values)) for i in range(4)], axis=-1
        ).reshape(n_cases, len(values), 4)
        per_case_units.append(per_case)
        # an aligned pair counts under a value when its case (for tags: one of its criteria) has it
        has_value = np.zeros(n_cases * len(values), dtype=bool)
        has_value[flat] = True
        pairs = has_value.reshape(n_cases, len(values)).T.astype(np.float64) @ pairs_by_case
        pooled = per_case.sum(axis=0)
        mf1 = metrics.macro_f1(pooled)
        for index, value in enumerate(values):
            rows.append(
                {
                    "dimension": dimension,
                    "value": value,
                    "pooled_mf1": mf1[index],
                    "n_aligned": int(pairs[index]),
                    "n_decisions": int(pooled[index].sum()),
                }
            )
    frame = pd.DataFrame(rows, columns=SLICE_AGREEMENT_COLUMNS)
    if not per_case_units:
        return frame, np.zeros((len(grid.cases), 0, 4), dtype=np.int64)
    return frame, np.concatenate(per_case_units, axis=1)
