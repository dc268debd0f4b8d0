"""Our physicians' labels in the shape of HealthBench's grader meta-evaluation (`export healthbench-meta FILE`).

One JSON line per decision (response × criterion of the case's current approved rubric) that has
at least one group's final label:

    prompt                    [{"role": "user", "content": <clinical context + "\\n\\n" + user request>}]
    prompt_id                 the case id
    completion                the model's response
    completion_id             "<case_id>:<model>"
    rubric                    the criterion's text
    category                  the case's primary task theme (canonical id; the meta-evaluation's cluster)
    binary_labels             each group's final label (group 1 first), one per physician
    anonymized_physician_ids  who made each of those labels (the checker when a check replaced the
                              annotation), as "physician-NNN" numbered by account; no user name leaves
    case_id, model, criterion_id, groups   our keys, and the group of each label

HealthBench's meta-evaluation reads `prompt`, `completion`, `rubric`, `category`, `binary_labels`
and `anonymized_physician_ids` and scores any grader against these physicians (and each
physician against the others) unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from sqlalchemy.engine import Engine

from analysis.exports.common import ExportSummary, current_criteria, json_text, user_message, write_lines
from analysis.exports.manifest import export_head, write_manifest
from analysis.exports.paths import output_file
from analysis.loader import load_cases, load_label_decisions, load_responses
from db.rules.gold import group_final_labels
from db.rules.progress_report import Progress, no_progress
from db.rules.taxonomy import get_taxonomy


def physician_ids(user_ids) -> dict[int, str]:
    """Stable pseudonyms: accounts numbered in id order."""
    return {int(uid): f"physician-{rank:03d}" for rank, uid in enumerate(sorted({int(u) for u in user_ids}), start=1)}


def final_labels_with_physicians(labels: pd.DataFrame) -> pd.DataFrame:
    """response_id, criterion_id, group_no, met, user_id of each group's final label."""
    finals = group_final_labels(labels)
    keys = ["response_id", "criterion_id", "stage", "group_no"]
    return finals.merge(labels[[*keys, "user_id"]], on=keys, how="left")[
        ["response_id", "criterion_id", "group_no", "met", "user_id"]
    ]


def export_healthbench_meta(engine: Engine, path: Path, progress: Progress = no_progress) -> ExportSummary:
    progress(0, None, "reading labels")
    head = export_head(engine)
    finals = final_labels_with_physicians(load_label_decisions(engine, users=True))
    finals = finals[finals["group_no"].isin([1, 2])].sort_values(["response_id", "criterion_id", "group_no"])
    pseudonym = physician_ids(finals["user_id"])
    by_decision: dict[tuple[int, str], tuple[list, list[str], list]] = {}
    for response_id, criterion_id, met, user_id, group_no in zip(
        finals["response_id"].tolist(),
        finals["criterion_id"].tolist(),
        finals["met"].tolist(),
        finals["user_id"].tolist(),
        finals["group_no"].tolist(),
    ):
        mets, ids, groups = by_decision.setdefault((int(response_id), str(criterion_id)), ([], [], []))
        mets.append(bool(met))
        ids.append(pseudonym[int(user_id)])
        groups.append(int(group_no))
    cases = load_cases(engine, text=True)
    criteria = current_criteria(engine, text=True).sort_values(["case_pk", "position"])
    responses = load_responses(engine, text=True)
    taxonomy = get_taxonomy()
    rubric_of: dict[int, list[tuple[str, str]]] = {}
    for pk, criterion_id, text in zip(
        criteria["case_pk"].tolist(), criteria["criterion_id"].tolist(), criteria["text"].tolist()
    ):
        rubric_of.setdefault(int(pk), []).append((str(criterion_id), str(text)))
    responses_of: dict[int, list[tuple[int, str, str]]] = {}
    ordered = responses.sort_values(["case_pk", "model"])
    for pk, response_id, model, text in zip(
        ordered["case_pk"].tolist(),
        ordered["response_id"].tolist(),
        ordered["model"].tolist(),
        ordered["text"].tolist(),
    ):
        responses_of.setdefault(int(pk), []).append((int(response_id), str(model), str(text)))
    total = len(by_decision)
    both_groups = 0

    def lines() -> Iterator[str]:
        nonlocal both_groups
        for pk, case_key, context, request, task in zip(
            cases["case_pk"].tolist(),
            cases["case_id"].tolist(),
            cases["clinical_context"].tolist(),
            cases["user_request"].tolist(),
            cases["task"].tolist(),
        ):
            if pk not in responses_of or pk not in rubric_of:
                continue
            prompt = json_text([{"role": "user", "content": user_message(str(context), str(request))}])
            category = json_text(taxonomy.theme_or_raw(str(task)) if task else "")
            case_id = json_text(case_key)
            for response_id, model_name, text in responses_of[pk]:
                completion, model = json_text(text), json_text(model_name)
                completion_id = json_text(f"{case_key}:{model_name}")
                for criterion_id, criterion in rubric_of[pk]:
                    decided = by_decision.get((response_id, criterion_id))
                    if decided is None:
                        continue
                    mets, ids, groups = decided
                    both_groups += len(mets) == 2
                    yield (
                        f'{{"prompt": {prompt}, "prompt_id": {case_id}, "completion": {completion}, '
                        f'"completion_id": {completion_id}, "rubric": {json_text(criterion)}, "category": {category}, '
                        f'"binary_labels": {json_text([bool(m) for m in mets])}, '
                        f'"anonymized_physician_ids": {json_text(ids)}, "case_id": {case_id}, "model": {model}, '
                        f'"criterion_id": {json_text(criterion_id)}, "groups": {json_text([int(g) for g in groups])}}}'
                    )

    path = output_file(path)
    rows, digest = write_lines(path, lines(), total, progress, "healthbench meta rows")
    write_manifest(path, export="healthbench-meta", head=head, files={path.name: digest}, rows=rows)
    return ExportSummary(
        "healthbench-meta",
        path,
        counts={"rows": rows, "rows with both groups' labels": both_groups, "physicians": len(pseudonym)},
        files={path.name: digest},
    )
