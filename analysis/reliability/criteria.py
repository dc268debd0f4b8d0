"""Criterion reliability per (case, criterion): agreement, Cohen's kappa, prevalences, gold rate, judges, flags."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import agreement as agreement_extra, metrics
from analysis.grid import MET, DecisionGrid
from analysis.reliability.thresholds_and_counts import (
    ALWAYS_MET,
    FLAGS,
    KAPPA_THRESHOLD,
    MIN_ALIGNED,
    MIN_DISAGREEMENTS,
    NEVER_MET,
    UNRELIABLE,
    aligned_rows,
    cell_keys,
    confusion_counts_by,
)

# Criterion reliability ---------------------------------------------------------------------------


def criterion_reliability(
    grid: DecisionGrid,
    *,
    kappa_threshold: float = KAPPA_THRESHOLD,
    min_aligned: int = MIN_ALIGNED,
    min_disagreements: int = MIN_DISAGREEMENTS,
) -> pd.DataFrame:
    """One row per current criterion with at least one aligned pair: case_id, criterion_id, case_row, slot,
    n_aligned, agreement, kappa, prevalence_g1, prevalence_g2, gold_met_rate, n_gold, n_disagree,
    judge_mf1:<judge> per judge, flag."""
    width = grid.width
    size = len(grid.cases) * width
    aligned = aligned_rows(grid)[:, None] & grid.valid
    keys = cell_keys(grid)
    counts = confusion_counts_by(keys, grid.group1, grid.group2, aligned, size)
    has_gold = aligned & (grid.gold >= 0)
    n_gold = np.bincount(keys[has_gold], minlength=size)
    gold_met = np.bincount(keys[has_gold & (grid.gold == MET)], minlength=size)
    criteria = grid.criteria
    index = criteria["case_row"].to_numpy(np.int64) * width + criteria["slot"].to_numpy(np.int64)
    mine = counts[index]
    n_aligned = mine.sum(axis=1)
    coefficients = agreement_extra.coefficients(mine)
    frame = pd.DataFrame(
        {
            "case_id": grid.cases["case_id"].to_numpy()[criteria["case_row"].to_numpy()],
            "criterion_id": criteria["criterion_id"].to_numpy(),
            "case_row": criteria["case_row"].to_numpy(np.int64),
            "slot": criteria["slot"].to_numpy(np.int64),
            "n_aligned": n_aligned,
        }
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        frame["agreement"] = coefficients["observed"]
        frame["kappa"] = coefficients["kappa"]
        frame["prevalence_g1"] = (mine[:, 0] + mine[:, 1]) / n_aligned
        frame["prevalence_g2"] = (mine[:, 0] + mine[:, 2]) / n_aligned
        frame["gold_met_rate"] = gold_met[index] / n_gold[index]
    frame["n_gold"] = n_gold[index]
    frame["n_disagree"] = mine[:, 1] + mine[:, 2]
    for name in sorted(grid.judges):
        judge = grid.judges[name]
        judged = has_gold & (judge >= 0)
        frame[f"judge_mf1:{name}"] = metrics.macro_f1(confusion_counts_by(keys, grid.gold, judge, judged, size)[index])
    frame["flag"] = pd.Series(
        flags(frame, kappa_threshold=kappa_threshold, min_aligned=min_aligned, min_disagreements=min_disagreements),
        dtype=object,
        index=frame.index,
    )
    return frame[frame["n_aligned"] > 0].reset_index(drop=True)


def flags(
    frame: pd.DataFrame,
    *,
    kappa_threshold: float = KAPPA_THRESHOLD,
    min_aligned: int = MIN_ALIGNED,
    min_disagreements: int = MIN_DISAGREEMENTS,
) -> np.ndarray:
    """The flag of each row of a reliability frame (None where nothing is wrong or n is too small)."""
    enough = frame["n_aligned"].to_numpy() >= min_aligned
    kappa = frame["kappa"].to_numpy(np.float64)
    unreliable = enough & (frame["n_disagree"].to_numpy() >= min_disagreements) & ~(kappa >= kappa_threshold)
    gold_known = enough & (frame["n_gold"].to_numpy() >= min_aligned)
    rate = frame["gold_met_rate"].to_numpy(np.float64)
    result = np.full(len(frame), None, dtype=object)
    # lowest priority first, so a row that meets several rules keeps the first of FLAGS
    result[gold_known & (rate == 1)] = ALWAYS_MET
    result[gold_known & (rate == 0)] = NEVER_MET
    result[unreliable] = UNRELIABLE
    return result


def flagged_criteria(reliability: pd.DataFrame) -> pd.DataFrame:
    """The flagged rows, worst first: unreliable by κ (lowest first, most disagreements first), then
    the constant ones (never met, always met), each by case and criterion."""
    flagged = reliability[reliability["flag"].notna()].copy()
    flagged["_rank"] = flagged["flag"].map({UNRELIABLE: 0, NEVER_MET: 1, ALWAYS_MET: 2})
    flagged["_kappa"] = flagged["kappa"].fillna(0.0)
    flagged = flagged.sort_values(
        ["_rank", "_kappa", "n_disagree", "case_id", "criterion_id"],
        ascending=[True, True, False, True, True],
        kind="stable",
    )
    return flagged.drop(columns=["_rank", "_kappa"]).reset_index(drop=True)


def flagged_cases(reliability: pd.DataFrame) -> pd.DataFrame:
    """Per case with a flagged criterion: how many of each flag, its lowest κ — most unreliable first."""
    flagged = reliability[reliability["flag"].notna()]
    if flagged.empty:
        return pd.DataFrame(columns=["case_id", "n_flagged", *FLAGS, "min_kappa"])
    table = pd.crosstab(flagged["case_id"], flagged["flag"]).reindex(columns=list(FLAGS), fill_value=0)
    table["n_flagged"] = table.sum(axis=1)
    table["min_kappa"] = flagged.groupby("case_id")["kappa"].min()
    table = table.reset_index().sort_values(
        [UNRELIABLE, "n_flagged", "min_kappa", "case_id"], ascending=[False, False, True, True], kind="stable"
    )
    return table[["case_id", "n_flagged", *FLAGS, "min_kappa"]].reset_index(drop=True)
