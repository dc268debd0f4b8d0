"""Rubric quality (docs/REFERENCE.md §4.2): anchor validity, item–rest correlation and redundancy of criteria.

Pure: the grid and plain rows in, numbers out. `criteria_quality` reads gold over each case's complete
responses — "complete" is read in one place here, `complete_rows` — and gives each criterion its
corrected item–total (item–rest) correlation and the criteria whose gold vector is identical to its own.
`rubric_validity` turns the anchor decisions of the newest validation run on each case's current rubric
version into the case's s per anchor, the reference's CACS@k, the gap, and the flags of each criterion.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.grid import MET, DecisionGrid
from analysis.metrics import cacs, complete_mask
from db.rules.anchors import REFERENCE, REFERENCE_NOT_MET, WEAK_ANCHORS, WEAK_MET

#: No other criterion (one shared object: a list per criterion costs garbage-collector passes at full scale).
_NONE: tuple[str, ...] = ()
#: Fewer complete responses than this: no item–rest value and no redundancy for the case's criteria.
MIN_RESPONSES = 5


def complete_rows(grid: DecisionGrid) -> np.ndarray:
    """The responses whose gold the quality figures read: the complete ones (the one place this is decided)."""
    return complete_mask(grid, grid.gold)


def criteria_quality(grid: DecisionGrid) -> pd.DataFrame:
    """case_id, criterion_id, item_rest (float or NaN), redundant_with (criterion ids) of every current criterion.

    Cases with the same number of complete responses and criteria are computed together, as one
    (cases × responses × criteria) array, not in a loop over cases.
    Item–rest is NaN with fewer than MIN_RESPONSES complete responses or a constant side; a constant
    criterion is redundant with none."""
    complete = np.flatnonzero(complete_rows(grid))
    complete = complete[np.argsort(grid.case_rows[complete], kind="stable")]
    case_of = grid.case_rows[complete]
    criteria = grid.criteria.sort_values(["case_row", "slot"], kind="stable")
    case_rows = criteria["case_row"].to_numpy(np.int64)
    slots = criteria["slot"].to_numpy(np.int64)
    ids = criteria["criterion_id"].to_numpy(object)
    starts = np.flatnonzero(np.r_[True, case_rows[1:] != case_rows[:-1]]) if len(case_rows) else np.zeros(0, np.int64)
    widths = np.diff(np.r_[starts, len(case_rows)])
    block_cases = case_rows[starts]
    firsts = np.searchsorted(case_of, block_cases)
    counts = np.searchsorted(case_of, block_cases + 1) - firsts
    item_rest = np.full(len(case_rows), np.nan)
    redundant: dict[int, tuple[str, ...]] = {}
    for count, width in {(int(c), int(w)) for c, w in zip(counts, widths) if c >= MIN_RESPONSES}:
        chosen = np.flatnonzero((counts == count) & (widths == width))
        rows = complete[firsts[chosen][:, None] + np.arange(count)]  # (cases, responses)
        columns = slots[starts[chosen][:, None] + np.arange(width)]  # (cases, criteria)
        met = (grid.gold[rows[:, :, None], columns[:, None, :]] == MET).astype(np.float64)
        rest = met.sum(axis=2, keepdims=True) - met
        item_c, rest_c = met - met.mean(axis=1, keepdims=True), rest - rest.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = (item_c * rest_c).sum(axis=1) / np.sqrt((item_c**2).sum(axis=1) * (rest_c**2).sum(axis=1))
        flat = met.min(axis=1) == met.max(axis=1)
        r[flat | (rest.min(axis=1) == rest.max(axis=1))] = np.nan
        positions = starts[chosen][:, None] + np.arange(width)
        item_rest[positions] = np.clip(r, -1.0, 1.0)
        if count <= 62:  # each column's vector as one integer (bit i: response i met it)
            keys = (met.astype(np.int64) << np.arange(count, dtype=np.int64)[None, :, None]).sum(axis=1)
            same = keys[:, :, None] == keys[:, None, :]
        else:
            same = (met[:, :, :, None] == met[:, :, None, :]).all(axis=1)
        same &= ~np.eye(width, dtype=bool) & ~flat[:, :, None]
        for case, column, other in np.argwhere(same).tolist():
            position = int(positions[case, column])
            redundant[position] = (*redundant.get(position, ()), str(ids[positions[case, other]]))
    case_ids = grid.cases["case_id"].to_numpy(object)
    return pd.DataFrame(
        {
            "case_id": case_ids[case_rows] if len(case_rows) else [],
            "criterion_id": ids,
            "item_rest": item_rest,
            "redundant_with": [redundant.get(position, _NONE) for position in range(len(case_rows))],
        },
        columns=["case_id", "criterion_id", "item_rest", "redundant_with"],
    )


@dataclass(frozen=True)
class ValidityInput:
    """What `rubric_validity` reads: the anchor decisions (rows of db.work.validation.newest_anchor_decisions),
    each case's current rubric version and its criteria in order, and case ids."""

    decisions: list[dict]
    current: Mapping[int, int]  # case pk → current approved version id
    criteria: Mapping[int, list[str]]  # version id → criterion ids in rubric order
    case_ids: Mapping[int, str]  # case pk → case_id


