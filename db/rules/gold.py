"""What counts as a group's final label and as gold (docs/REFERENCE.md §4), in one place.

Everything here works on a frame of label rows with the columns of `LABEL_COLUMNS` and is
vectorised, so the same rules serve a page's single response and the 1.65 M-decision report.

- Group final label of a decision for group g: g's check label if one exists, else its annotation label.
- Gold: the adjudication label if one exists; else, when both groups have a final label and they
  agree, that label ("agreement"); else, when exactly one group has one, that label ("single");
  else there is no gold yet (an unresolved disagreement).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from db.rules.enums import Stage
from db.rules.errors import ValidationFailed

DECISION = ["response_id", "criterion_id"]
LABEL_COLUMNS = [*DECISION, "stage", "group_no", "met"]

AGREEMENT, ADJUDICATED, SINGLE = "agreement", "adjudicated", "single"
#: Each decision's gold source as a category; "" (code 0) where it has no gold yet.
GOLD_SOURCES = ("", ADJUDICATED, AGREEMENT, SINGLE)
GOLD_COLUMNS = [*DECISION, "met", "source", "group1", "group2"]


def _decision_codes(labels: pd.DataFrame):
    """Each label row's decision number, and each decision's response_id and criterion_id.

    Decisions are numbered in (response_id, criterion_id) order; integer keys instead of a
    MultiIndex keep the 1.65 M-decision report fast.
    """
    criterion_codes, criterion_names = _factorize_sorted(labels["criterion_id"])
    width = max(len(criterion_names), 1)
    keys = labels["response_id"].to_numpy(np.int64) * width + criterion_codes
    codes, unique_keys = pd.factorize(keys, sort=True)
    return codes, unique_keys // width, criterion_names.take(unique_keys % width)


def _factorize_sorted(values: pd.Series):
    """Codes numbering the distinct values in sorted order (hashing first, then sorting the few distinct ones)."""
    codes, uniques = pd.factorize(values)
    order = np.argsort(np.asarray(uniques, dtype=object), kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], uniques.take(order)


def _stage_masks(labels: pd.DataFrame) -> dict[str, np.ndarray]:
    """Row masks of each stage (one hashing pass over the column)."""
    codes, uniques = pd.factorize(labels["stage"])
    names = [str(name) for name in uniques]
    return {stage: codes == (names.index(stage) if stage in names else -2) for stage in Stage}


def _labels_by_decision(labels: pd.DataFrame, codes: np.ndarray, n_decisions: int, mask: np.ndarray) -> np.ndarray:
    """Per decision: 1 met, 0 not met, -1 no label among the rows selected by `mask`."""
    values = np.full(n_decisions, -1, dtype=np.int8)
    values[codes[mask]] = labels["met"].to_numpy(bool)[mask]
    return values


def group_final_labels(labels: pd.DataFrame) -> pd.DataFrame:
    """One row per (decision, group) that has a final label: DECISION + group_no + met (+ stage)."""
    stages = _stage_masks(labels)
    is_check, is_annotation = stages[Stage.check], stages[Stage.annotation]
    keys = [*DECISION, "group_no"]
    keep = is_check.copy()
    if is_check.any():
        codes, response_ids, _ = _decision_codes(labels)
        group = labels["group_no"].to_numpy(np.int64)
        checked = np.zeros((len(response_ids), int(group.max()) + 1), dtype=bool)
        checked[codes[is_check], group[is_check]] = True
        keep |= is_annotation & ~checked[codes, group]
    else:
        keep |= is_annotation
    # Checks first, then the annotations no check replaces.
    order = np.concatenate([np.flatnonzero(is_check), np.flatnonzero(keep & ~is_check)])
    return labels.iloc[order][[*keys, "met", "stage"]].reset_index(drop=True)


def decisions_with_finals(labels: pd.DataFrame) -> pd.DataFrame:
    """Every decision that has any label: DECISION, group1, group2, adjudicated (nullable booleans)."""
    codes, response_ids, criterion_ids = _decision_codes(labels)
    n_decisions = len(response_ids)
    stages = _stage_masks(labels)
    is_annotation, is_check = stages[Stage.annotation], stages[Stage.check]
    group = labels["group_no"].to_numpy()
    columns = {}
    for group_no in (1, 2):
        in_group = group == group_no
        annotation = _labels_by_decision(labels, codes, n_decisions, in_group & is_annotation)
        check = _labels_by_decision(labels, codes, n_decisions, in_group & is_check)
        columns[f"group{group_no}"] = np.where(check >= 0, check, annotation)
    columns["adjudicated"] = _labels_by_decision(labels, codes, n_decisions, stages[Stage.adjudication])
    frame = pd.DataFrame({"response_id": response_ids, "criterion_id": criterion_ids})
    for name, values in columns.items():
        frame[name] = pd.arrays.BooleanArray(values == 1, values < 0)
    return frame


def gold_labels(labels: pd.DataFrame) -> pd.DataFrame:
    """Decisions that have gold, with `met`, `source` and each group's final label (GOLD_COLUMNS)."""
    return gold_from_decisions(decisions_with_finals(labels))


