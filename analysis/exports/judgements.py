"""Official per-model judgement files (DESIGN §3.5) from gold, a group's final labels or a judge."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd
from sqlalchemy.engine import Engine

from analysis.exports.common import (
    _CHUNK,
    ExportSummary,
    _current_criteria,
    _decision_order,
    _in_current_rubric,
    _prepare_dir,
    _write_json,
    sha256_file,
)
from analysis.loader import load_judge, load_label_decisions, load_responses
from db.config import RUBRIC_SIZE
from db.errors import ValidationFailed
from db.gold import complete_responses, gold_labels, group_final_labels
from db.progress import Progress, no_progress


def parse_source(source: str) -> tuple[str, str | None]:
    """("gold" | "group1" | "group2" | "judge", judge name or None)."""
    source = (source or "gold").strip()
    if source in ("gold", "group1", "group2"):
        return source, None
    if source.startswith("judge:") and source[len("judge:") :].strip():
        return "judge", source[len("judge:") :].strip()
    raise ValidationFailed(f"source {source!r}: expected gold, group1, group2 or judge:NAME")


def source_decisions(engine: Engine, source: str) -> pd.DataFrame:
    """response_id, criterion_id, met of every decision the source has."""
    kind, judge = parse_source(source)
    if kind == "judge":
        decisions = load_judge(engine)
        decisions = decisions[decisions["judge"] == judge]
        if decisions.empty:
            raise ValidationFailed(f"source {source!r}: no decisions of judge {judge!r}")
        return decisions[["response_id", "criterion_id", "met"]].reset_index(drop=True)
    labels = load_label_decisions(engine)
    if kind == "gold":
        return gold_labels(labels)[["response_id", "criterion_id", "met"]]
    final = group_final_labels(labels)
    final = final[final["group_no"] == (1 if kind == "group1" else 2)]
    return final[["response_id", "criterion_id", "met"]].reset_index(drop=True)


_UNSAFE_IN_FILENAME = set('/\\:*?"<>|%') | {chr(code) for code in range(32)} | {chr(127)}


def model_filename(model: str) -> str:
    """`<model>_judge.json`, percent-encoding characters no file name can hold (reversible: `unquote`)."""

    def encode(index: int, char: str) -> str:
        unsafe = (
            char in _UNSAFE_IN_FILENAME or (index == 0 and char == ".") or (index == len(model) - 1 and char in ". ")
        )
        return "".join(f"%{byte:02X}" for byte in char.encode("utf-8")) if unsafe else char

    return "".join(encode(i, c) for i, c in enumerate(model)) + "_judge.json"


JUDGEMENTS_MANIFEST = "manifest.json"


def export_judgements(
    engine: Engine, directory: Path, source: str = "gold", progress: Progress = no_progress
) -> ExportSummary:
    """`export judgements DIR --source …`: one official `<model>_judge.json` per model (complete responses)."""
    parse_source(source)  # a bad source fails before any work
    progress(0, None, "reading decisions")
    decisions = source_decisions(engine, source)
    responses = load_responses(engine)[["response_id", "case_pk", "case_id", "model"]]
    criteria = _current_criteria(engine)
    per_case = criteria.groupby("case_pk").size()
    decisions = _in_current_rubric(decisions, responses, criteria)
    needed = responses.set_index("response_id")["case_pk"].map(per_case)
    complete = set(complete_responses(decisions, needed.dropna()).tolist())
    have = decisions.groupby("response_id")["criterion_id"].nunique()

    left_out = []
    for row in responses.sort_values(["case_pk", "model"], kind="stable").itertuples(index=False):
        if row.response_id in complete:
            continue
        n = per_case.get(row.case_pk)
        reason = (
            "no approved rubric"
            if n is None
            else f"incomplete: {int(have.get(row.response_id, 0))} of {int(n)} criteria labelled by {source}"
        )
        left_out.append({"case_id": row.case_id, "model": row.model, "reason": reason})

    decisions = _decision_order(decisions[decisions["response_id"].isin(complete)])
    models = sorted(responses["model"].unique().tolist())
    filenames = {model: model_filename(model) for model in models}
    clashes = [name for name, count in Counter(name.casefold() for name in filenames.values()).items() if count > 1]
    if clashes:
        raise ValidationFailed(f"models whose file names differ only in case: {', '.join(clashes)}")
    directory = _prepare_dir(Path(directory), [JUDGEMENTS_MANIFEST])
    for stale in directory.glob("*_judge.json"):
        stale.unlink()

    entries_of: dict[str, list[dict]] = {model: [] for model in models}
    current = None
    for index, (response_id, model, case_id, criterion_id, met) in enumerate(
        zip(
            decisions["response_id"].tolist(),
            decisions["model"].tolist(),
            decisions["case_id"].tolist(),
            decisions["criterion_id"].tolist(),
            decisions["met"].tolist(),
        )
    ):
        if response_id != current:
            current = response_id
            results: list[dict] = []
            entries_of[model].append({"case_id": case_id, "criteria_results": results})
        results.append({"criterion_id": criterion_id, "criteria_met": bool(met)})
        if index % _CHUNK == 0:
            progress(index, len(decisions), "decisions")

    files, per_model = {}, {}
    for model in models:
        entries = entries_of[model]
        left = sum(1 for item in left_out if item["model"] == model)
        per_model[model] = {"file": filenames[model] if entries else None, "responses": len(entries), "left_out": left}
        if entries:
            _write_json(directory / filenames[model], entries)
            files[filenames[model]] = sha256_file(directory / filenames[model])
    progress(len(decisions), len(decisions), "decisions")

    manifest = {
        "source": source,
        "rubric_size": RUBRIC_SIZE,
        "files": {name: model for model, name in filenames.items() if name in files},
        "models": per_model,
        "sha256": files,
        "left_out": left_out,
    }
    _write_json(directory / JUDGEMENTS_MANIFEST, manifest)
    summary = ExportSummary(
        "judgements",
        directory,
        counts={
            "source": source,
            "models": len(files),
            "responses": sum(item["responses"] for item in per_model.values()),
            "left out": len(left_out),
        },
        files=files,
    )
    if left_out:
        summary.notes.append(f"{len(left_out)} response(s) left out (listed with the reason in {JUDGEMENTS_MANIFEST})")
    empty = [model for model, item in per_model.items() if not item["responses"]]
    if empty:
        summary.notes.append("no complete response, no file: " + ", ".join(empty))
    return summary


# judge items ----------------------------------------------------------------------------------
