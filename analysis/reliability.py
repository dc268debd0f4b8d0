"""Analysis depth: criterion reliability, judge errors by model and slice, the human ceiling, agreement
by slice and per physician — pure array work on the decision grid of `analysis.metrics`.

Definitions (all macro-F1 values are `sklearn.metrics.f1_score(average="macro")` with default
arguments, computed here from confusion counts by `metrics.macro_f1`):

- **Criterion reliability**, per (case, criterion) over the case's aligned pairs (both groups have
  final labels on all N criteria): `n_aligned`; raw `agreement`; Cohen's `kappa` between the two
  groups' finals; each group's `prevalence` (share met); `gold_met_rate` over those decisions that
  have gold; `judge_mf1` of each judge against gold over those decisions the judge decided.
- **Flag** (first that applies; none below MIN_ALIGNED aligned pairs):
  `unreliable` — κ < KAPPA_THRESHOLD with at least MIN_DISAGREEMENTS disagreeing decisions;
  `never_met` / `always_met` — gold is constant over at least MIN_ALIGNED decisions (the criterion
  does not tell one model's response from another's).

  Why these numbers. κ = 0.40 is the upper end of "fair" agreement on Landis & Koch's scale and
  the usual floor for a usable rating item: below it, two physicians reading one criterion on the
  same response agree little beyond chance, so the wording leaves room for two readings. n is
  small — one decision per model, 11 at full scale — so a flag also needs MIN_ALIGNED = 10 aligned
  pairs (below that one decision moves κ by 0.2 or more) and MIN_DISAGREEMENTS = 4 differing
  decisions. The last guards the κ paradox: at extreme prevalence (a criterion almost no model
  meets) one or two slips give κ ≤ 0 though the groups agree on 9 of 11. Simulated with slips
  that do not depend on the criterion, at the demo's rate (each group misses the truth on 6 % of
  decisions, prevalence spread as Beta(0.7, 0.7), 11 decisions per criterion), this rule flags
  ≈ 3 % of criteria by chance, while a criterion whose wording makes each group miss 25 % of the
  time is flagged ≈ 64 % of the time (κ < 0.40 with 3 differing decisions: 9 % and 76 %; κ < 0.20
  with 4: 2 % and 49 %). The dashboard lists flagged criteria worst first.
- **Judge by model / by slice**: a judge's pooled macro-F1 against each group's finals and gold
  over the decisions both have, restricted to one model's responses or one slice value; slices are
  the case's difficulty, register, macro-category, each subject label, each task theme, and each
  tag of the criterion (values the judge never decided on are left out). `n_decisions` is every
  judge decision on the model's responses (by model) or on the slice's current criteria (by slice).
- **Human ceiling** (as HealthBench's meta-evaluation reads a grader against physicians): each
  physician's own annotation labels against the other group's final labels, pooled over every
  physician, over the decisions both have — the macro-F1 a judge's `mf1_group1/2` reads against.
- **Per annotator**: the same pooled over one physician's labels, with a bootstrap interval over
  cases (the report's seeded resampling); the within-group check correction rate is the share of
  the physician's annotation labels that their group's checker looked at (a check label exists)
  and changed.
- **Agreement by slice**: pooled macro-F1 between the groups over the aligned pairs' decisions
  of each slice value, with the same bootstrap interval.

Undefined values are NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from analysis import agreement as agreement_extra, metrics
from analysis.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, LEVEL, _resample_weights as resample_weights

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


def _counts_by(key: np.ndarray, truth: np.ndarray, predicted: np.ndarray, mask: np.ndarray, size: int) -> np.ndarray:
    """(size, 4) confusion counts (both met, truth only, predicted only, neither) of the masked cells by `key`."""
    # (met, met) → 0, (met, not) → 1, (not, met) → 2, (not, not) → 3
    code = (truth[mask] != metrics.MET).astype(np.int64) * 2 + (predicted[mask] != metrics.MET)
    return np.bincount(key[mask] * 4 + code, minlength=size * 4).reshape(size, 4).astype(np.int64)


def _cell_keys(grid: metrics.DecisionGrid) -> np.ndarray:
    """(R, W) index of each cell's (case row, criterion position): case_row × W + slot."""
    width = grid.width
    return grid.case_rows.astype(np.int64)[:, None] * width + np.arange(width)[None, :]


def aligned_rows(grid: metrics.DecisionGrid) -> np.ndarray:
    """Responses both groups labelled completely (the aligned pairs of docs/REFERENCE.md §4)."""
    return metrics.complete_mask(grid, grid.group1) & metrics.complete_mask(grid, grid.group2)


