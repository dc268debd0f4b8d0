"""The metrics of docs/REFERENCE.md §4, as pure vectorised functions over the decision grid (`analysis.grid`).

`analysis.grid.prepare(frames)` lays every decision out on a grid — one row per response, one column per
criterion position of its case's current approved rubric. Every metric below is array arithmetic
over that grid; nothing loops over decisions.

Undefined values are NaN here (a model without complete responses, a correlation of constant
input, a macro-F1 over no decisions); the report writes them as JSON null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.frames import JUDGE_PREFIX, parse_source
from analysis.grid import MET, DecisionGrid
from db.rules.errors import ValidationFailed
from db.rules.taxonomy import get_taxonomy

GOLD, GROUP1, GROUP2 = "gold", "group1", "group2"
DEFAULT_K = 10
SENSITIVITY_THRESHOLDS = (6, 7, 8, 9, 12, 15)
TOP_SETS = (3, 5)
SLICE_DIMENSIONS = ("difficulty", "register", "macro_category", "subject", "task_theme", "capability_family")


# Sources and per-response scores ---------------------------------------------------------------


def source_labels(grid: DecisionGrid, source: str) -> np.ndarray:
    """The labels that score the models: gold, a group's finals, or one judge's decisions."""
    kind, name = parse_source(source)
    if kind == "judge":
        if name not in grid.judges:
            known = ", ".join(sorted(grid.judges)) or "none"
            raise ValidationFailed(f"--source {source}: no judge decisions named {name!r} (judges: {known})")
        return grid.judges[name]
    return {GOLD: grid.gold, GROUP1: grid.group1, GROUP2: grid.group2}[kind]


def validate_k(k: int, n: int) -> int:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 1 <= k <= n:
        raise ValidationFailed(f"--k must be a whole number from 1 to {n} (the rubric size), got {k!r}")
    return int(k)


def complete_mask(grid: DecisionGrid, labels: np.ndarray) -> np.ndarray:
    """Responses all N of whose decisions have a label in `labels` (N > 0)."""
    return (grid.n > 0) & ((labels >= 0) | ~grid.valid).all(axis=1)


def met_counts(labels: np.ndarray) -> np.ndarray:
    """s: met criteria per response."""
    return (labels == MET).sum(axis=1)


def cacs(s: np.ndarray, n: np.ndarray, k: int) -> np.ndarray:
    """CACS@k = (s − k + 1)/(N − k + 1) when s ≥ k, else 0."""
    s = np.asarray(s, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    denominator = np.where(n - k + 1 > 0, n - k + 1, 1.0)
    return np.where(s >= k, (s - k + 1) / denominator, 0.0)


def score_summary(s: np.ndarray, n: np.ndarray, k: int) -> dict[str, float | int]:
    """The scores of a set of responses (one model, or one model within a slice), each with s met of N:

    rubric accuracy = mean(s / N), Pass@k = mean(s ≥ k), CACS@k = mean of `cacs` (docs/REFERENCE.md §4).
    """
    s = np.asarray(s, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    return {
        "n_responses": int(len(s)),
        "rubric_accuracy": float(np.mean(s / n)),
        "pass_at_k": float(np.mean(s >= k)),
        "cacs_at_k": float(np.mean(cacs(s, n, k))),
    }


@dataclass
class Scores:
    """Per complete response of a source: model code, case row, N, s, length."""

    model_codes: np.ndarray
    case_rows: np.ndarray
    n: np.ndarray
    s: np.ndarray
    length: np.ndarray
    complete: np.ndarray  # (R,) over all responses


def response_scores(grid: DecisionGrid, source: str = GOLD) -> Scores:
    labels = source_labels(grid, source)
    complete = complete_mask(grid, labels)
    s = met_counts(labels)
    return Scores(
        model_codes=grid.model_codes[complete],
        case_rows=grid.case_rows[complete],
        n=grid.n[complete],
        s=s[complete],
        length=grid.responses["length"].to_numpy(np.float64)[complete],
        complete=complete,
    )


def _group_mean(codes: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    counts = np.bincount(codes, minlength=size)
    sums = np.bincount(codes, weights=values, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def model_scores(grid: DecisionGrid, scores: Scores, k: int) -> pd.DataFrame:
    """Per model: n_responses, rubric_accuracy, pass_at_k, cacs_at_k, mean_length and cacs@1..N."""
    size = len(grid.models)
    codes = scores.model_codes
    frame = pd.DataFrame(index=pd.Index(grid.models, name="model"))
    frame["n_responses"] = np.bincount(codes, minlength=size).astype(int)
    frame["rubric_accuracy"] = _group_mean(codes, scores.s / np.maximum(scores.n, 1), size)
    frame["pass_at_k"] = _group_mean(codes, (scores.s >= k).astype(np.float64), size)
    frame["cacs_at_k"] = _group_mean(codes, cacs(scores.s, scores.n, k), size)
    frame["mean_length"] = _group_mean(codes, scores.length, size)
    for threshold in range(1, grid.rubric_size + 1):
        frame[f"cacs@{threshold}"] = _group_mean(codes, cacs(scores.s, scores.n, threshold), size)
    return frame


JUDGE_SCORED_COLUMNS = ["n_responses", "rubric_accuracy", "pass_at_k", "cacs_at_k", "mean_length"]


def judge_scored_models(grid: DecisionGrid, source: str, judge: str, k: int) -> pd.DataFrame:
    """Models without one complete response under `source`, scored by judge `judge` instead.

    A new model evaluated without physicians (responses only, then a judge run) has no gold; its
    RA / Pass@k / CACS@k come from the judge's decisions and are marked as such (`scored_by`).
    """
    base = model_scores(grid, response_scores(grid, source), k)
    judged = model_scores(grid, response_scores(grid, JUDGE_PREFIX + judge), k)
    unscored = base.index[base["n_responses"] == 0]
    frame = judged.loc[unscored, JUDGE_SCORED_COLUMNS]
    frame = frame[frame["n_responses"] > 0].copy()
    frame["scored_by"] = JUDGE_PREFIX + judge
    return frame


JUDGE_PAIR_COLUMNS = [
    "judge",
    "model",
    "n_graded",
    "n_responses",
    "coverage",
    "rubric_accuracy",
    "pass_at_k",
    "cacs_at_k",
]


def judge_pair_scores(grid: DecisionGrid, k: int) -> pd.DataFrame:
    """One row per (judge, model) where the judge graded at least one of the model's responses, whether or not
    physicians labeled the model (docs/REFERENCE.md §4): the judge-only scores over the responses it graded on
    all N (`n_graded`), and `coverage` = n_graded / the model's responses. A judge that never graded a model
    has no row beside it."""
    rows = []
    n_of_model = np.bincount(grid.model_codes, minlength=len(grid.models))
    for judge in sorted(grid.judges):
        labels = grid.judges[judge]
        any_decision = grid.judge_rows[judge][0] > 0 if judge in grid.judge_rows else (labels >= 0).any(axis=1)
        graded = complete_mask(grid, labels)
        s = met_counts(labels)
        touched = np.bincount(grid.model_codes[any_decision], minlength=len(grid.models))
        for code, model in enumerate(grid.models):
            if not touched[code]:
                continue
            chosen = graded & (grid.model_codes == code)
            values = (
                score_summary(s[chosen], grid.n[chosen], k)
                if chosen.any()
                else {"n_responses": 0, "rubric_accuracy": np.nan, "pass_at_k": np.nan, "cacs_at_k": np.nan}
            )
            rows.append(
                {
                    "judge": judge,
                    "model": model,
                    "n_graded": int(chosen.sum()),
                    "n_responses": int(n_of_model[code]),
                    "coverage": float(chosen.sum() / n_of_model[code]),
                    **{key: values[key] for key in ("rubric_accuracy", "pass_at_k", "cacs_at_k")},
                }
            )
    return pd.DataFrame(rows, columns=JUDGE_PAIR_COLUMNS)


# Agreement between the two groups --------------------------------------------------------------


def confusion_counts(truth: np.ndarray, predicted: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per row: (both met, truth only, predicted only, neither) over the cells of `mask`."""
    t = truth == MET
    p = predicted == MET
    return np.stack(
        [
            (t & p & mask).sum(axis=1),
            (t & ~p & mask).sum(axis=1),
            (~t & p & mask).sum(axis=1),
            (~t & ~p & mask).sum(axis=1),
        ],
        axis=-1,
    ).astype(np.int64)


