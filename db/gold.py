"""What counts as a group's final label and as gold (DESIGN §4), in one place.

Everything here works on a frame of label rows with the columns of `LABEL_COLUMNS` and is
vectorised, so the same rules serve a page's single response and the 1.65 M-decision report.

- Group final label of a decision for group g: g's check label if one exists, else its annotation label.
- Gold: the adjudication label if one exists; else, when both groups have a final label and they
  agree, that label ("agreement"); else, when exactly one group has one, that label ("single");
  else there is no gold yet (an unresolved disagreement).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from db.models import Stage

DECISION = ["response_id", "criterion_id"]
LABEL_COLUMNS = [*DECISION, "stage", "group_no", "met"]

AGREEMENT, ADJUDICATED, SINGLE = "agreement", "adjudicated", "single"
GOLD_COLUMNS = [*DECISION, "met", "source", "group1", "group2"]


def group_final_labels(labels: pd.DataFrame) -> pd.DataFrame:
    """One row per (decision, group) that has a final label: DECISION + group_no + met (+ stage)."""
    checks = labels[labels["stage"] == Stage.check]
    annotations = labels[labels["stage"] == Stage.annotation]
    keys = [*DECISION, "group_no"]
    if len(checks):
        checked = pd.MultiIndex.from_frame(checks[keys])
        annotations = annotations[~pd.MultiIndex.from_frame(annotations[keys]).isin(checked)]
    final = pd.concat([checks, annotations], ignore_index=True)
    return final[[*keys, "met", "stage"]]


def _group_column(final: pd.DataFrame, group_no: int) -> pd.Series:
    part = final[final["group_no"] == group_no]
    return pd.Series(part["met"].to_numpy(), index=pd.MultiIndex.from_frame(part[DECISION]), name=f"group{group_no}")


def decisions_with_finals(labels: pd.DataFrame) -> pd.DataFrame:
    """Every decision that has any label: DECISION, group1, group2, adjudicated (nullable booleans)."""
    final = group_final_labels(labels)
    adjudications = labels[labels["stage"] == Stage.adjudication]
    adjudicated = pd.Series(adjudications["met"].to_numpy(), index=pd.MultiIndex.from_frame(adjudications[DECISION]),
                            name="adjudicated")
    frame = pd.concat([_group_column(final, 1), _group_column(final, 2), adjudicated], axis=1)
    frame.index.names = DECISION
    frame = frame.astype("boolean").reset_index()
    return frame


def gold_labels(labels: pd.DataFrame) -> pd.DataFrame:
    """Decisions that have gold, with `met`, `source` and each group's final label (GOLD_COLUMNS)."""
    frame = decisions_with_finals(labels)
    g1, g2, adj = frame["group1"], frame["group2"], frame["adjudicated"]
    has1, has2, has_adj = g1.notna().to_numpy(), g2.notna().to_numpy(), adj.notna().to_numpy()
    agree = (has1 & has2) & (g1.fillna(False).to_numpy() == g2.fillna(False).to_numpy())
    single = has1 ^ has2
    source = np.select([has_adj, agree, single], [ADJUDICATED, AGREEMENT, SINGLE], default="")
    met = np.where(has_adj, adj.fillna(False).to_numpy(),
                   np.where(has1, g1.fillna(False).to_numpy(), g2.fillna(False).to_numpy()))
    frame["met"] = met.astype(bool)
    frame["source"] = source
    return frame.loc[source != "", GOLD_COLUMNS].reset_index(drop=True)


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
