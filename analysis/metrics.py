"""The metrics of DESIGN §4, as pure vectorised functions over the loader's frames.

`prepare(frames)` lays every decision out on a grid — one row per response, one column per
criterion position of its case's current approved rubric — holding 1 (met), 0 (not met) or -1
(no label) for each group's final label, gold and each judge. Every metric below is then array
arithmetic over that grid; nothing loops over decisions.

Undefined values are NaN here (a model without complete responses, a correlation of constant
input, a macro-F1 over no decisions); the report writes them as JSON null.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from analysis.frames import Frames
from db.config import RUBRIC_SIZE
from db.enums import Stage
from db.errors import ValidationFailed
from db.gold import decisions_with_finals, gold_values
from db.taxonomy import get_taxonomy

MISSING, NOT_MET, MET = -1, 0, 1
GOLD, GROUP1, GROUP2, JUDGE_PREFIX = "gold", "group1", "group2", "judge:"
DEFAULT_K = 10
SENSITIVITY_THRESHOLDS = (6, 7, 8, 9, 12, 15)
TOP_SETS = (3, 5)
RATER_COLUMNS = ("annotators_g1", "annotators_g2", "checkers_g1", "checkers_g2")
SLICE_DIMENSIONS = ("difficulty", "register", "macro_category", "subject", "task_theme", "capability_family")


@dataclass
class PhysicianLayers:
    """Per group (index 0 → group 1), on the grid: each physician's own annotation label, who made
    it, and the group's check label (1, 0, or -1 for none); user ids are -1 where there is no label."""

    annotation: np.ndarray  # (2, R, W) int8
    annotator: np.ndarray  # (2, R, W) int64
    check: np.ndarray  # (2, R, W) int8
    usernames: dict[int, str] = field(default_factory=dict)

    def take(self, index: np.ndarray) -> PhysicianLayers:
        return PhysicianLayers(
            self.annotation[:, index], self.annotator[:, index], self.check[:, index], self.usernames
        )


@dataclass
class DecisionGrid:
    """Every decision of every response on one (responses × criterion positions) grid."""

    responses: pd.DataFrame  # response_id, case_pk, case_id, model, length, n — in grid row order
    cases: pd.DataFrame  # the loader's cases frame
    criteria: pd.DataFrame  # case_row, slot, criterion_id — the grid column of each current criterion
    models: list[str]  # sorted; `model_codes` index into it
    model_codes: np.ndarray  # (R,)
    case_rows: np.ndarray  # (R,) row of the response's case in `cases`
    n: np.ndarray  # (R,) criteria of the response's case
    valid: np.ndarray  # (R, W) position < n
    group1: np.ndarray  # (R, W) int8 group finals
    group2: np.ndarray
    gold: np.ndarray
    judges: dict[str, np.ndarray] = field(default_factory=dict)
    # Per judge and response: all the judge's decisions on it (placed on the grid or not), and how many are met.
    judge_rows: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # Distinct (response row, role column, user) of annotation and check labels; role column indexes RATER_COLUMNS.
    rater_keys: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    rubric_size: int = RUBRIC_SIZE
    physicians: PhysicianLayers | None = None

    @property
    def width(self) -> int:
        return self.valid.shape[1]

    @property
    def judge_decisions(self) -> dict[str, int]:
        return {name: int(decisions.sum()) for name, (decisions, _) in self.judge_rows.items()}

    @property
    def raters(self) -> pd.DataFrame:
        """model × annotators_g1/g2, checkers_g1/g2: distinct users with such labels on the model's responses."""
        result = pd.DataFrame(0, index=pd.Index(self.models, name="model"), columns=RATER_COLUMNS)
        if len(self.rater_keys) and self.models:
            rows, column, users = self.rater_keys.T
            distinct = np.unique(np.stack([self.model_codes[rows], column, users], axis=1), axis=0)
            for index, name in enumerate(RATER_COLUMNS):
                result[name] = np.bincount(distinct[distinct[:, 1] == index, 0], minlength=len(self.models))
        return result

    def subset(self, rows: np.ndarray) -> DecisionGrid:
        """The grid of the responses selected by the boolean mask `rows` (filters of the dashboard)."""
        index = np.flatnonzero(rows)
        new_row = np.full(len(rows), -1, dtype=np.int64)
        new_row[index] = np.arange(len(index))
        keys = self.rater_keys[rows[self.rater_keys[:, 0]]] if len(self.rater_keys) else self.rater_keys
        keys = keys.copy()
        keys[:, 0] = new_row[keys[:, 0]]
        responses = self.responses.iloc[index].reset_index(drop=True)
        models = sorted(responses["model"].unique().tolist())
        return DecisionGrid(
            responses=responses,
            cases=self.cases,
            criteria=self.criteria,
            models=models,
            model_codes=pd.Index(models).get_indexer(responses["model"].to_numpy()) if models else np.zeros(0, int),
            case_rows=self.case_rows[index],
            n=self.n[index],
            valid=self.valid[index],
            group1=self.group1[index],
            group2=self.group2[index],
            gold=self.gold[index],
            judges={name: values[index] for name, values in self.judges.items()},
            judge_rows={name: (d[index], m[index]) for name, (d, m) in self.judge_rows.items()},
            rater_keys=keys,
            rubric_size=self.rubric_size,
            physicians=self.physicians.take(index) if self.physicians is not None else None,
        )


