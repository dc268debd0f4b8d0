"""Time on task against agreement (docs/REFERENCE.md §4.5): does labeling faster go with agreeing less?

A *timed response* is one annotator's annotation of one response with at least one saved timing
(`label_timing`, stage annotation). Its active time is the sum of `active_ms` over those saves
(each save stores the time since the last one), its seconds per criterion that time divided by the
criteria of its largest save. Its decisions are the cells of the current rubric where this annotator's
annotation label and the other group's final label both exist; agreement is the share of those
decisions on which the two are equal. Timed responses without such a decision are counted apart.

Pure: the decision grid and the loader's timing frame in, tables and numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis import metrics
from analysis.grid import DecisionGrid

#: Time buckets: quantiles of seconds per criterion over the timed responses (4 = quartiles).
TIME_BUCKETS = 4

RESPONSE_COLUMNS = [
    "user_id",
    "group",
    "response_id",
    "active_seconds",
    "seconds_per_criterion",
    "n_decisions",
    "n_agree",
    "agreement",
    "a",
    "b",
    "c",
    "d",
]


@dataclass
class TimeAgreement:
    responses: pd.DataFrame  # one row per timed response with decisions (RESPONSE_COLUMNS)
    annotators: (
        pd.DataFrame
    )  # username, group, n_responses, median_seconds_per_criterion, n_decisions, agreement, pooled_mf1
    buckets: pd.DataFrame  # bucket, low_seconds, high_seconds, n_responses, n_decisions, agreement, pooled_mf1
    spearman_responses: dict  # {"rho", "n"}: seconds per criterion against agreement, per timed response
    spearman_annotators: dict  # {"rho", "n"}: median seconds per criterion against agreement, per annotator
    n_timed: int  # timed responses, with or without decisions to compare
    n_without_decisions: int

    @property
    def has_data(self) -> bool:
        return len(self.responses) > 0


def spearman(x, y) -> float:
    """Spearman's ρ: Pearson's r of the average ranks; NaN for fewer than two points or a constant side."""
    x = pd.Series(np.asarray(x, dtype=np.float64))
    y = pd.Series(np.asarray(y, dtype=np.float64))
    if len(x) < 2:
        return float("nan")
    rx, ry = x.rank(method="average").to_numpy(), y.rank(method="average").to_numpy()
    dx, dy = rx - rx.mean(), ry - ry.mean()
    denominator = np.sqrt((dx * dx).sum() * (dy * dy).sum())
    return float((dx * dy).sum() / denominator) if denominator > 0 else float("nan")


def bucket_edges(values, buckets: int = TIME_BUCKETS) -> np.ndarray:
    """Quantile edges (linear interpolation), distinct; a value v falls in bucket i when edges[i] < v ≤ edges[i+1],
    the first bucket also holding edges[0]."""
    values = np.asarray(values, dtype=np.float64)
    if not len(values):
        return np.zeros(0)
    return np.unique(np.quantile(values, np.linspace(0, 1, buckets + 1)))


def bucket_of(values, edges: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if len(edges) < 2:
        return np.zeros(len(values), dtype=np.int64)
    return np.clip(np.searchsorted(edges, values, side="left") - 1, 0, len(edges) - 2)


def _timed(timings: pd.DataFrame | None, users: pd.DataFrame) -> pd.DataFrame:
    """user_id, group, response_id, active_seconds, seconds_per_criterion of each timed annotation."""
    columns = ["user_id", "group", "response_id", "active_seconds", "seconds_per_criterion"]
    if timings is None or not len(timings):
        return pd.DataFrame(columns=columns)
    rows = timings[timings["stage"] == "annotation"]
    grouped = rows.groupby(["user_id", "response_id"], sort=True).agg(
        active_ms=("active_ms", "sum"), n_criteria=("n_criteria", "max")
    )
    grouped = grouped[grouped["n_criteria"] > 0].reset_index()
    groups = dict(zip(users["user_id"].astype(np.int64), users["group_no"]))
    grouped["group"] = grouped["user_id"].map(groups)
    grouped = grouped[grouped["group"].isin([1, 2])]
    grouped["active_seconds"] = grouped["active_ms"] / 1000.0
    grouped["seconds_per_criterion"] = grouped["active_seconds"] / grouped["n_criteria"]
    return grouped[columns].astype({"user_id": np.int64, "group": np.int64, "response_id": np.int64})


def time_agreement(
    grid: DecisionGrid, timings: pd.DataFrame | None, users: pd.DataFrame, buckets: int = TIME_BUCKETS
) -> TimeAgreement:
    """Per timed response, per annotator and per time bucket: agreement with the other group's final labels."""
    timed = _timed(timings, users)
    layers = grid.physicians
    finals = (grid.group1, grid.group2)
    rows_of = pd.Index(grid.responses["response_id"].to_numpy(np.int64))
    grid_rows = rows_of.get_indexer(timed["response_id"].to_numpy(np.int64)) if len(timed) else np.zeros(0, int)
    counts = np.zeros((len(timed), 4), dtype=np.int64)
    if layers is not None and len(timed):
        for g in (0, 1):
            pick = (timed["group"].to_numpy() == g + 1) & (grid_rows >= 0)
            if not pick.any():
                continue
            rows = grid_rows[pick]
            own = layers.annotation[g][rows]
            other = finals[1 - g][rows]
            mine = layers.annotator[g][rows] == timed["user_id"].to_numpy(np.int64)[pick][:, None]
            both = (own >= 0) & (other >= 0) & grid.valid[rows] & mine
            counts[pick] = metrics.confusion_counts(other, own, both)
    frame = timed.assign(a=counts[:, 0], b=counts[:, 1], c=counts[:, 2], d=counts[:, 3])
    frame["n_decisions"] = counts.sum(axis=1)
    frame["n_agree"] = counts[:, 0] + counts[:, 3]
    with_decisions = frame[frame["n_decisions"] > 0].copy()
    with_decisions["agreement"] = with_decisions["n_agree"] / with_decisions["n_decisions"]
    with_decisions = with_decisions[RESPONSE_COLUMNS].reset_index(drop=True)
    annotators = _per_annotator(with_decisions, users)
    return TimeAgreement(
        responses=with_decisions,
        annotators=annotators,
        buckets=_per_bucket(with_decisions, buckets),
        spearman_responses={
            "rho": spearman(with_decisions["seconds_per_criterion"], with_decisions["agreement"]),
            "n": len(with_decisions),
        },
        spearman_annotators={
            "rho": spearman(annotators["median_seconds_per_criterion"], annotators["agreement"]),
            "n": len(annotators),
        },
        n_timed=len(frame),
        n_without_decisions=int((frame["n_decisions"] == 0).sum()),
    )


