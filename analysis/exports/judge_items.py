"""Rows for running an external judge: user message, response and one rubric item each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from sqlalchemy.engine import Engine

from analysis.exports.current_frames import current_criteria
from analysis.exports.export_summary import ExportSummary, left_out
from analysis.exports.file_writers import json_text, json_texts, write_lines
from analysis.exports.manifest import export_head, write_manifest
from analysis.exports.paths import output_file
from analysis.loader import load_cases, load_responses
from analysis.prompt import user_message
from db.rules.progress_report import Progress, no_progress


def cases_with_text(engine: Engine) -> pd.DataFrame:
    """case_pk, case_id and the two texts a prompt is made of, for every case."""
    return load_cases(engine, text=True)[["case_pk", "case_id", "clinical_context", "user_request"]]


def export_judge_items(engine: Engine, path: Path, progress: Progress = no_progress) -> ExportSummary:
    """`export judge-items FILE`: one row per (response, criterion of the current approved rubric)."""
    progress(0, None, "reading cases and responses")
    head = export_head(engine)
    cases = cases_with_text(engine)
    criteria = current_criteria(engine, text=True)
    responses = load_responses(engine, text=True)
    rubric_of = {
        pk: (json_texts(group["criterion_id"]), json_texts(group["text"]))
        for pk, group in criteria.groupby("case_pk", sort=False)
    }
    responses = responses[responses["case_pk"].isin(rubric_of)]
    responses_of = dict(list(responses.groupby("case_pk", sort=False)))
    total = int(sum(len(responses_of[pk]) * len(rubric_of[pk][0]) for pk in responses_of))

    def lines() -> Iterator[str]:
        for case in cases.to_dict("records"):
            case_pk = case["case_pk"]
            if case_pk not in responses_of:
                continue
            message = json_text(user_message(case["clinical_context"], case["user_request"]))
            case_id = json_text(case["case_id"])
            criterion_ids, texts = rubric_of[case_pk]
            for model, text in zip(responses_of[case_pk]["model"], responses_of[case_pk]["text"]):
                response, model = json_text(text), json_text(model)
                for criterion_id, item in zip(criterion_ids, texts):
                    yield (
                        f'{{"user_message": {message}, "response": {response}, "rubric_item": {item}, '
                        f'"case_id": {case_id}, "model": {model}, "criterion_id": {criterion_id}}}'
                    )

    path = output_file(path)
    rows, digest = write_lines(path, lines(), total, progress, "judge items")
    write_manifest(path, export="judge-items", head=head, files={path.name: digest}, rows=rows)
    without_rubric = int((~load_responses(engine)["case_pk"].isin(rubric_of)).sum())
    summary = ExportSummary(
        "judge-items",
        path,
        counts={
            "rows": rows,
            "responses": len(responses),
            "cases": len(responses_of),
            "responses left out (no approved rubric)": without_rubric,
        },
        files={path.name: digest},
    )
    if without_rubric:
        summary.left_out.append(left_out("responses_no_rubric", [], without_rubric))
    return summary


# sft ------------------------------------------------------------------------------------------