def gold_from_decisions(frame: pd.DataFrame) -> pd.DataFrame:
    """`gold_labels` of a `decisions_with_finals` frame (for callers that also need the finals)."""
    met, source = gold_values(frame)
    has_gold = source.codes != 0
    frame = frame.loc[has_gold].assign(met=met[has_gold], source=np.asarray(source[has_gold], dtype=object))
    return frame[GOLD_COLUMNS].reset_index(drop=True)


def gold_values(frame: pd.DataFrame) -> tuple[np.ndarray, pd.Categorical[str]]:
    """Per row of a `decisions_with_finals` frame: gold `met` and its `source` (`GOLD_SOURCES`; "" where
    there is no gold).

    The source is a categorical of one byte a decision: an array of strings is many times larger and
    holds the interpreter lock while it is filled."""
    g1, g2, adj = frame["group1"], frame["group2"], frame["adjudicated"]
    has1, has2, has_adj = g1.notna().to_numpy(), g2.notna().to_numpy(), adj.notna().to_numpy()
    met1, met2 = g1.to_numpy(dtype=bool, na_value=False), g2.to_numpy(dtype=bool, na_value=False)
    codes = np.zeros(len(frame), dtype=np.int8)
    codes[has1 ^ has2] = GOLD_SOURCES.index(SINGLE)
    codes[has1 & has2 & (met1 == met2)] = GOLD_SOURCES.index(AGREEMENT)
    codes[has_adj] = GOLD_SOURCES.index(ADJUDICATED)  # an adjudication outranks both
    met = np.where(has_adj, adj.to_numpy(dtype=bool, na_value=False), np.where(has1, met1, met2))
    return met.astype(bool), pd.Categorical.from_codes(codes, categories=pd.Index(GOLD_SOURCES))


def unresolved_disagreements(labels: pd.DataFrame) -> pd.DataFrame:
    """Decisions where both groups have a final label, they differ, and nobody adjudicated."""
    frame = decisions_with_finals(labels)
    both = frame["group1"].notna() & frame["group2"].notna()
    differ = both & (frame["group1"] != frame["group2"]).fillna(False)
    return frame.loc[differ & frame["adjudicated"].isna(), [*DECISION, "group1", "group2"]].reset_index(drop=True)


def complete_responses(gold: pd.DataFrame, criteria_per_response: pd.Series) -> pd.Index:
    """Responses all of whose N decisions have gold; `criteria_per_response` maps response_id → N."""
    have = gold.groupby("response_id")["criterion_id"].nunique()
    need = criteria_per_response.reindex(have.index)
    return have.index[(have == need).to_numpy()]


# Final and provisional gold (docs/REFERENCE.md §4.1) ---------------------------------------------

FINAL, PROVISIONAL = "final", "provisional"
#: The gold bases a figure, an export or a snapshot may stand on; the first is the default.
GOLD_BASES = (FINAL, PROVISIONAL)
#: The ranking minimum: complete responses a model needs to be ranked (docs/REFERENCE.md §4.1).
DEFAULT_MIN_RESPONSES = 20
#: A response's state on the way to final gold, as pages count them.
OPEN, PROVISIONAL_STATE, FINAL_STATE = "open", "provisional", "final"


def check_basis(basis: object, option: str = "--gold") -> str:
    """The gold basis named by `basis` (None: `default_basis()`); a one-line `ValidationFailed` for anything else."""
    if basis is None:
        return default_basis()
    if basis not in GOLD_BASES:
        raise ValidationFailed(
            f"{option} must be final or provisional, got {basis!r}",
            key="gold_basis.error.basis",
            params={"option": option, "value": repr(basis)},
        )
    return str(basis)


def default_basis() -> str:
    """The gold basis of figures nobody chose one for: `CLINCONSENSUS_GOLD_BASIS`, else final."""
    from db.rules.config import get_settings

    return check_basis(get_settings().gold_basis, "CLINCONSENSUS_GOLD_BASIS")


def default_min_responses() -> int:
    """The ranking minimum nobody chose: `CLINCONSENSUS_MIN_RESPONSES`, else 20."""
    from db.rules.config import get_settings

    return check_min_responses(get_settings().min_responses, "CLINCONSENSUS_MIN_RESPONSES")