# Building the grid -----------------------------------------------------------------------------


class RowLookup:
    """response_id → grid row (-1 when unknown); a direct table when ids are dense, as database ids are."""

    def __init__(self, response_ids: np.ndarray) -> None:
        response_ids = np.asarray(response_ids, dtype=np.int64)
        self.index = pd.Index(response_ids)
        self.table = None
        if len(response_ids) and response_ids.min() >= 0 and response_ids.max() <= 4 * len(response_ids) + 1024:
            self.table = np.full(int(response_ids.max()) + 2, -1, dtype=np.int64)
            self.table[response_ids] = np.arange(len(response_ids))

    def __call__(self, response_ids) -> np.ndarray:
        response_ids = np.asarray(response_ids)
        if self.table is None or response_ids.dtype.kind not in "iu":
            return self.index.get_indexer(response_ids)
        inside = (response_ids >= 0) & (response_ids < len(self.table) - 1)
        return self.table[np.where(inside, response_ids, len(self.table) - 1)]


class _Placer:
    """Maps (response_id, criterion_id) to a flat grid cell; -1 for decisions outside the current rubrics."""

    def __init__(
        self,
        responses: pd.DataFrame,
        case_rows: np.ndarray,
        criteria: pd.DataFrame,
        case_row_of_pk: pd.Index,
        width: int,
    ) -> None:
        self.width = width
        self.rows_of = RowLookup(responses["response_id"].to_numpy())
        self.case_rows = np.append(case_rows.astype(np.int64), 0)  # row -1 (unknown response) reads a dummy
        codes, names = pd.factorize(criteria["criterion_id"])
        self.names = pd.Index(names)
        self.n_names = max(len(names), 1)
        criterion_case_rows = case_row_of_pk.get_indexer(criteria["case_pk"].to_numpy())
        keys = criterion_case_rows.astype(np.int64) * self.n_names + codes
        slots = criteria["slot"].to_numpy(np.int64)
        n_keys = (int(case_rows.max()) + 1 if len(case_rows) else 1) * self.n_names
        if n_keys <= 50_000_000:
            # Few distinct criterion ids (c01..c30 in every case): a direct table beats a search.
            self.table = np.full(n_keys, -1, dtype=np.int64)
            inside = keys < n_keys
            self.table[keys[inside]] = slots[inside]
        else:
            self.table = None
            order = np.argsort(keys, kind="stable")
            self.sorted_keys, self.positions = keys[order], slots[order]

    def cells(self, response_ids, criterion_ids) -> np.ndarray:
        rows = self.rows_of(response_ids)
        # Hash the (string) criterion ids once, then look up only the few distinct ones.
        series = criterion_ids if isinstance(criterion_ids, pd.Series) else pd.Series(criterion_ids, dtype=object)
        local_codes, distinct = pd.factorize(series)
        lookup = np.append(self.names.get_indexer(pd.Index(np.asarray(distinct, dtype=object))), -1)
        codes = lookup[local_codes]
        known = (rows >= 0) & (codes >= 0)
        keys = np.where(known, self.case_rows[rows] * self.n_names + codes, 0)
        if self.table is not None:
            slot = self.table[keys] if len(self.table) else np.full(len(keys), -1)
        else:
            found = np.minimum(np.searchsorted(self.sorted_keys, keys), max(len(self.sorted_keys) - 1, 0))
            slot = (
                np.where(self.sorted_keys[found] == keys, self.positions[found], -1)
                if len(self.sorted_keys)
                else np.full(len(keys), -1)
            )
        known &= slot >= 0
        return np.where(known, rows * self.width + slot, -1)


def _fill(shape: tuple[int, int], cells: np.ndarray, met: np.ndarray) -> np.ndarray:
    grid = np.full(shape[0] * shape[1], MISSING, dtype=np.int8)
    placed = cells >= 0
    grid[cells[placed]] = met[placed]
    return grid.reshape(shape)