def _pooled(part: pd.DataFrame) -> tuple[int, float, float]:
    sums = part[["a", "b", "c", "d"]].to_numpy(np.int64).sum(axis=0)
    total = int(sums.sum())
    agreement = (sums[0] + sums[3]) / total if total else float("nan")
    return total, float(agreement), float(metrics.macro_f1(sums))


ANNOTATOR_COLUMNS = [
    "username",
    "group",
    "n_responses",
    "median_seconds_per_criterion",
    "n_decisions",
    "agreement",
    "pooled_mf1",
]


def _per_annotator(responses: pd.DataFrame, users: pd.DataFrame) -> pd.DataFrame:
    names = dict(zip(users["user_id"].astype(np.int64), users["username"].astype(str)))
    rows = []
    for key, part in responses.groupby(["user_id", "group"], sort=True):
        user_id, group = (int(str(value)) for value in key)
        n_decisions, agreement, mf1 = _pooled(part)
        rows.append(
            {
                "username": names.get(user_id, str(user_id)),
                "group": group,
                "n_responses": len(part),
                "median_seconds_per_criterion": float(part["seconds_per_criterion"].median()),
                "n_decisions": n_decisions,
                "agreement": agreement,
                "pooled_mf1": mf1,
            }
        )
    frame = pd.DataFrame(rows, columns=ANNOTATOR_COLUMNS)
    return frame.sort_values(["group", "username"], ignore_index=True)


BUCKET_COLUMNS = ["bucket", "low_seconds", "high_seconds", "n_responses", "n_decisions", "agreement", "pooled_mf1"]


def _per_bucket(responses: pd.DataFrame, buckets: int) -> pd.DataFrame:
    values = responses["seconds_per_criterion"].to_numpy(np.float64)
    edges = bucket_edges(values, buckets)
    codes = bucket_of(values, edges)
    rows = []
    for index in range(max(len(edges) - 1, 1) if len(values) else 0):
        part = responses[codes == index]
        if not len(part):
            continue
        n_decisions, agreement, mf1 = _pooled(part)
        rows.append(
            {
                "bucket": index + 1,
                "low_seconds": float(edges[index]),
                "high_seconds": float(edges[min(index + 1, len(edges) - 1)]),
                "n_responses": len(part),
                "n_decisions": n_decisions,
                "agreement": agreement,
                "pooled_mf1": mf1,
            }
        )
    return pd.DataFrame(rows, columns=BUCKET_COLUMNS)