def macro_f1(counts: np.ndarray) -> np.ndarray:
    """sklearn's `f1_score(average="macro")` from (tp, fn, fp, tn) counts, classes present in either list.

    Per class F1 = 2·tp / (true + predicted), averaged over the classes that occur; NaN with no decisions.
    """
    counts = np.asarray(counts, dtype=np.float64)
    a, b, c, d = counts[..., 0], counts[..., 1], counts[..., 2], counts[..., 3]
    positive_present = (a + b + c) > 0
    negative_present = (d + b + c) > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        f_positive = (2.0 * a) / ((a + b) + (a + c))
        f_negative = (2.0 * d) / ((d + c) + (d + b))
    total = np.where(negative_present, f_negative, 0.0) + np.where(positive_present, f_positive, 0.0)
    classes = positive_present.astype(np.int64) + negative_present.astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(classes > 0, total / np.maximum(classes, 1), np.nan)


@dataclass
class Agreement:
    per_model: pd.DataFrame  # pooled_mf1, case_mf1_mean, case_mf1_median, n_aligned, counts a..d, raters
    overall_counts: np.ndarray  # (4,)
    pairs: pd.DataFrame  # one row per aligned pair: model, case_row, case_id, mf1, a, b, c, d

    @property
    def overall_mf1(self) -> float:
        return float(macro_f1(self.overall_counts))

    @property
    def n_aligned(self) -> int:
        return int(len(self.pairs))


