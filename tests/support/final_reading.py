"""Final responses by a literal reading of docs/REFERENCE.md §4.1 over raw label rows, for tests that check
a figure on the final basis without the product's gold code."""

from __future__ import annotations

import pandas as pd


def final_responses(labels: pd.DataFrame) -> set[int]:
    """Final responses by a literal reading of §4.1 over the raw labels: each decision adjudicated, or both
    groups' final labels agreeing while both groups have a check label on every criterion of the response."""
    labels = labels.assign(met=labels["met"].astype(bool))
    key = ["response_id", "criterion_id"]

    def column(stage: str, group: int) -> pd.Series:
        chosen = labels[(labels["stage"] == stage) & (labels["group_no"] == group)]
        return chosen.drop_duplicates(key).set_index(key)["met"].astype(float)

    decisions = pd.DataFrame(
        {"check1": column("check", 1), "check2": column("check", 2), "adj": column("adjudication", 0)}
    )
    decisions = decisions.join(
        pd.DataFrame({"ann1": column("annotation", 1), "ann2": column("annotation", 2)}), how="outer"
    )
    decisions["g1"] = decisions["check1"].combine_first(decisions["ann1"])
    decisions["g2"] = decisions["check2"].combine_first(decisions["ann2"])
    per_response = decisions.groupby(level="response_id")
    n = per_response.size()
    checked = (per_response["check1"].count() == n) & (per_response["check2"].count() == n)
    both = checked.reindex(decisions.index, level="response_id")
    settled = decisions["adj"].notna() | ((decisions["g1"] == decisions["g2"]) & both)
    final = settled.groupby(level="response_id").sum() == n
    return set(final[final].index)
