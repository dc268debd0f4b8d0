"""The report's keys of rubric quality (docs/REFERENCE.md §3.6, §4.2): `rubric_validity`, and `item_rest` and
`redundant_with` in each entry of `criteria`.

The anchor decisions are read through db.work.validation (the newest validation run on each rubric version);
the figures are `analysis.rubric_quality`'s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy.engine import Engine

from analysis.grid import DecisionGrid
from analysis.json_values import number, numbers
from analysis.rubric_quality import ValidityInput, rubric_validity
from db.store.current_rubric import current_version_ids
from db.work.validation import newest_anchor_decisions


def load_validity(engine: Engine, grid: DecisionGrid, k: int) -> dict:
    """`rubric_validity` of every case whose current rubric version has a validation run."""
    with engine.connect().execution_options(sqlite_read_only=True) as connection:  # a reader never queues
        current = current_version_ids(connection)
        rows = newest_anchor_decisions(connection)
    return validity_of(grid, rows, current, k)


def validity_of(grid: DecisionGrid, rows: list[dict], current: dict[int, int], k: int) -> dict:
    """`rubric_validity` from anchor decision rows, with the rubric order of each case as the grid has it."""
    case_pks = grid.cases["case_pk"].to_numpy(np.int64)
    ordered = grid.criteria.sort_values(["case_row", "slot"])
    criteria: dict[int, list[str]] = {}
    for case_pk, criterion_id in zip(
        case_pks[ordered["case_row"].to_numpy(np.int64)].tolist(), ordered["criterion_id"].tolist()
    ):
        version_id = current.get(case_pk)
        if version_id is not None:
            criteria.setdefault(version_id, []).append(criterion_id)
    case_ids = dict(zip(grid.cases["case_pk"].astype(int).tolist(), grid.cases["case_id"].tolist()))
    validity = rubric_validity(ValidityInput(rows, current, criteria, case_ids), k)
    for entry in validity.values():
        entry["reference_cacs"] = number(entry["reference_cacs"])
        entry["gap"] = number(entry["gap"])
    return validity


def add_quality(criteria: dict, quality: pd.DataFrame) -> None:
    """Each entry of report.json's `criteria` gets its `item_rest` and `redundant_with`."""
    for case_id, criterion_id, item_rest, redundant in zip(
        quality["case_id"].tolist(),
        quality["criterion_id"].tolist(),
        numbers(quality["item_rest"]),
        quality["redundant_with"].tolist(),
    ):
        entry = criteria.get(case_id, {}).get(criterion_id)
        if entry is not None:
            entry["item_rest"] = item_rest
            entry["redundant_with"] = list(redundant)
