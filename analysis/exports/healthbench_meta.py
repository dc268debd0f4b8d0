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

import numpy as np
import pandas as pd
from sqlalchemy.engine import Engine

from analysis.exports.current_frames import (
    current_criteria,
    in_current_rubric,
    in_decision_order,
    response_gold_states,
    response_keys,
)
from analysis.exports.export_summary import ExportSummary
from analysis.exports.file_writers import json_text, write_lines
from analysis.exports.manifest import export_head, write_manifest
from analysis.exports.paths import output_file
from analysis.loader import load_cases, load_label_decisions, load_responses
from analysis.prompt import user_message
from db.rules.gold import FINAL, check_basis, group_final_labels
from db.rules.progress_report import Progress, no_progress
from db.rules.taxonomy import get_taxonomy

#: Decisions turned into Python values at once while the lines are written.
LINES_PER_BLOCK = 20_000


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


def export_healthbench_meta(
    engine: Engine, path: Path, progress: Progress = no_progress, *, basis: str | None = None
) -> ExportSummary:
    """`export healthbench-meta FILE`; under gold basis `final` (docs/REFERENCE.md §4.1) a group's labels are
    written only on responses where that group's labels are checked."""
    basis = check_basis(basis)
    progress(0, None, "reading labels")
    head = export_head(engine)
    ordered, pseudonym, criteria = _finals_in_line_order(engine, basis)
    cases = load_cases(engine, text=True).set_index("case_pk")
    ordered = ordered[ordered["case_pk"].isin(cases.index)]
    bounds = _decision_runs(ordered)
    # What the lines read, compactly: the texts come next and are the largest part of the peak.
    ordered = ordered[list(_LINE_COLUMNS)].astype(
        {"model": "category", "criterion_id": "category", "case_pk": "int32", "response_id": "int32"}
    )
    responses = load_responses(engine, text=True)
    texts = dict(zip(responses["response_id"].tolist(), responses["text"].tolist()))
    del responses
    rubric_texts = dict(
        zip(zip(criteria["case_pk"].tolist(), criteria["criterion_id"].tolist()), criteria["text"].tolist())
    )
    lines = _MetaLines(ordered, bounds, cases, texts, rubric_texts, pseudonym)
    path = output_file(path)
    rows, digest = write_lines(path, lines, lines.total, progress, "healthbench meta rows")
    write_manifest(path, export="healthbench-meta", head=head, files={path.name: digest}, rows=rows, gold_basis=basis)
    return ExportSummary(
        "healthbench-meta",
        path,
        counts={"rows": rows, "rows with both groups' labels": lines.both_groups, "physicians": len(pseudonym)},
        files={path.name: digest},
    )


#: The columns of a decision's labels the lines read, in line order.
_LINE_COLUMNS = ("case_pk", "response_id", "model", "criterion_id", "met", "user_id", "group_no")


def _finals_in_line_order(engine: Engine, basis: str) -> tuple[pd.DataFrame, dict[int, str], pd.DataFrame]:
    """Each group's final label on a current criterion (only checked groups' under basis `final`) in line order,
    the physicians' pseudonyms, and the current criteria with their texts."""
    labels = load_label_decisions(engine, users=True, categorical=True)
    finals = final_labels_with_physicians(labels)
    finals = finals[finals["group_no"].isin([1, 2])]
    if basis == FINAL:
        states = response_gold_states(labels, response_keys(engine), current_criteria(engine))
        checked = pd.concat(
            [states.loc[states[f"checked{g}"], ["response_id"]].assign(group_no=g) for g in (1, 2)], ignore_index=True
        )
        finals = finals.merge(checked.astype({"group_no": finals["group_no"].dtype}), on=["response_id", "group_no"])
    del labels
    pseudonym = physician_ids(finals["user_id"])
    criteria = current_criteria(engine, text=True)
    # The final labels in line order (case, model, criterion position; group 1 before group 2), so each
    # decision's labels are one run to walk, with no dict of every decision's labels held in memory.
    # The texts are read after, once the frames the ordering needed are gone.
    ordered = in_decision_order(
        in_current_rubric(
            finals.sort_values(["response_id", "criterion_id", "group_no"]),
            load_responses(engine)[["response_id", "case_pk", "model"]],
            criteria,
        )
    )
    return ordered, pseudonym, criteria


def _decision_runs(ordered: pd.DataFrame) -> list[int]:
    """Where each decision's run of labels starts in `ordered`, then its length: run i is [bounds[i], bounds[i+1])."""
    response_ids = ordered["response_id"].to_numpy()
    criterion_ids = ordered["criterion_id"].to_numpy()
    starts = np.flatnonzero(
        np.r_[True, (response_ids[1:] != response_ids[:-1]) | (criterion_ids[1:] != criterion_ids[:-1])]
    )[: len(ordered)]  # no decision: no run (the leading True would name a first row that is not there)
    return np.r_[starts, len(ordered)].tolist()


class _MetaLines:
    """The JSON lines of the export, one per decision run, counting the decisions both groups labelled."""

    def __init__(
        self,
        ordered: pd.DataFrame,
        bounds: list[int],
        cases: pd.DataFrame,
        texts: dict,
        rubric_texts: dict,
        pseudonym: dict[int, str],
    ) -> None:
        self.ordered, self.bounds, self.cases = ordered, bounds, cases
        self.texts, self.rubric_texts, self.pseudonym = texts, rubric_texts, pseudonym
        self.total = len(bounds) - 1
        self.both_groups = 0

    def __iter__(self) -> Iterator[str]:
        ordered, bounds, cases, texts, total = self.ordered, self.bounds, self.cases, self.texts, self.total
        taxonomy = get_taxonomy()
        shown_case = shown_response = None
        # A block of decisions at a time as Python values, never the whole frame as lists.
        for block in range(0, total, LINES_PER_BLOCK):
            block_bounds = bounds[block : min(block + LINES_PER_BLOCK, total) + 1]
            low = block_bounds[0]
            case_pk, response_id, model_name, criterion_id, met, user_id, group_no = (
                ordered[column].iloc[low : block_bounds[-1]].tolist() for column in _LINE_COLUMNS
            )
            for first, end in zip(block_bounds[:-1], block_bounds[1:]):
                first, end = first - low, end - low
                pk = case_pk[first]
                if pk != shown_case:
                    shown_case, case = pk, cases.loc[pk]
                    prompt = json_text(
                        [{"role": "user", "content": user_message(str(case.clinical_context), str(case.user_request))}]
                    )
                    category = json_text(taxonomy.theme_or_raw(str(case.task)) if case.task else "")
                    case_id = json_text(case.case_id)
                if response_id[first] != shown_response:
                    shown_response = response_id[first]
                    completion, model = json_text(texts[shown_response]), json_text(model_name[first])
                    completion_id = json_text(f"{case.case_id}:{model_name[first]}")
                mets, groups = met[first:end], group_no[first:end]
                self.both_groups += len(mets) == 2
                rubric = json_text(str(self.rubric_texts[(pk, criterion_id[first])]))
                yield (
                    f'{{"prompt": {prompt}, "prompt_id": {case_id}, "completion": {completion}, '
                    f'"completion_id": {completion_id}, "rubric": {rubric}, '
                    f'"category": {category}, "binary_labels": {json_text([bool(m) for m in mets])}, '
                    f'"anonymized_physician_ids": {json_text([self.pseudonym[int(u)] for u in user_id[first:end]])}, '
                    f'"case_id": {case_id}, "model": {model}, "criterion_id": {json_text(str(criterion_id[first]))}, '
                    f'"groups": {json_text([int(g) for g in groups])}}}'
                )
