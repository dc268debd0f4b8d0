"""The decision grid: every decision of every response laid out as array cells (pure).

`prepare(frames)` places one row per response and one column per criterion position of its
case's current approved rubric, holding 1 (met), 0 (not met) or -1 (no label) for each group's
final label, gold and each judge (the rules of `db.rules.gold`). The metrics in `analysis.metrics`
are array arithmetic over this grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from analysis.frames import Frames
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import Stage
from db.rules.gold import FINAL, PROVISIONAL, check_basis, decisions_with_finals, gold_values, response_states

MISSING, NOT_MET, MET = -1, 0, 1
RATER_COLUMNS = ("annotators_g1", "annotators_g2", "checkers_g1", "checkers_g2")


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
    # model, response_id of the calibration samples (frames.calibration), for the calibrated scores.
    calibration: pd.DataFrame | None = None
    # Per response (db.rules.gold.response_states): each group's labels checked (R, 2), final (R,).
    checked: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=bool))
    final: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    # The gold basis of `gold`, `group1` and `group2` (see `on_basis`).
    basis: str = PROVISIONAL

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

    def on_basis(self, basis: str) -> DecisionGrid:
        """This grid on gold basis `basis` (docs/REFERENCE.md §4.1). Under `final`, gold stays only on final
        responses (so "complete" means final) and a group's final labels only on responses where that group's
        labels are checked; the other layers (judges, physicians' own labels) are shared, not copied."""
        check_basis(basis)
        if basis == self.basis or basis == PROVISIONAL:
            return self
        return replace(
            self,
            gold=np.where(self.final[:, None], self.gold, np.int8(MISSING)),
            group1=np.where(self.checked[:, :1], self.group1, np.int8(MISSING)),
            group2=np.where(self.checked[:, 1:], self.group2, np.int8(MISSING)),
            basis=FINAL,
        )

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
            calibration=self.calibration,
            checked=self.checked[index],
            final=self.final[index],
            basis=self.basis,
        )


# Building the grid -----------------------------------------------------------------------------


class RowLookup:
    """response_id → grid row (-1 when unknown); a direct table when ids are dense, as database ids are."""

    def __init__(self, response_ids: np.ndarray) -> None:
        response_ids = np.asarray(response_ids, dtype=np.int64)
        self.index = pd.Index(response_ids)
        self.table = None
        if len(response_ids) and response_ids.min() >= 0 and response_ids.max() <= 4 * len(response_ids) + 1024:
            # Entry id + 1 holds the row of id; the first and the last entry say -1, so a clipped lookup of an id
            # below 0 or past the largest answers -1 in one pass over the ids.
            self.table = np.full(int(response_ids.max()) + 3, -1, dtype=np.int64)
            self.table[response_ids + 1] = np.arange(len(response_ids))

    def __call__(self, response_ids) -> np.ndarray:
        response_ids = np.asarray(response_ids)
        if self.table is None or response_ids.dtype.kind not in "iu":
            return self.index.get_indexer(response_ids)
        shifted = response_ids.astype(np.int64) + 1
        return np.take(self.table, shifted, mode="clip")


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
        criterion_case_rows = case_row_of_pk.get_indexer(pd.Index(criteria["case_pk"]))
        keys = criterion_case_rows.astype(np.int64) * self.n_names + codes
        slots = criteria["slot"].to_numpy(np.int64)
        n_keys = (int(case_rows.max()) + 1 if len(case_rows) else 1) * self.n_names
        if n_keys <= 50_000_000:
            # Few distinct criterion ids (c01..c30 in every case): a direct table beats a search.
            self.table: np.ndarray | None = np.full(n_keys, -1, dtype=np.int64)
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
        del local_codes
        known = (rows >= 0) & (codes >= 0)
        # In place where it can be: with millions of rows each temporary is tens of MB.
        keys = self.case_rows[rows]
        keys *= self.n_names
        keys += codes
        del codes
        keys[~known] = 0
        if self.table is not None:
            slot = self.table[keys] if len(self.table) else np.full(len(keys), -1)
        else:
            found = np.minimum(np.searchsorted(self.sorted_keys, keys), max(len(self.sorted_keys) - 1, 0))
            slot = (
                np.where(self.sorted_keys[found] == keys, self.positions[found], -1)
                if len(self.sorted_keys)
                else np.full(len(keys), -1)
            )
        del keys
        known &= slot >= 0
        cells = rows.astype(np.int64)
        cells *= self.width
        cells += slot
        cells[~known] = -1
        return cells


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
    adjudicated_met, adjudicated_present = _booleans(decisions["adjudicated"])
    adjudicated = _fill(shape, np.where(adjudicated_present, cells, -1), adjudicated_met)
    del decisions, cells, gold_met, gold_source, adjudicated_met, adjudicated_present  # freed before the rater layers

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
        calibration=frames.calibration,
    )
    grid.rater_keys = _rater_keys(frames.labels, responses)
    label_cells = placer.cells(frames.labels["response_id"].to_numpy(), frames.labels["criterion_id"])
    grid.physicians = physician_layers(label_cells, frames.labels, shape, frames.users)
    grid.checked, grid.final = grid_states(grid, adjudicated)
    _add_judges(grid, frames.judge, placer, shape)
    return grid


def grid_states(grid: DecisionGrid, adjudicated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per response: (checked (R, 2), final (R,)) by `db.rules.gold.response_states`, over the grid's cells."""
    rows, slots = np.nonzero(grid.valid)
    check = grid.physicians.check if grid.physicians is not None else np.full((2, *grid.valid.shape), MISSING)
    states = response_states(
        rows,
        grid.n,
        grid.group1[rows, slots],
        grid.group2[rows, slots],
        adjudicated[rows, slots],
        check[0][rows, slots],
        check[1][rows, slots],
    )
    return states.checked, states.final


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
        stage_codes, stage_values = pd.factorize(labels["stage"])
        stage_names = [str(name) for name in stage_values]
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
    stage_codes, stage_values = pd.factorize(labels["stage"])
    stage_names = [str(name) for name in stage_values]
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
