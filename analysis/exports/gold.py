"""The gold export (docs/REFERENCE.md §3.5).

One row per decision that has a gold label, with both groups' final labels and whether its response is
final (docs/REFERENCE.md §4.1). Under the final basis (the default) only decisions of final responses are
written, and a group's labels only where that group's labels on the response are checked; under the
provisional basis every decision that has gold.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy.engine import Engine

from analysis.exports.current_frames import (
    current_criteria,
    in_decision_order,
    on_basis,
    response_gold_states,
    response_keys,
)
from analysis.exports.export_summary import ExportSummary
from analysis.exports.file_writers import (
    BOOLEAN_TEXTS,
    chosen_texts,
    json_texts_arrow,
    nullable_codes,
    sha256_file,
    write_joined,
)
from analysis.exports.manifest import export_head, write_manifest
from analysis.exports.paths import output_file
from analysis.loader import load_label_decisions
from db.rules.gold import check_basis, decisions_with_finals, gold_from_decisions
from db.rules.progress_report import Progress, no_progress

# gold -----------------------------------------------------------------------------------------


def gold_frame(engine: Engine, basis: str | None = None) -> pd.DataFrame:
    """Every decision with gold on gold basis `basis`, in export order: case_id, model, criterion_id, met,
    source, group1, group2, final."""
    labels = load_label_decisions(engine)
    decisions = decisions_with_finals(labels)
    keys, criteria = response_keys(engine), current_criteria(engine)
    states = response_gold_states(labels, keys, criteria, decisions)
    del labels
    gold = on_basis(gold_from_decisions(decisions), states, check_basis(basis))
    frame = gold.merge(keys, on="response_id", how="inner")
    # Left join: a gold decision on a criterion outside the current rubric is still gold; it sorts last.
    frame = frame.merge(criteria, on=["case_pk", "criterion_id"], how="left")
    return in_decision_order(frame)


def export_gold(
    engine: Engine, path: Path, progress: Progress = no_progress, *, basis: str | None = None
) -> ExportSummary:
    """`export gold FILE`: one JSON line per decision that has gold on gold basis `basis` (docs/REFERENCE.md §3.5)."""
    basis = check_basis(basis)
    path = output_file(path)
    progress(0, None, "reading labels")
    head = export_head(engine)
    frame = gold_frame(engine, basis)
    rows = len(frame)
    progress(0, rows, "gold rows")
    parts = [
        '{"case_id": ',
        json_texts_arrow(frame["case_id"]),
        ', "model": ',
        json_texts_arrow(frame["model"]),
        ', "criterion_id": ',
        json_texts_arrow(frame["criterion_id"]),
        ', "met": ',
        chosen_texts(frame["met"].to_numpy(bool).astype(np.int64), BOOLEAN_TEXTS),
        ', "source": ',
        json_texts_arrow(frame["source"]),
        ', "group1": ',
        chosen_texts(nullable_codes(frame["group1"]), BOOLEAN_TEXTS),
        ', "group2": ',
        chosen_texts(nullable_codes(frame["group2"]), BOOLEAN_TEXTS),
        ', "final": ',
        chosen_texts(frame["final"].to_numpy(bool).astype(np.int64), BOOLEAN_TEXTS),
        "}",
    ]
    write_joined(path, parts, rows)
    progress(rows, rows, "gold rows")
    by_source = frame["source"].value_counts().sort_index()
    files = {path.name: sha256_file(path)}
    write_manifest(path, export="gold", head=head, files=files, rows=rows, gold_basis=basis)
    return ExportSummary(
        "gold",
        path,
        counts={
            "rows": rows,
            "gold basis": basis,
            "by source": {str(k): int(v) for k, v in by_source.items()},
            "responses": int(frame[["case_id", "model"]].drop_duplicates().shape[0]) if rows else 0,
        },
        files=files,
    )


# release --------------------------------------------------------------------------------------
