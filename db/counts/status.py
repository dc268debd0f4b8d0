"""A response's status figures from its labels, by the rules of db.rules.gold: the decisions both groups labeled,
those where the groups' final labels differ, those of them nobody adjudicated, and those with gold.

pandas, numpy and db.rules.gold are imported where used: a command that never counts should not pay for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from db.counts.tables import STATUS_COLUMNS

if TYPE_CHECKING:
    import pandas as pd


def label_frame(rows: Sequence[Any]) -> pd.DataFrame:
    """Label rows (response_id, criterion_id, stage, group_no, met) as the frame db.rules.gold reads."""
    import pandas as pd

    from db.rules import gold

    frame = pd.DataFrame(rows, columns=gold.LABEL_COLUMNS)
    frame["met"] = frame["met"].astype(bool)
    frame["stage"] = frame["stage"].astype(str)
    return frame


def status_of_labels(labels: pd.DataFrame) -> pd.DataFrame:
    """Per response of `labels` (rows of gold.LABEL_COLUMNS): STATUS_COLUMNS, by the rules of db.rules.gold."""
    import pandas as pd

    return pd.DataFrame(status_rows(labels), columns=STATUS_COLUMNS).astype(object)


def status_rows(labels: pd.DataFrame) -> list[tuple[int, ...]]:
    """`status_of_labels` as (response_id, n_compared, n_differing, n_unresolved, n_gold) tuples.

    Summed with numpy: a save refreshes one response, where a pandas group-by cost more than the rules.
    """
    import numpy as np

    from db.rules import gold

    if labels.empty:
        return []
    finals = gold.decisions_with_finals(labels)
    both = (finals["group1"].notna() & finals["group2"].notna()).to_numpy()
    differ = both & (finals["group1"] != finals["group2"]).fillna(False).to_numpy(dtype=bool)
    unresolved = differ & finals["adjudicated"].isna().to_numpy()
    _met, source = gold.gold_values(finals)
    response_ids = finals["response_id"].to_numpy(np.int64)
    # Decisions come in (response_id, criterion_id) order, so each response's decisions are one run.
    starts = np.flatnonzero(np.r_[True, response_ids[1:] != response_ids[:-1]])
    sums = [np.add.reduceat(values.astype(np.int64), starts) for values in (both, differ, unresolved, source != "")]
    return list(zip(response_ids[starts].tolist(), *(column.tolist() for column in sums)))
