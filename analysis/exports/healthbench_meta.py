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

from analysis.exports.common import ExportSummary, _current_criteria, _json, _write_lines, user_message
from analysis.loader import load_cases, load_label_decisions, load_responses
from db.gold import group_final_labels
from db.progress import Progress, no_progress
from db.taxonomy import get_taxonomy


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
    finals = final_labels_with_physicians(load_label_decisions(engine, users=True))
    finals = finals[finals["group_no"].isin([1, 2])].sort_values(["response_id", "criterion_id", "group_no"])
    pseudonym = physician_ids(finals["user_id"])
    by_decision = {
        key: (part["met"].tolist(), [pseudonym[int(u)] for u in part["user_id"]], part["group_no"].tolist())
        for key, part in finals.groupby(["response_id", "criterion_id"], sort=False)
    }
    cases = load_cases(engine, text=True)
    criteria = _current_criteria(engine, text=True).sort_values(["case_pk", "position"])
    responses = load_responses(engine, text=True)
    taxonomy = get_taxonomy()
    rubric_of = {pk: list(zip(part["criterion_id"], part["text"])) for pk, part in criteria.groupby("case_pk")}
    responses_of = {pk: part.sort_values("model") for pk, part in responses.groupby("case_pk")}
    total = len(by_decision)
    both_groups = 0

    def lines() -> Iterator[str]:
        nonlocal both_groups
        for case in cases.itertuples(index=False):
            if case.case_pk not in responses_of or case.case_pk not in rubric_of:
                continue
            prompt = _json([{"role": "user", "content": user_message(case.clinical_context, case.user_request)}])
            category = _json(taxonomy.theme_or_raw(case.task) if case.task else "")
            case_id = _json(case.case_id)
            for response in responses_of[case.case_pk].itertuples(index=False):
                completion, model = _json(response.text), _json(response.model)
                completion_id = _json(f"{case.case_id}:{response.model}")
                for criterion_id, text in rubric_of[case.case_pk]:
                    decided = by_decision.get((response.response_id, criterion_id))
                    if decided is None:
                        continue
                    mets, ids, groups = decided
                    both_groups += len(mets) == 2
                    yield (
                        f'{{"prompt": {prompt}, "prompt_id": {case_id}, "completion": {completion}, '
                        f'"completion_id": {completion_id}, "rubric": {_json(text)}, "category": {category}, '
                        f'"binary_labels": {_json([bool(m) for m in mets])}, '
                        f'"anonymized_physician_ids": {_json(ids)}, "case_id": {case_id}, "model": {model}, '
                        f'"criterion_id": {_json(criterion_id)}, "groups": {_json([int(g) for g in groups])}}}'
                    )

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows, digest = _write_lines(path, lines(), total, progress, "healthbench meta rows")
    return ExportSummary(
        "healthbench-meta",
        path,
        counts={"rows": rows, "rows with both groups' labels": both_groups, "physicians": len(pseudonym)},
        files={path.name: digest},
    )