def agreement(grid: DecisionGrid) -> Agreement:
    aligned = complete_mask(grid, grid.group1) & complete_mask(grid, grid.group2)
    counts = confusion_counts(grid.group1[aligned], grid.group2[aligned], grid.valid[aligned])
    case_mf1 = macro_f1(counts)
    codes = grid.model_codes[aligned]
    size = len(grid.models)
    pooled = (
        np.stack([np.bincount(codes, weights=counts[:, i], minlength=size) for i in range(4)], axis=-1)
        if size
        else np.zeros((0, 4))
    )
    pairs = pd.DataFrame(
        {
            "model": np.asarray(grid.models, dtype=object)[codes] if size else [],
            "case_row": grid.case_rows[aligned],
            "case_id": grid.responses["case_id"].to_numpy()[aligned],
            "mf1": case_mf1,
            "a": counts[:, 0],
            "b": counts[:, 1],
            "c": counts[:, 2],
            "d": counts[:, 3],
        }
    )
    per_model = pd.DataFrame(index=pd.Index(grid.models, name="model"))
    per_model["pooled_mf1"] = macro_f1(pooled) if size else []
    grouped = pairs.groupby("model")["mf1"]
    per_model["case_mf1_mean"] = grouped.mean().reindex(per_model.index)
    per_model["case_mf1_median"] = grouped.median().reindex(per_model.index)
    per_model["n_aligned"] = np.bincount(codes, minlength=size).astype(int) if size else []
    for i, name in enumerate("abcd"):
        per_model[name] = pooled[:, i].astype(np.int64) if size else []
    per_model = per_model.join(grid.raters)
    return Agreement(per_model=per_model, overall_counts=pooled.sum(axis=0) if size else np.zeros(4), pairs=pairs)


# Judges ----------------------------------------------------------------------------------------


def judge_fidelity(grid: DecisionGrid) -> pd.DataFrame:
    """Per judge: pooled macro-F1 against each group's finals and against gold, over decisions both have."""
    rows = []
    for name in sorted(grid.judges):
        judge = grid.judges[name]
        entry: dict[str, Any] = {"judge": name, "n_decisions": grid.judge_decisions[name]}
        for key, reference in (("mf1_group1", grid.group1), ("mf1_group2", grid.group2), ("mf1_gold", grid.gold)):
            both = (judge >= 0) & (reference >= 0)
            counts = confusion_counts(reference.ravel()[None, :], judge.ravel()[None, :], both.ravel()[None, :])[0]
            entry[key] = float(macro_f1(counts))
            entry[f"n_{key[4:]}"] = int(counts.sum())
        entry["mf1_mean"] = (entry["mf1_group1"] + entry["mf1_group2"]) / 2
        rows.append(entry)
    columns = [
        "judge",
        "mf1_group1",
        "mf1_group2",
        "mf1_mean",
        "mf1_gold",
        "n_decisions",
        "n_group1",
        "n_group2",
        "n_gold",
    ]
    return pd.DataFrame(rows, columns=columns).set_index("judge")


# Rankings --------------------------------------------------------------------------------------


def _defined(x: pd.Series, y: pd.Series) -> tuple[pd.Series, pd.Series]:
    both = x.notna() & y.notna()
    return x[both], y[both]


def top_models(values: pd.Series, size: int) -> set:
    """The `size` highest-valued models; ties broken by model name."""
    ordered = sorted(values.dropna().items(), key=lambda item: (-item[1], item[0]))
    return {model for model, _ in ordered[:size]}


def top_overlap(x: pd.Series, y: pd.Series, size: int) -> float:
    """|top-size(x) ∩ top-size(y)| / min(size, models both rank) (docs/REFERENCE.md §4); NaN when none."""
    x, y = _defined(x, y)
    if x.empty:
        return float("nan")
    return len(top_models(x, size) & top_models(y, size)) / min(size, len(x))