def _anchor_s(decided: dict[str, bool | None], ids: list[str]) -> int | None:
    """Criteria met by an anchor, when the judge decided every one of the rubric's criteria for it."""
    if any(decided.get(criterion) is None for criterion in ids):
        return None
    return sum(bool(decided[criterion]) for criterion in ids)


def case_validity(by_anchor: dict[str, dict[str, bool | None]], ids: list[str], k: int) -> dict:
    """One case's entry of `rubric_validity` (without judge and version), from anchor → criterion → met."""
    n = len(ids)
    reference = _anchor_s(by_anchor[REFERENCE], ids) if REFERENCE in by_anchor else None
    weak = {anchor: _anchor_s(by_anchor.get(anchor, {}), ids) for anchor in WEAK_ANCHORS}
    known_weak = [value for value in weak.values() if value is not None]
    gap = None
    if reference is not None and len(known_weak) == len(WEAK_ANCHORS) and n:
        gap = (reference - max(known_weak)) / n
    said_by_reference = by_anchor.get(REFERENCE, {})
    said_by_weak = [by_anchor.get(anchor, {}) for anchor in WEAK_ANCHORS]
    flags: dict[str, list[str]] = {}
    for criterion in ids:
        marks = []
        if said_by_reference.get(criterion) is False:
            marks.append(REFERENCE_NOT_MET)
        if any(said.get(criterion) is True for said in said_by_weak):
            marks.append(WEAK_MET)
        if marks:
            flags[criterion] = marks
    return {
        "reference_s": reference,
        "reference_cacs": None if reference is None else float(cacs(np.array([reference]), np.array([n]), k)[0]),
        "weak": weak,
        "gap": gap,
        "flags": flags,
    }


def rubric_validity(source: ValidityInput, k: int) -> dict:
    """case_id → {reference_s, reference_cacs, weak, gap, judge, rubric_version, flags} of every case whose current
    rubric version has a validation run (the newest one), in case order by pk."""
    grouped: dict[int, dict] = {}
    for row in source.decisions:
        case_pk = row["case_pk"]
        if source.current.get(case_pk) != row["rubric_version_id"]:
            continue
        entry = grouped.setdefault(case_pk, {"judge": row["judge"], "version": row["version"], "anchors": {}})
        entry["anchors"].setdefault(row["anchor"], {})[row["criterion_id"]] = row["met"]
    result = {}
    for case_pk in sorted(grouped):
        entry = grouped[case_pk]
        ids = list(source.criteria.get(source.current[case_pk], []))
        figures = case_validity(entry["anchors"], ids, k)
        result[source.case_ids[case_pk]] = {
            **{key: figures[key] for key in ("reference_s", "reference_cacs", "weak", "gap")},
            "judge": entry["judge"],
            "rubric_version": entry["version"],
            "flags": figures["flags"],
        }
    return result


def flag_counts(validity: Mapping[str, dict], macro_of: Mapping[str, str]) -> pd.DataFrame:
    """macro_category, flag, n_criteria, n_cases: the flagged criteria of `validity` by macro-category."""
    rows = []
    for case_id, entry in validity.items():
        for marks in entry["flags"].values():
            for flag in marks:
                rows.append((macro_of.get(case_id, "other"), flag, case_id))
    frame = pd.DataFrame(rows, columns=["macro_category", "flag", "case_id"])
    if frame.empty:
        return pd.DataFrame(columns=["macro_category", "flag", "n_criteria", "n_cases"])
    grouped = frame.groupby(["macro_category", "flag"], sort=True)
    return grouped.agg(n_criteria=("case_id", "size"), n_cases=("case_id", "nunique")).reset_index()


def cases_below_k(validity: Mapping[str, dict], k: int) -> list[tuple[str, int]]:
    """(case_id, reference_s) of the cases whose reference answer meets fewer than k criteria."""
    return [
        (case_id, int(entry["reference_s"]))
        for case_id, entry in validity.items()
        if entry["reference_s"] is not None and entry["reference_s"] < k
    ]


def reasons(
    flags: Iterable[str], redundant_with: Iterable[str], positions: Mapping[str, int]
) -> list[tuple[str, dict]]:
    """The one-line reasons a page shows for a criterion, as (catalog key, params)."""
    lines: list[tuple[str, dict]] = []
    for flag in flags:
        lines.append((f"rubric_quality.reason.{flag}", {}))
    for other in redundant_with:
        lines.append(("rubric_quality.reason.redundant", {"position": positions.get(other, other)}))
    return lines
