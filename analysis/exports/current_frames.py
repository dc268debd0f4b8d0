"""The frames every export reads: responses, the current rubrics' criteria, decisions on them in export order,
and each response's gold state and basis (docs/REFERENCE.md §4.1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy.engine import Engine

from analysis.loader import load_criteria, load_responses
from db.rules.gold import FINAL, gold_states


def response_keys(engine: Engine) -> pd.DataFrame:
    """response_id, case_pk, case_id and model of every response."""
    return load_responses(engine)[["response_id", "case_pk", "case_id", "model"]]


def current_criteria(engine: Engine, *, text: bool = False) -> pd.DataFrame:
    """case_pk, criterion_id and position of each current approved rubric's criteria (with text and tags when
    `text`)."""
    columns = ["case_pk", "criterion_id", "position"] + (["text", "tags"] if text else [])
    return load_criteria(engine, text=text)[columns]


def in_current_rubric(decisions: pd.DataFrame, responses: pd.DataFrame, criteria: pd.DataFrame) -> pd.DataFrame:
    """Decisions on a criterion of their case's current approved rubric, with case and position."""
    frame = decisions.merge(responses, on="response_id", how="inner")
    return frame.merge(criteria[["case_pk", "criterion_id", "position"]], on=["case_pk", "criterion_id"], how="inner")


def in_decision_order(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in export order: case (import order), model, criterion position, criterion id."""
    return frame.sort_values(
        ["case_pk", "model", "position", "criterion_id"], na_position="last", kind="stable", ignore_index=True
    )


def response_gold_states(
    labels: pd.DataFrame, responses: pd.DataFrame, criteria: pd.DataFrame, finals: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per response of `responses` (response_id, case_pk): checked1, checked2, complete, final and state by
    `db.rules.gold.gold_states`, N being its case's current criteria (`criteria`: case_pk, criterion_id)."""
    n_of_case = criteria.groupby("case_pk").size()
    n = responses["case_pk"].map(n_of_case).fillna(0).to_numpy(np.int64)
    return gold_states(labels, pd.Series(n, index=responses["response_id"].to_numpy(np.int64)), finals)


def on_basis(frame: pd.DataFrame, states: pd.DataFrame, basis: str) -> pd.DataFrame:
    """Decision rows (with response_id, group1, group2) on gold basis `basis` (docs/REFERENCE.md §4.1), with a
    `final` column: under `final`, only rows of final responses, and a group's labels only where that group
    is checked (null elsewhere); under `provisional`, every row as it is."""
    merged = frame.merge(states[["response_id", "final", "checked1", "checked2"]], on="response_id", how="left")
    merged["final"] = merged["final"].fillna(False).astype(bool)
    if basis == FINAL:
        merged = merged.loc[merged["final"].to_numpy()].reset_index(drop=True)
        for group in ("group1", "group2"):
            checked = merged[f"checked{group[-1]}"].fillna(False).to_numpy(bool)
            merged[group] = merged[group].where(checked, pd.NA).astype("boolean")
    return merged.drop(columns=["checked1", "checked2"])