def _constant(values: np.ndarray) -> bool:
    return len(values) == 0 or bool(np.all(values == values[0]))


#: Kendall's τ-b below compares every pair of points; above this many, scipy's O(n log n) algorithm does.
KENDALL_PAIRWISE_MAX = 2000


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties sharing the mean of the ranks they span (`scipy.stats.rankdata(method="average")`)."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    new_value = np.r_[True, ordered[1:] != ordered[:-1]]
    starts = np.flatnonzero(new_value)
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = ((starts + ends + 1) / 2.0)[np.cumsum(new_value) - 1]
    return ranks


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """r = Σ dx·dy / √(Σ dx² · Σ dy²), d the deviations from the mean (clipped to [−1, 1] against rounding)."""
    dx, dy = x - x.mean(), y - y.mean()
    return float(np.clip(np.dot(dx, dy) / np.sqrt(float(np.dot(dx, dx)) * float(np.dot(dy, dy))), -1.0, 1.0))


def _kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """τ_b = (P − Q) / √((P + Q + T_x)(P + Q + T_y)) over the pairs i < j: P concordant, Q discordant, T_x
    tied in x only, T_y tied in y only (Kendall 1945, "The treatment of ties in ranking problems")."""
    if len(x) > KENDALL_PAIRWISE_MAX:
        from scipy import stats  # many points: the library's O(n log n) count

        return float(stats.kendalltau(x, y)[0])
    upper = np.triu_indices(len(x), k=1)
    sx = np.sign(x[:, None] - x[None, :])[upper]
    sy = np.sign(y[:, None] - y[None, :])[upper]
    # P + Q + T_x is the number of pairs not tied in y, and P + Q + T_y those not tied in x.
    return float((sx * sy).sum()) / float(np.sqrt(float(np.count_nonzero(sx)) * float(np.count_nonzero(sy))))


def correlation(kind: str, x, y) -> float:
    """Pearson r, Spearman ρ (Pearson r of the average ranks) or Kendall τ-b; NaN for fewer than two points or
    constant input. In numpy, so a report does not load scipy.stats (docs/performance.md); the tests compare
    each with `scipy.stats.pearsonr`, `spearmanr` and `kendalltau`."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if kind not in ("pearson", "spearman", "kendall"):
        raise ValueError(f"unknown correlation {kind!r}")
    if len(x) < 2 or _constant(x) or _constant(y):
        return float("nan")
    if kind == "pearson":
        return _pearson(x, y)
    if kind == "spearman":
        return _pearson(average_ranks(x), average_ranks(y))
    return _kendall_tau_b(x, y)


def threshold_sensitivity(
    scores: pd.DataFrame, k: int, thresholds=SENSITIVITY_THRESHOLDS, n: int | None = None
) -> pd.DataFrame:
    """Model-level CACS@k2 against CACS@k: Spearman and top-3/top-5 overlap, for each k2 ≤ N."""
    n = n if n is not None else max(int(c.split("@")[1]) for c in scores.columns if c.startswith("cacs@"))
    base = scores[f"cacs@{k}"]
    rows = []
    for k2 in thresholds:
        if k2 > n:
            continue
        x, y = _defined(base, scores[f"cacs@{k2}"])
        row = {"k2": k2, "spearman": correlation("spearman", x, y)}
        for size in TOP_SETS:
            row[f"top{size}"] = top_overlap(base, scores[f"cacs@{k2}"], size)
        rows.append(row)
    return pd.DataFrame(rows, columns=["k2", "spearman", "top3", "top5"]).set_index("k2")


def cross_grader(grid: DecisionGrid) -> pd.DataFrame:
    """One row per judge pair (a < b): rank agreement of the models' criterion-positive rates."""
    rates = positive_rates(grid)
    names = sorted(rates.columns)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            x, y = _defined(rates[a], rates[b])
            row = {
                "judge_a": a,
                "judge_b": b,
                "spearman": correlation("spearman", x, y),
                "kendall_tau_b": correlation("kendall", x, y),
                "mean_abs_diff_pp": float(np.mean(np.abs(x - y)) * 100) if len(x) else float("nan"),
                "n_models": int(len(x)),
            }
            for size in TOP_SETS:
                row[f"top{size}"] = top_overlap(rates[a], rates[b], size)
            rows.append(row)
    return pd.DataFrame(
        rows,
        columns=["judge_a", "judge_b", "spearman", "kendall_tau_b", "mean_abs_diff_pp", "top3", "top5", "n_models"],
    )


