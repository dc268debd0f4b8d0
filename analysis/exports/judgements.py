"""Official per-model judgement files (docs/REFERENCE.md §3.5) from gold, a group's final labels or a judge."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy.engine import Engine

from analysis.exports.common import (
    _CHUNK,
    ExportSummary,
    _current_criteria,
    _decision_order,
    _in_current_rubric,
    _json,
    _prepare_dir,
    _write_json,
    _write_lines,
    sha256_file,
)
from analysis.exports.release import release_records
from analysis.frames import parse_source
from analysis.loader import audit_head, load_judge, load_label_decisions, load_responses
from analysis.metrics import cacs
from db.errors import ValidationFailed
from db.gold import complete_responses, gold_labels, group_final_labels
from db.progress import Progress, no_progress


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
JUDGEMENTS_DIR = "judgements"
JUDGEMENTS_FILES = ("cases.jsonl", "scores.json", JUDGEMENTS_MANIFEST)
DEFAULT_K = 10


def _score_block(s: np.ndarray, n: np.ndarray, k: int) -> dict:
    """RA, Pass@k and CACS@k (docs/REFERENCE.md §4) over responses with s met of n criteria."""
    return {
        "n_responses": int(len(s)),
        "rubric_accuracy": float(np.mean(s / n)),
        "pass_at_k": float(np.mean(s >= k)),
        "cacs_at_k": float(np.mean(cacs(s, n, k))),
    }


def judgement_scores(frame: pd.DataFrame, cases: list[dict], k: int) -> dict:
    """scores.json: per model overall, and per difficulty and subject label (as the official summary slices)."""
    case_of = {case["case_id"]: case for case in cases}
    models = sorted(frame["model"].unique().tolist())
    result: dict[str, Any] = {"k": k, "models": {}, "slices": {"difficulty": {}, "subject": {}}}
    for model in models:
        rows = frame[frame["model"] == model]
        s, n = rows["s"].to_numpy(np.float64), rows["n"].to_numpy(np.float64)
        result["models"][model] = _score_block(s, n, k)
        members: dict[tuple[str, str], list[int]] = {}
        for index, case_id in enumerate(rows["case_id"].tolist()):
            case = case_of[case_id]
            members.setdefault(("difficulty", str(case["difficulty"])), []).append(index)
            for label in case["subject_labels"]:
                members.setdefault(("subject", str(label)), []).append(index)
        for (dimension, value), rows_of in sorted(members.items()):
            result["slices"][dimension].setdefault(value, {})[model] = _score_block(s[rows_of], n[rows_of], k)
    return result


def export_judgements(
    engine: Engine,
    directory: Path,
    source: str = "gold",
    models: list[str] | None = None,
    k: int = DEFAULT_K,
    progress: Progress = no_progress,
) -> ExportSummary:
    """`export judgements DIR --source … [--models A,B]`: the official scorer's inputs and our scores (§3.5).

    DIR/judgements/ holds one `<model>_judge.json` per exported model and nothing else; DIR/cases.jsonl
    the cases on which every exported model has a complete response (so each file has one entry per
    case, as the official `eval_cacs.py` requires); DIR/scores.json our RA / Pass@k / CACS@k on exactly
    those cases; DIR/manifest.json what was left out and why.
    """
    parse_source(source)  # a bad source fails before any work
    progress(0, None, "reading decisions")
    decisions = source_decisions(engine, source)
    responses = load_responses(engine)[["response_id", "case_pk", "case_id", "model"]]
    criteria = _current_criteria(engine)
    per_case = criteria.groupby("case_pk").size()
    decisions = _in_current_rubric(decisions, responses, criteria)
    needed = responses.set_index("response_id")["case_pk"].map(per_case)
    complete = set(complete_responses(decisions, needed.dropna()).tolist())
    scored = responses[responses["response_id"].isin(complete)]
    scored_models = sorted(scored["model"].unique().tolist())

    requested = sorted({model.strip() for model in (models or []) if model and model.strip()})
    known = set(responses["model"])
    models_left_out = {}
    if requested:
        unknown = [model for model in requested if model not in known]
        if unknown:
            raise ValidationFailed(f"--models: no responses of {', '.join(unknown)}")
        unscored = [model for model in requested if model not in scored_models]
        if unscored:
            raise ValidationFailed(f"--models: no complete response by {source} for {', '.join(unscored)}")
        chosen = requested
    else:
        chosen = scored_models
        models_left_out = dict.fromkeys(sorted(known - set(chosen)), f"no complete response by {source}")
    if not chosen:
        raise ValidationFailed(f"source {source}: no model has a complete response")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationFailed(f"--k {k!r}: expected a whole number of at least 1")

    scored = scored[scored["model"].isin(chosen)]
    models_per_case = scored.groupby("case_pk")["model"].nunique()
    kept_cases = set(models_per_case[models_per_case == len(chosen)].index.tolist())
    records = release_records(engine)[0]
    case_pk_of = dict(zip(responses["case_id"], responses["case_pk"]))
    records = [record for record in records if case_pk_of.get(record["case_id"]) in kept_cases]
    if not records:
        raise ValidationFailed(
            f"no case on which every one of {len(chosen)} model(s) has a complete response by {source} "
            "(choose the models with --models)"
        )
    cases_left_out = []
    missing_of: dict[int, set[str]] = {}
    for pk, model in zip(scored["case_pk"].tolist(), scored["model"].tolist()):
        missing_of.setdefault(pk, set()).add(model)
    for case_id, pk in sorted(case_pk_of.items(), key=lambda item: item[1]):
        if pk in per_case.index and pk not in kept_cases:
            lacking = [model for model in chosen if model not in missing_of.get(pk, set())]
            cases_left_out.append({"case_id": case_id, "reason": "no complete response of " + ", ".join(lacking)})

    have = decisions.groupby("response_id")["criterion_id"].nunique()
    responses_left_out = []
    for row in responses.sort_values(["case_pk", "model"], kind="stable").itertuples(index=False):
        if row.response_id in complete or row.model not in chosen:
            continue
        n = per_case.get(row.case_pk)
        reason = (
            "no approved rubric"
            if n is None
            else f"incomplete: {int(have.get(row.response_id, 0))} of {int(n)} criteria labelled by {source}"
        )
        responses_left_out.append({"case_id": row.case_id, "model": row.model, "reason": reason})

    kept = scored[scored["case_pk"].isin(kept_cases)]
    decisions = _decision_order(decisions[decisions["response_id"].isin(set(kept["response_id"]))])
    filenames = {model: model_filename(model) for model in chosen}
    clashes = [name for name, count in Counter(name.casefold() for name in filenames.values()).items() if count > 1]
    if clashes:
        raise ValidationFailed(f"models whose file names differ only in case: {', '.join(clashes)}")
    directory = _prepare_dir(Path(directory), JUDGEMENTS_FILES)
    for stale in directory.glob("*_judge.json"):
        stale.unlink()  # the layout before judgements/ had the files at the top
    folder = _prepare_dir(directory / JUDGEMENTS_DIR, [])
    for stale in folder.glob("*_judge.json"):
        stale.unlink()
    strays = sorted(path.name for path in folder.glob("*.json"))
    if strays:
        raise ValidationFailed(
            f"{folder}: holds other .json files ({', '.join(strays[:5])}); the official scorer reads every "
            "*.json there — move them away"
        )

    entries_of: dict[str, list[dict]] = {model: [] for model in chosen}
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
    progress(len(decisions), len(decisions), "decisions")

    files = {}
    _write_lines(directory / "cases.jsonl", (_json(record) for record in records), len(records), no_progress, "")
    files["cases.jsonl"] = sha256_file(directory / "cases.jsonl")
    for model in chosen:
        _write_json(folder / filenames[model], entries_of[model])
        files[f"{JUDGEMENTS_DIR}/{filenames[model]}"] = sha256_file(folder / filenames[model])

    counted = decisions.groupby("response_id")["met"].sum()
    frame = kept.assign(s=kept["response_id"].map(counted).astype(float), n=kept["case_pk"].map(per_case).astype(float))
    scores = {"source": source, "cases": len(records), **judgement_scores(frame, records, k)}
    _write_json(directory / "scores.json", scores)
    files["scores.json"] = sha256_file(directory / "scores.json")

    manifest = {
        "source": source,
        "k": k,
        "models": {model: filenames[model] for model in chosen},
        "cases": len(records),
        "models_left_out": models_left_out,
        "cases_left_out": cases_left_out,
        "responses_left_out": responses_left_out,
        "sha256": files,
        "official_scorer": "python scripts/eval_cacs.py --data DIR/cases.jsonl --judgements-dir DIR/judgements "
        f"--threshold {k}",
        "audit_head": audit_head(engine),
    }
    _write_json(directory / JUDGEMENTS_MANIFEST, manifest)
    summary = ExportSummary(
        "judgements",
        directory,
        counts={
            "source": source,
            "models": len(chosen),
            "cases": len(records),
            "cases left out": len(cases_left_out),
            "models left out": len(models_left_out),
        },
        files=files,
    )
    if cases_left_out:
        summary.notes.append(
            f"{len(cases_left_out)} case(s) left out: not every exported model has a complete response there "
            f"(listed in {JUDGEMENTS_MANIFEST})"
        )
    if models_left_out:
        summary.notes.append("no complete response, not exported: " + ", ".join(models_left_out))
    return summary


# judge items ----------------------------------------------------------------------------------
