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

#: Fewer complete responses than this: no item–rest value and no redundancy for the case's criteria.
MIN_RESPONSES = 5


def complete_rows(grid: DecisionGrid) -> np.ndarray:
    """The responses whose gold the quality figures read: the complete ones (the one place this is decided)."""
    return complete_mask(grid, grid.gold)


def case_matrix_quality(met: np.ndarray) -> tuple[list[float | None], list[list[int]]]:
    """For a (responses × criteria) 0/1 matrix of one case: each column's item–rest correlation (None when
    either side is constant or there are fewer than MIN_RESPONSES rows) and the other columns identical to it
    (none for a constant column)."""
    rows, width = met.shape
    if rows < MIN_RESPONSES:
        return [None] * width, [[] for _ in range(width)]
    met = met.astype(np.float64)
    total = met.sum(axis=1)
    values: list[float | None] = []
    for column in range(width):
        item = met[:, column]
        rest = total - item
        if item.min() == item.max() or rest.min() == rest.max():
            values.append(None)
            continue
        values.append(float(np.corrcoef(item, rest)[0, 1]))
    constant = met.min(axis=0) == met.max(axis=0)
    same = (met[:, :, None] == met[:, None, :]).all(axis=0)
    redundant = [
        [] if constant[column] else [other for other in np.flatnonzero(same[column]).tolist() if other != column]
        for column in range(width)
    ]
    return values, redundant


def criteria_quality(grid: DecisionGrid) -> pd.DataFrame:
    """case_id, criterion_id, item_rest (float or None), redundant_with (criterion ids) of every current criterion."""
    complete = complete_rows(grid)
    criteria = grid.criteria.sort_values(["case_row", "slot"])
    case_ids = grid.cases["case_id"].tolist()
    records: list[tuple[str, str, float | None, list[str]]] = []
    for _key, group in criteria.groupby("case_row", sort=True):
        case_row = int(group["case_row"].iloc[0])
        slots = group["slot"].to_numpy()
        ids = group["criterion_id"].tolist()
        rows = complete & (grid.case_rows == case_row)
        values, redundant = case_matrix_quality((grid.gold[rows][:, slots] == MET).astype(np.int8))
        for index, criterion_id in enumerate(ids):
            records.append(
                (case_ids[case_row], criterion_id, values[index], [ids[other] for other in redundant[index]])
            )
    return pd.DataFrame(records, columns=["case_id", "criterion_id", "item_rest", "redundant_with"])


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
    flags: dict[str, list[str]] = {}
    for criterion in ids:
        marks = []
        if by_anchor.get(REFERENCE, {}).get(criterion) is False:
            marks.append(REFERENCE_NOT_MET)
        if any(by_anchor.get(anchor, {}).get(criterion) is True for anchor in WEAK_ANCHORS):
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