def positive_rates(grid: DecisionGrid) -> pd.DataFrame:
    """model × judge: share of `met` among all the judge's decisions on the model's responses."""
    rates = pd.DataFrame(index=pd.Index(grid.models, name="model"))
    size = len(grid.models)
    for name in sorted(grid.judge_rows):
        decisions, met = grid.judge_rows[name]
        per_model = np.bincount(grid.model_codes, weights=decisions, minlength=size)
        positive = np.bincount(grid.model_codes, weights=met, minlength=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            rates[name] = np.where(per_model > 0, positive / np.maximum(per_model, 1), np.nan)
    rates.columns.name = "judge"
    return rates


# Length diagnostics ----------------------------------------------------------------------------


def length_diagnostics(scores: Scores, k: int) -> dict[str, float]:
    length = scores.length
    value = cacs(scores.s, scores.n, k)
    accuracy = scores.s / np.maximum(scores.n, 1)
    result = {
        "pearson_cacs": correlation("pearson", length, value),
        "spearman_cacs": correlation("spearman", length, value),
        "pearson_accuracy": correlation("pearson", length, accuracy),
        "spearman_accuracy": correlation("spearman", length, accuracy),
    }
    _, case_codes = np.unique(scores.case_rows, return_inverse=True)
    size = int(case_codes.max()) + 1 if len(case_codes) else 0
    length_resid = length - _group_mean(case_codes, length, size)[case_codes] if size else length
    value_resid = value - _group_mean(case_codes, value, size)[case_codes] if size else value
    result["partial_cacs"] = correlation("pearson", length_resid, value_resid)
    return result


# Slices ----------------------------------------------------------------------------------------


def case_slice_values(cases: pd.DataFrame, dimension: str) -> pd.DataFrame:
    """(case_row, value) pairs of a slice dimension; themes and families are multi-valued, each once per case."""
    if dimension in ("difficulty", "register", "macro_category"):
        return pd.DataFrame({"case_row": np.arange(len(cases)), "value": cases[dimension].astype(str).to_numpy()})
    if dimension == "subject":  # every subject label, as the official scorer's subject:<label> slices
        pairs = [
            (row, label) for row, labels in enumerate(cases["subject_labels"]) for label in dict.fromkeys(labels or [])
        ]
        return pd.DataFrame(
            {
                "case_row": np.asarray([row for row, _ in pairs], dtype=np.int64),
                "value": np.asarray([str(label) for _, label in pairs], dtype=object),
            }
        )
    taxonomy = get_taxonomy()
    rows, values = [], []
    for row, labels in enumerate(cases["task_labels"]):
        themes = {taxonomy.theme_or_raw(label) for label in labels or []}
        chosen = themes if dimension == "task_theme" else {taxonomy.family(theme) for theme in themes}
        rows += [row] * len(chosen)
        values += sorted(chosen)
    return pd.DataFrame({"case_row": np.asarray(rows, dtype=np.int64), "value": np.asarray(values, dtype=object)})


def slices(grid: DecisionGrid, scores: Scores, k: int, dimensions=SLICE_DIMENSIONS) -> pd.DataFrame:
    """Long frame: dimension, value, model, cacs_at_k, n_responses — CACS@k over complete responses of each value."""
    value = cacs(scores.s, scores.n, k)
    per_response = pd.DataFrame(
        {
            "case_row": scores.case_rows,
            "model": np.asarray(grid.models, dtype=object)[scores.model_codes] if len(grid.models) else [],
            "cacs": value,
        }
    )
    parts = []
    for dimension in dimensions:
        members = case_slice_values(grid.cases, dimension)
        joined = per_response.merge(members, on="case_row", how="inner")
        summary = joined.groupby(["value", "model"], sort=True)["cacs"].agg(["mean", "size"]).reset_index()
        parts.append(summary.assign(dimension=dimension))
    if not parts:
        return pd.DataFrame(columns=["dimension", "value", "model", "cacs_at_k", "n_responses"])
    result = pd.concat(parts, ignore_index=True).rename(columns={"mean": "cacs_at_k", "size": "n_responses"})
    return result[["dimension", "value", "model", "cacs_at_k", "n_responses"]]


# Pending work ----------------------------------------------------------------------------------


def pending(grid: DecisionGrid, scores: Scores) -> dict[str, int]:
    """Decisions with both group finals, differing, never adjudicated (they alone lack gold); incomplete responses."""
    both = (grid.group1 >= 0) & (grid.group2 >= 0)
    unresolved = int((both & (grid.gold < 0)).sum())
    return {"unresolved_disagreements": unresolved, "incomplete_responses": int((~scores.complete).sum())}