def check_min_responses(value: object, option: str = "--min-responses") -> int:
    """The ranking minimum named by `value` (a whole number ≥ 1; None: `default_min_responses()`); a one-line
    `ValidationFailed` otherwise."""
    if value is None:
        return default_min_responses()
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValidationFailed(
            f"{option} must be a whole number of at least 1, got {value!r}",
            key="gold_basis.error.min_responses",
            params={"option": option, "value": repr(value)},
        )
    return int(value)


@dataclass(frozen=True)
class ResponseStates:
    """Per response: whether each group's labels are checked (column 0 → group 1), whether it is complete
    (every decision has gold) and whether it is final."""

    checked: np.ndarray  # (R, 2) bool
    complete: np.ndarray  # (R,) bool
    final: np.ndarray  # (R,) bool

    @property
    def provisional(self) -> np.ndarray:
        """Complete but not final: one group only, an unchecked group, or agreement not yet checked."""
        return self.complete & ~self.final


def response_states(
    rows: np.ndarray,
    n: np.ndarray,
    group1: np.ndarray,
    group2: np.ndarray,
    adjudicated: np.ndarray,
    check1: np.ndarray,
    check2: np.ndarray,
) -> ResponseStates:
    """The one definition of checked, complete and final (docs/REFERENCE.md §4.1), vectorised.

    One entry per decision of the current rubrics (each decision once): `rows` its response's number
    (0 ≤ row < len(n)); `group1`, `group2` the groups' final labels, `adjudicated` the adjudication and
    `check1`, `check2` each group's check label, each 1 met, 0 not met, -1 none. `n` is N per response.

    - A group's labels on a response are checked when the group has a check label on each of its N decisions.
    - Complete: every decision has gold (adjudicated; else both groups agree; else exactly one group has a label).
    - Final: each decision is adjudicated, or both groups' final labels agree while both groups are checked.
    """
    rows = np.asarray(rows, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    size = len(n)

    def per_response(mask: np.ndarray) -> np.ndarray:
        return np.bincount(rows[mask], minlength=size)

    has1, has2, has_adjudication = group1 >= 0, group2 >= 0, adjudicated >= 0
    agree = has1 & has2 & (group1 == group2)
    has_gold = has_adjudication | agree | (has1 ^ has2)
    some = n > 0
    checked = np.stack([some & (per_response(check1 >= 0) == n), some & (per_response(check2 >= 0) == n)], axis=1)
    complete = some & (per_response(has_gold) == n)
    all_adjudicated = per_response(has_adjudication) == n
    settled = per_response(has_adjudication | agree) == n
    final = some & (all_adjudicated | (settled & checked[:, 0] & checked[:, 1]))
    return ResponseStates(checked=checked, complete=complete, final=final)


def gold_states(labels: pd.DataFrame, n_of_response: pd.Series, finals: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per response of `n_of_response` (response_id → N): checked1, checked2, complete, final and `state`
    (OPEN, PROVISIONAL_STATE or FINAL_STATE), from its counting label rows (LABEL_COLUMNS; labels of the
    current rubric only). The per-response reading of `response_states`, for pages and commands;
    `finals`: `decisions_with_finals(labels)` when the caller has it already (the same `labels`)."""
    response_ids = pd.Index(n_of_response.index.to_numpy(np.int64))
    n = n_of_response.to_numpy(np.int64)
    if finals is None or not labels["response_id"].isin(response_ids).all():
        labels = labels.loc[labels["response_id"].isin(response_ids)]
        finals = None
    if len(labels):
        codes, decision_responses, _ = _decision_codes(labels)
        n_decisions = len(decision_responses)
        stages = _stage_masks(labels)
        group = labels["group_no"].to_numpy()
        checks = [_labels_by_decision(labels, codes, n_decisions, (group == g) & stages[Stage.check]) for g in (1, 2)]
        finals = decisions_with_finals(labels) if finals is None else finals
        arrays = [
            np.where(finals[column].notna(), finals[column].to_numpy(dtype=bool, na_value=False), -1)
            for column in ("group1", "group2", "adjudicated")
        ]
        rows = response_ids.get_indexer(decision_responses)
    else:
        rows, arrays, checks = np.zeros(0, np.int64), [np.zeros(0, np.int8)] * 3, [np.zeros(0, np.int8)] * 2
    states = response_states(rows, n, *arrays, *checks)
    state = np.where(states.final, FINAL_STATE, np.where(states.complete, PROVISIONAL_STATE, OPEN))
    return pd.DataFrame(
        {
            "response_id": response_ids,
            "checked1": states.checked[:, 0],
            "checked2": states.checked[:, 1],
            "complete": states.complete,
            "final": states.final,
            "state": state,
        }
    )