def _booleans(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(met, present) of a nullable boolean column."""
    return column.to_numpy(dtype=bool, na_value=False), column.notna().to_numpy()


def rubric_size(cases: pd.DataFrame) -> int:
    """The rubric size N of the report: the most common criteria count among cases that have a rubric."""
    counts = cases.loc[cases["n_criteria"] > 0, "n_criteria"] if "n_criteria" in cases else pd.Series(dtype=int)
    if counts.empty:
        return RUBRIC_SIZE
    frequency = counts.value_counts()
    return int(frequency[frequency == frequency.max()].index.max())


def prepare(frames: Frames) -> DecisionGrid:
    """Lay the frames' decisions out on the grid (group finals, gold, judges, rater counts)."""
    cases = frames.cases.reset_index(drop=True)
    case_row_of_pk = pd.Index(cases["case_pk"].to_numpy())
    responses = frames.responses.sort_values(["case_pk", "model"], kind="stable", ignore_index=True)
    case_rows = case_row_of_pk.get_indexer(responses["case_pk"].to_numpy())
    keep = case_rows >= 0
    responses, case_rows = responses[keep].reset_index(drop=True), case_rows[keep]
    n_of_case = cases["n_criteria"].to_numpy(np.int64) if "n_criteria" in cases else np.zeros(len(cases), np.int64)
    n = n_of_case[case_rows] if len(case_rows) else np.zeros(0, np.int64)
    responses = responses.assign(n=n)
    criteria = frames.criteria.sort_values(["case_pk", "position"], kind="stable", ignore_index=True)
    criteria = criteria.assign(slot=criteria.groupby("case_pk").cumcount().to_numpy())
    width = int(max(n.max() if len(n) else 0, criteria["slot"].max() + 1 if len(criteria) else 0, 1))
    shape = (len(responses), width)
    valid = np.arange(width)[None, :] < n[:, None]
    models = sorted(responses["model"].unique().tolist())
    model_codes = pd.Index(models).get_indexer(responses["model"].to_numpy()) if models else np.zeros(0, int)
    placer = _Placer(responses, case_rows, criteria, case_row_of_pk, width)

    decisions = decisions_with_finals(frames.labels)
    cells = placer.cells(decisions["response_id"].to_numpy(), decisions["criterion_id"])
    finals = []
    for column in ("group1", "group2"):
        met, present = _booleans(decisions[column])
        finals.append(_fill(shape, np.where(present, cells, -1), met))
    gold_met, gold_source = gold_values(decisions)
    gold = _fill(shape, np.where(gold_source != "", cells, -1), gold_met)

    criteria = criteria.assign(case_row=case_row_of_pk.get_indexer(criteria["case_pk"].to_numpy()))
    criteria = criteria[criteria["case_row"] >= 0]
    grid = DecisionGrid(
        responses=responses,
        cases=cases,
        criteria=criteria[["case_row", "slot", "criterion_id", *(["tags"] if "tags" in criteria else [])]],
        models=models,
        model_codes=model_codes,
        case_rows=case_rows,
        n=n,
        valid=valid,
        group1=finals[0],
        group2=finals[1],
        gold=gold,
        rubric_size=rubric_size(cases),
    )
    grid.rater_keys = _rater_keys(frames.labels, responses)
    label_cells = placer.cells(frames.labels["response_id"].to_numpy(), frames.labels["criterion_id"])
    grid.physicians = physician_layers(label_cells, frames.labels, shape, frames.users)
    _add_judges(grid, frames.judge, placer, shape)
    return grid


def physician_layers(
    cells: np.ndarray, labels: pd.DataFrame, shape: tuple[int, int], users: pd.DataFrame | None = None
) -> PhysicianLayers:
    """Lay the annotation and check labels of groups 1 and 2 on the grid.

    `cells` holds each label row's flat grid cell (-1 outside the current rubrics), as placed by the
    grid builder; a (response, criterion, stage, group) has at most one label.
    """
    size = shape[0] * shape[1]
    annotation = np.full((2, size), MISSING, dtype=np.int8)
    annotator = np.full((2, size), -1, dtype=np.int64)
    check = np.full((2, size), MISSING, dtype=np.int8)
    if len(labels):
        stage_codes, stage_names = pd.factorize(labels["stage"])
        stage_names = [str(name) for name in stage_names]
        group = labels["group_no"].to_numpy(np.int64)
        met = labels["met"].to_numpy(bool).astype(np.int8)
        users_of = labels["user_id"].to_numpy(np.int64) if "user_id" in labels else np.full(len(labels), -1)
        for stage, target in (("annotation", annotation), ("check", check)):
            if stage not in stage_names:
                continue
            of_stage = (stage_codes == stage_names.index(stage)) & (cells >= 0)
            for g in (1, 2):
                rows = of_stage & (group == g)
                target[g - 1, cells[rows]] = met[rows]
                if stage == "annotation":
                    annotator[g - 1, cells[rows]] = users_of[rows]
    names = {}
    if users is not None and len(users):
        names = dict(zip(users["user_id"].astype(np.int64).tolist(), users["username"].astype(str).tolist()))
    reshape = (2, *shape)
    return PhysicianLayers(annotation.reshape(reshape), annotator.reshape(reshape), check.reshape(reshape), names)


def _rater_keys(labels: pd.DataFrame, responses: pd.DataFrame) -> np.ndarray:
    """Distinct (response row, RATER_COLUMNS index, user_id) of the annotation and check labels in groups 1 and 2."""
    if labels.empty or responses.empty:
        return np.zeros((0, 3), dtype=np.int64)
    rows = RowLookup(responses["response_id"].to_numpy())(labels["response_id"].to_numpy())
    stage_codes, stage_names = pd.factorize(labels["stage"])
    stage_names = [str(name) for name in stage_names]
    group = labels["group_no"].to_numpy(np.int64)
    column = np.full(len(labels), -1, dtype=np.int64)
    for index, (stage, group_no) in enumerate(
        [(Stage.annotation, 1), (Stage.annotation, 2), (Stage.check, 1), (Stage.check, 2)]
    ):
        if stage in stage_names:
            column[(stage_codes == stage_names.index(stage)) & (group == group_no)] = index
    keep = (rows >= 0) & (column >= 0)
    users = labels["user_id"].to_numpy(np.int64)
    span = int(users.max()) + 1
    # Hash the combined key (cheaper than sorting 1.65 M rows), then split it again.
    distinct = pd.unique((rows[keep].astype(np.int64) * 4 + column[keep]) * span + users[keep])
    return np.stack([distinct // span // 4, distinct // span % 4, distinct % span], axis=1)


def _add_judges(grid: DecisionGrid, judge: pd.DataFrame, placer: _Placer, shape: tuple[int, int]) -> None:
    if judge is None or judge.empty:
        return
    names_codes, names = pd.factorize(judge["judge"])
    cells = placer.cells(judge["response_id"].to_numpy(), judge["criterion_id"])
    met = judge["met"].to_numpy(bool)
    rows = placer.rows_of(judge["response_id"].to_numpy())
    for code, name in enumerate(names):
        mine = names_codes == code
        grid.judges[str(name)] = _fill(shape, np.where(mine, cells, -1), met)
        on_response = mine & (rows >= 0)
        grid.judge_rows[str(name)] = (
            np.bincount(rows[on_response], minlength=shape[0]),
            np.bincount(rows[on_response], weights=met[on_response], minlength=shape[0]),
        )


# Sources and per-response scores ---------------------------------------------------------------


def parse_source(grid: DecisionGrid, source: str) -> np.ndarray:
    """The labels that score the models: gold, a group's finals, or one judge's decisions."""
    source = (source or GOLD).strip()
    if source == GOLD:
        return grid.gold
    if source == GROUP1:
        return grid.group1
    if source == GROUP2:
        return grid.group2
    if source.startswith(JUDGE_PREFIX):
        name = source[len(JUDGE_PREFIX) :]
        if name not in grid.judges:
            known = ", ".join(sorted(grid.judges)) or "none"
            raise ValidationFailed(f"--source {source}: no judge decisions named {name!r} (judges: {known})")
        return grid.judges[name]
    raise ValidationFailed(f"--source {source!r}: expected gold, group1, group2 or judge:NAME")


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
    labels = parse_source(grid, source)
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
        entry = {"judge": name, "n_decisions": grid.judge_decisions[name]}
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
    """|top-size(x) ∩ top-size(y)| / min(size, models both rank) (DESIGN §4); NaN when none."""
    x, y = _defined(x, y)
    if x.empty:
        return float("nan")
    return len(top_models(x, size) & top_models(y, size)) / min(size, len(x))


def _constant(values: np.ndarray) -> bool:
    return len(values) == 0 or bool(np.all(values == values[0]))


def correlation(kind: str, x, y) -> float:
    """Pearson, Spearman or Kendall τ-b; NaN for fewer than two points or constant input."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) < 2 or _constant(x) or _constant(y):
        return float("nan")
    func = {"pearson": stats.pearsonr, "spearman": stats.spearmanr, "kendall": stats.kendalltau}[kind]
    return float(func(x, y)[0])


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
