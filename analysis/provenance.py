"""report.json `rubric_provenance` (docs/REFERENCE.md §3.6, §4.3): what authors did with LLM drafts.

Over each drafted case's newest submitted or approved version (db.rubrics.provenance.provenance_rows),
per generator, author and macro-category (the first subject label, db.rules.taxonomy) and overall:
`n_cases`; `offered` = drafted criteria shown to authors (= drafted + edited + deleted); `drafted`
kept verbatim; `edited` derived from a draft; `written` with no drafted counterpart (what the draft
missed); `deleted` drafted criteria left out; `acceptance_rate` = (drafted + edited) / offered (null
when nothing was offered); `median_edit_distance` of the edited ones (null without any).
"""

from __future__ import annotations

import pandas as pd

from db.rubrics.provenance import ProvenanceRow, provenance_rows
from db.rules.taxonomy import get_taxonomy
from db.store.engine import session_scope

COLUMNS = ["case_id", "generator", "author", "macro_category", "origin", "edit_distance"]
ORIGIN_COUNTS = ("drafted", "edited", "written", "deleted")


def frame_of(rows: list[ProvenanceRow]) -> pd.DataFrame:
    taxonomy = get_taxonomy()
    return pd.DataFrame(
        [
            (
                row.case_id,
                row.generator,
                row.author,
                taxonomy.macro_category(row.subject_labels),
                row.origin,
                row.edit_distance,
            )
            for row in rows
        ],
        columns=COLUMNS,
    )


def load_provenance(engine) -> pd.DataFrame:
    """The provenance rows of the database as a frame (one row per origin)."""
    with session_scope(engine, read_only=True) as session:
        return frame_of(provenance_rows(session))


def figures(frame: pd.DataFrame) -> dict:
    """F of §3.6 over the rows of `frame`."""
    counts = {origin: int((frame["origin"] == origin).sum()) for origin in ORIGIN_COUNTS}
    offered = counts["drafted"] + counts["edited"] + counts["deleted"]
    edited = frame.loc[frame["origin"] == "edited", "edit_distance"].dropna()
    return {
        "n_cases": int(frame["case_id"].nunique()),
        "offered": offered,
        **counts,
        "acceptance_rate": (counts["drafted"] + counts["edited"]) / offered if offered else None,
        "median_edit_distance": float(edited.median()) if len(edited) else None,
    }


def section_json(frame: pd.DataFrame) -> dict:
    """`rubric_provenance`: overall, by_generator, by_author, by_macro_category (each key sorted)."""
    return {
        "overall": figures(frame),
        **{
            f"by_{name}": {
                str(value): figures(part) for value, part in sorted(frame.groupby(column), key=lambda x: str(x[0]))
            }
            for name, column in (("generator", "generator"), ("author", "author"), ("macro_category", "macro_category"))
        },
    }


def written_missed(frame: pd.DataFrame) -> pd.DataFrame:
    """Per macro-category, the criteria authors added that drafts missed, beside what they kept."""
    if frame.empty:
        return pd.DataFrame(columns=["macro_category", "n_cases", "written", "written_per_case"])
    grouped = frame.groupby("macro_category")
    table = pd.DataFrame(
        {
            "n_cases": grouped["case_id"].nunique(),
            "written": grouped["origin"].apply(lambda origins: int((origins == "written").sum())),
        }
    )
    table["written_per_case"] = table["written"] / table["n_cases"]
    return table.reset_index()