def _reference(grid: metrics.DecisionGrid, name: str) -> np.ndarray:
    return {"group1": grid.group1, "group2": grid.group2, "gold": grid.gold}[name]


# Criterion reliability ---------------------------------------------------------------------------


def criterion_reliability(
    grid: metrics.DecisionGrid,
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
    keys = _cell_keys(grid)
    counts = _counts_by(keys, grid.group1, grid.group2, aligned, size)
    has_gold = aligned & (grid.gold >= 0)
    n_gold = np.bincount(keys[has_gold], minlength=size)
    gold_met = np.bincount(keys[has_gold & (grid.gold == metrics.MET)], minlength=size)
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
        frame[f"judge_mf1:{name}"] = metrics.macro_f1(_counts_by(keys, grid.gold, judge, judged, size)[index])
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


# Judges by model and by slice ----------------------------------------------------------------------


def judges_by_model(grid: metrics.DecisionGrid) -> pd.DataFrame:
    """Rows (judge, model): mf1_group1, mf1_group2, mf1_gold against the model's decisions, n_decisions."""
    size = len(grid.models)
    rows = []
    for name in sorted(grid.judges):
        judge = grid.judges[name]
        entry = {}
        for column, reference_name in REFERENCES:
            reference = _reference(grid, reference_name)
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


def criterion_tag_members(grid: metrics.DecisionGrid) -> pd.DataFrame:
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


def _membership(member: pd.DataFrame, unit: str, n_units: int) -> tuple[list, sparse.csr_matrix]:
    """The slice values (sorted) and a (values × units) 0/1 matrix of which units belong to each."""
    codes, values = pd.factorize(member["value"], sort=True)
    units = member[unit].to_numpy(np.int64)
    matrix = sparse.csr_matrix((np.ones(len(codes)), (codes, units)), shape=(len(values), n_units))
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return list(values), matrix


def _per_criterion_and_case(grid, truth, predicted, mask) -> tuple[np.ndarray, np.ndarray]:
    """Confusion counts per (case row × W + slot) and per case row."""
    size = len(grid.cases) * grid.width
    by_key = _counts_by(_cell_keys(grid), truth, predicted, mask, size)
    return by_key, by_key.reshape(len(grid.cases), grid.width, 4).sum(axis=1)


def _slice_members(grid: metrics.DecisionGrid) -> dict[str, tuple[pd.DataFrame, str]]:
    members = {dimension: (case_dimension_members(grid.cases, dimension), "case_row") for dimension in CASE_DIMENSIONS}
    members["criterion_tag"] = (criterion_tag_members(grid), "key")
    return members


def _judge_counts_by_key(grid: metrics.DecisionGrid, judge: np.ndarray) -> np.ndarray:
    """(cases × W, 13): confusion counts of the judge against group 1, group 2 and gold (4 each), and the
    judge's decisions, per (case row, criterion position)."""
    size = len(grid.cases) * grid.width
    valid = grid.valid
    keys = _cell_keys(grid)[valid] * 9
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


def judge_slices(grid: metrics.DecisionGrid, members: dict | None = None) -> pd.DataFrame:
    """Long frame: judge, dimension, value, mf1_group1, mf1_group2, mf1_gold, n_decisions."""
    columns = ["judge", "dimension", "value", "mf1_group1", "mf1_group2", "mf1_gold", "n_decisions"]
    names = sorted(grid.judges)
    if not names:
        return pd.DataFrame(columns=columns)
    by_key = np.concatenate([_judge_counts_by_key(grid, grid.judges[name]) for name in names], axis=1)
    by_case = by_key.reshape(len(grid.cases), grid.width, -1).sum(axis=1)
    parts = []
    for dimension, (member, unit) in (members or _slice_members(grid)).items():
        if member.empty:
            continue
        per_unit = by_key if unit == "key" else by_case
        values, matrix = _membership(member, unit, len(per_unit))
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


# Physicians: ceiling, per annotator, agreement by slice ------------------------------------------------


def _physician_pairs(grid: metrics.DecisionGrid, layers: metrics.PhysicianLayers):
    """Per group g: (own annotation labels, other group's finals, cells both have)."""
    finals = (grid.group1, grid.group2)
    for g in (0, 1):
        own = layers.annotation[g]
        other = finals[1 - g]
        yield g, own, other, (own >= 0) & (other >= 0) & grid.valid


def human_ceiling(grid: metrics.DecisionGrid, layers: metrics.PhysicianLayers) -> dict:
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


@dataclass
class _CaseCounts:
    """Confusion counts per case row of named units (annotators or slice values), for bootstrapping."""

    names: list
    per_case: np.ndarray  # (cases, units, 4)


def _intervals(grid: metrics.DecisionGrid, per_case: np.ndarray, resamples: int, seed: int) -> np.ndarray:
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
    grid: metrics.DecisionGrid,
    layers: metrics.PhysicianLayers,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Per annotator: group, pooled_mf1 against the other group's finals (with bootstrap bounds), n_decisions,
    and the within-group check: n_labels, n_checked, n_corrected, correction_rate."""
    frame, per_case = _annotator_table(grid, layers)
    return _with_bounds(grid, frame, per_case, resamples, seed)


def _with_bounds(grid, frame: pd.DataFrame, per_case: np.ndarray, resamples: int, seed: int) -> pd.DataFrame:
    bounds = _intervals(grid, per_case, resamples, seed)
    return frame.assign(pooled_mf1_low=bounds[:, 0], pooled_mf1_high=bounds[:, 1])


def _annotator_table(grid: metrics.DecisionGrid, layers: metrics.PhysicianLayers) -> tuple[pd.DataFrame, np.ndarray]:
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
        per_case = _counts_by(key, other, own, both, n_cases * len(users)).reshape(n_cases, len(users), 4)
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
    grid: metrics.DecisionGrid, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> pd.DataFrame:
    """Long frame: dimension, value, pooled_mf1 (with bootstrap bounds), n_aligned, n_decisions — the two
    groups over the aligned pairs' decisions of each slice value."""
    frame, per_case = _slice_agreement_table(grid)
    return _with_bounds(grid, frame, per_case, resamples, seed)


def _slice_agreement_table(grid: metrics.DecisionGrid, members: dict | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    aligned = aligned_rows(grid)
    mask = aligned[:, None] & grid.valid
    by_key, by_case = _per_criterion_and_case(grid, grid.group1, grid.group2, mask)
    pairs_by_case = np.bincount(grid.case_rows[aligned], minlength=len(grid.cases)).astype(np.float64)
    rows, per_case_units = [], []
    width = grid.width
    n_cases = len(grid.cases)
    for dimension, (member, unit) in (members or _slice_members(grid)).items():
        if member.empty:
            continue
        values, matrix = _membership(member, unit, len(by_key) if unit == "key" else n_cases)
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


# Everything at once ------------------------------------------------------------------------------


@dataclass
class Insights:
    criteria: pd.DataFrame  # criterion_reliability
    judges_by_model: pd.DataFrame
    judge_slices: pd.DataFrame
    human_ceiling: dict
    annotators: pd.DataFrame
    agreement_slices: pd.DataFrame


def build_insights(
    grid: metrics.DecisionGrid, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Insights:
    """Every figure of this module; the annotators' and slices' intervals share one resampling."""
    layers = grid.physicians
    annotators, annotator_counts = (
        _annotator_table(grid, layers)
        if layers is not None
        else (pd.DataFrame(columns=ANNOTATOR_COLUMNS), np.zeros((len(grid.cases), 0, 4)))
    )
    members = _slice_members(grid)
    slices, slice_counts = _slice_agreement_table(grid, members)
    bounds = _intervals(grid, np.concatenate([annotator_counts, slice_counts], axis=1), resamples, seed)
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


# Judge errors --------------------------------------------------------------------------------------


def judge_errors(grid: metrics.DecisionGrid, judge: str) -> pd.DataFrame:
    """Every decision where `judge` differs from gold: response_id, case_id, model, criterion_id, group1,
    group2, gold, judge (1/0/-1) and kind (false_positive: judge met, gold not; false_negative: the reverse)."""
    columns = ["response_id", "case_id", "model", "criterion_id", "group1", "group2", "gold", "judge", "kind"]
    if judge not in grid.judges:
        return pd.DataFrame(columns=columns)
    values = grid.judges[judge]
    wrong = (values >= 0) & (grid.gold >= 0) & (values != grid.gold) & grid.valid
    rows, slots = np.nonzero(wrong)
    names = np.full((len(grid.cases), grid.width), None, dtype=object)
    names[grid.criteria["case_row"].to_numpy(np.int64), grid.criteria["slot"].to_numpy(np.int64)] = grid.criteria[
        "criterion_id"
    ].to_numpy(object)
    said = values[rows, slots]
    return pd.DataFrame(
        {
            "response_id": grid.responses["response_id"].to_numpy()[rows],
            "case_id": grid.responses["case_id"].to_numpy()[rows],
            "model": grid.responses["model"].to_numpy()[rows],
            "criterion_id": names[grid.case_rows[rows], slots],
            "group1": grid.group1[rows, slots],
            "group2": grid.group2[rows, slots],
            "gold": grid.gold[rows, slots],
            "judge": said,
            "kind": np.where(said == metrics.MET, FALSE_POSITIVE, FALSE_NEGATIVE),
        }
    )[columns]
