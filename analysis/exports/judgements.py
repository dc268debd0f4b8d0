"""Official per-model judgement files (docs/REFERENCE.md §3.5) from gold, a group's final labels or a judge."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from analysis.exports.export_summary import ExportSummary, LeftOut, left_out
from analysis.exports.file_writers import (
    PROGRESS_CHUNK,
    json_text,
    prepare_dir,
    sha256_file,
    write_json,
    write_json_without_floats,
    write_lines,
)
from analysis.exports.manifest import write_manifest
from analysis.exports.paths import output_dir, output_file
from analysis.exports.release import release_records
from analysis.frames import parse_source
from analysis.loader import audit_head, load_judge, load_label_decisions, load_responses
from analysis.metrics import DEFAULT_K, score_summary
from db.rules.errors import ValidationFailed
from db.rules.gold import (
    FINAL,
    check_basis,
    complete_responses,
    decisions_with_finals,
    gold_from_decisions,
    group_final_labels,
)
from db.rules.progress_report import Progress, no_progress


def source_decisions(engine: Engine, source: str, basis: str | None = None) -> pd.DataFrame:
    """response_id, criterion_id, met of every decision the source has on gold basis `basis` (docs/REFERENCE.md
    §4.1): under `final`, gold of final responses only, and a group's labels only where they are checked."""
    kind, judge = parse_source(source)
    basis = check_basis(basis)
    if kind == "judge":
        decisions = load_judge(engine)
        decisions = decisions[decisions["judge"] == judge]
        if decisions.empty:
            raise ValidationFailed(f"source {source!r}: no decisions of judge {judge!r}")
        return decisions[["response_id", "criterion_id", "met"]].reset_index(drop=True)
    labels = load_label_decisions(engine)
    decisions = decisions_with_finals(labels)
    states = None
    if basis == FINAL:
        states = response_gold_states(labels, response_keys(engine), current_criteria(engine), decisions)
    if kind == "gold":
        gold = gold_from_decisions(decisions)
        if states is not None:
            gold = gold[gold["response_id"].isin(states.loc[states["final"], "response_id"])]
        return gold[["response_id", "criterion_id", "met"]].reset_index(drop=True)
    del decisions
    group_no = 1 if kind == "group1" else 2
    final = group_final_labels(labels)
    final = final[final["group_no"] == group_no]
    if states is not None:
        final = final[final["response_id"].isin(states.loc[states[f"checked{group_no}"], "response_id"])]
    return final[["response_id", "criterion_id", "met"]].reset_index(drop=True)


#: Characters no file name may hold on common systems: path separators and control characters.
_REFUSED_IN_FILENAME = frozenset("/\\") | {chr(code) for code in range(32)} | {chr(127)}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
#: The longest file name (in bytes) common file systems take.
MAX_FILENAME_BYTES = 255
JUDGE_SUFFIX = "_judge.json"


def model_stem(model: str) -> str:
    """The model's name as a file or folder name, readable: only what a file system refuses is percent-encoded.

    The official scorer names a model after its file, so `Qwen/Qwen3-8B:v1` becomes
    `Qwen%2FQwen3-8B:v1`: path separators and control characters are encoded, and a leading `.`
    (`.`, `..`, hidden names) and a trailing `.` or space (dropped by Windows). A `%` is encoded
    only before two hex digits, where `unquote` would otherwise read an escape: `unquote` gives the
    exact name back.
    """

    def encode(index: int, char: str) -> str:
        unsafe = (
            char in _REFUSED_IN_FILENAME
            or (index == 0 and char == ".")
            or (index == len(model) - 1 and char in ". ")
            or (char == "%" and len(model) > index + 2 and {model[index + 1], model[index + 2]} <= _HEX_DIGITS)
        )
        return "".join(f"%{byte:02X}" for byte in char.encode("utf-8")) if unsafe else char

    return "".join(encode(i, c) for i, c in enumerate(model))


def model_filename(model: str) -> str:
    """`<model>_judge.json` with the model's name as `model_stem` writes it."""
    return model_stem(model) + JUDGE_SUFFIX


def _names_of(models: list[str], name_of, what: str) -> dict[str, str]:
    """Each model's file or folder name, refusing names too long for a file system or equal but for case."""
    names = {model: name_of(model) for model in models}
    for model, name in names.items():
        if len(name.encode("utf-8")) > MAX_FILENAME_BYTES:
            raise ValidationFailed(f"model {model!r}: its {what} name is longer than {MAX_FILENAME_BYTES} bytes")
    clashes = [name for name, count in Counter(name.casefold() for name in names.values()).items() if count > 1]
    if clashes:
        raise ValidationFailed(f"models whose {what} names differ only in case: {', '.join(clashes)}")
    return names


JUDGEMENTS_MANIFEST = "manifest.json"
JUDGEMENTS_DIR = "judgements"
JUDGEMENTS_FILES = ("cases.jsonl", "scores.json", JUDGEMENTS_MANIFEST)


def judgement_scores(frame: pd.DataFrame, cases: list[dict], k: int) -> dict:
    """scores.json: per model overall, and per difficulty and subject label (as the official summary slices)."""
    case_of = {case["case_id"]: case for case in cases}
    models = sorted(frame["model"].unique().tolist())
    result: dict[str, Any] = {"k": k, "models": {}, "slices": {"difficulty": {}, "subject": {}}}
    for model in models:
        rows = frame[frame["model"] == model]
        s, n = rows["s"].to_numpy(np.float64), rows["n"].to_numpy(np.float64)
        result["models"][model] = score_summary(s, n, k)
        members: dict[tuple[str, str], list[int]] = {}
        for index, case_id in enumerate(rows["case_id"].tolist()):
            case = case_of[case_id]
            members.setdefault(("difficulty", str(case["difficulty"])), []).append(index)
            for label in case["subject_labels"]:
                members.setdefault(("subject", str(label)), []).append(index)
        for (dimension, value), rows_of in sorted(members.items()):
            result["slices"][dimension].setdefault(value, {})[model] = score_summary(s[rows_of], n[rows_of], k)
    return result


@dataclass
class _Read:
    """What a judgements export reads from the database, once (a per-model export writes every folder from it)."""

    source: str
    head: dict
    decisions: pd.DataFrame  # the source's decisions on current rubrics, in export order
    responses: pd.DataFrame  # response_id, case_pk, case_id, model
    per_case: pd.Series  # case_pk → N
    complete: set  # response ids complete by the source
    labelled: pd.Series  # response_id → criteria the source decided
    records: list[dict]  # cases.jsonl lines of every case with an approved rubric
    basis: str = FINAL  # the gold basis of a gold or group source (docs/REFERENCE.md §4.1)


def _read(engine: Engine, source: str, progress: Progress, basis: str | None = None) -> _Read:
    head = audit_head(engine)
    progress(0, None, "reading decisions")
    basis = check_basis(basis)
    decisions = source_decisions(engine, source, basis)
    responses = load_responses(engine)[["response_id", "case_pk", "case_id", "model"]]
    criteria = current_criteria(engine)
    per_case = criteria.groupby("case_pk").size()
    decisions = in_decision_order(in_current_rubric(decisions, responses, criteria))
    needed = responses.set_index("response_id")["case_pk"].map(per_case)
    complete = set(complete_responses(decisions, needed.dropna()).tolist())
    labelled = decisions.groupby("response_id")["criterion_id"].nunique()
    records = release_records(engine, contact_warnings=False)[0]  # the release export is where they are said
    return _Read(source, head, decisions, responses, per_case, complete, labelled, records, basis)


def _choose_models(read: _Read, models: list[str] | None) -> tuple[list[str], dict[str, str]]:
    """(the models to export, models left out with the reason): those asked for, else every scored one."""
    source = read.source
    scored = set(read.responses.loc[read.responses["response_id"].isin(read.complete), "model"])
    requested = sorted({model.strip() for model in (models or []) if model and model.strip()})
    known = set(read.responses["model"])
    if requested:
        unknown = [model for model in requested if model not in known]
        if unknown:
            raise ValidationFailed(f"--models: no responses of {', '.join(unknown)}")
        unscored = [model for model in requested if model not in scored]
        if unscored:
            raise ValidationFailed(f"--models: no complete response by {source} for {', '.join(unscored)}")
        return requested, {}
    chosen = sorted(scored)
    if not chosen:
        raise ValidationFailed(f"source {source}: no model has a complete response")
    return chosen, dict.fromkeys(sorted(known - scored), f"no complete response by {source}")


@dataclass
class _Folder:
    """One judgements folder: its models, cases and what was left out."""

    models: list[str]
    filenames: dict[str, str]
    records: list[dict]
    kept: pd.DataFrame  # the exported responses
    decisions: pd.DataFrame  # their decisions, in export order
    cases_left_out: list[dict]
    responses_left_out: list[dict]


def _plan(read: _Read, chosen: list[str]) -> _Folder:
    """The cases on which every model of `chosen` has a complete response, and what is left out and why."""
    responses, per_case = read.responses, read.per_case
    scored = responses[responses["response_id"].isin(read.complete) & responses["model"].isin(chosen)]
    models_per_case = scored.groupby("case_pk")["model"].nunique()
    kept_cases = set(models_per_case[models_per_case == len(chosen)].index.tolist())
    case_pk_of = dict(zip(responses["case_id"], responses["case_pk"]))
    records = [record for record in read.records if case_pk_of.get(record["case_id"]) in kept_cases]
    if not records:
        raise ValidationFailed(
            f"no case on which every one of {len(chosen)} model(s) has a complete response by {read.source} "
            "(choose the models with --models)"
        )
    filenames = _names_of(chosen, model_filename, "file")
    complete_of: dict[int, set[str]] = {}
    for pk, model in zip(scored["case_pk"].tolist(), scored["model"].tolist()):
        complete_of.setdefault(pk, set()).add(model)
    cases_left_out = []
    for case_id, pk in sorted(case_pk_of.items(), key=lambda item: item[1]):
        if pk in per_case.index and pk not in kept_cases:
            lacking = [model for model in chosen if model not in complete_of.get(pk, set())]
            cases_left_out.append({"case_id": case_id, "reason": "no complete response of " + ", ".join(lacking)})
    responses_left_out = []
    mine = responses[responses["model"].isin(chosen) & ~responses["response_id"].isin(read.complete)]
    for row in mine.sort_values(["case_pk", "model"], kind="stable").itertuples(index=False):
        n, labelled = per_case.get(row.case_pk), int(read.labelled.get(row.response_id, 0))
        reason = (
            "no approved rubric"
            if n is None
            else f"incomplete: {labelled} of {int(n)} criteria labelled by {read.source}"
        )
        responses_left_out.append({"case_id": row.case_id, "model": row.model, "reason": reason})
    kept = scored[scored["case_pk"].isin(kept_cases)]
    decisions = read.decisions[read.decisions["response_id"].isin(set(kept["response_id"]))]
    return _Folder(chosen, filenames, records, kept, decisions, cases_left_out, responses_left_out)


def _stale_judgements(folder: Path) -> list[Path]:
    return [path for path in folder.glob("*.json") if path.name.endswith(JUDGE_SUFFIX)]


def _check_folder(directory: Path) -> None:
    """Refuses, before anything is written, a folder the export could not write as a whole."""
    directory = output_dir(directory, create=False)
    if not directory.exists():
        return
    folder = output_dir(directory / JUDGEMENTS_DIR, create=False)
    if not folder.exists():
        return
    strays = sorted(path.name for path in folder.glob("*.json") if not path.name.endswith(JUDGE_SUFFIX))
    if strays:
        raise ValidationFailed(
            f"{folder}: holds other .json files ({', '.join(strays[:5])}); the official scorer reads every "
            "*.json there — move them away"
        )


def _entries(plan: _Folder, progress: Progress) -> dict[str, list[dict]]:
    """model → the official file's rows: one per case, its criteria in rubric order."""
    decisions = plan.decisions
    entries_of: dict[str, list[dict]] = {model: [] for model in plan.models}
    current = None
    columns = ("response_id", "model", "case_id", "criterion_id", "met")
    for index, (response_id, model, case_id, criterion_id, met) in enumerate(
        zip(*(decisions[column].tolist() for column in columns))
    ):
        if response_id != current:
            current = response_id
            results: list[dict] = []
            entries_of[model].append({"case_id": case_id, "criteria_results": results})
        results.append({"criterion_id": criterion_id, "criteria_met": bool(met)})
        if index % PROGRESS_CHUNK == 0:
            progress(index, len(decisions), "decisions")
    progress(len(decisions), len(decisions), "decisions")
    return entries_of


def _write_folder(
    directory: Path, read: _Read, plan: _Folder, k: int, models_left_out: dict[str, str], progress: Progress
) -> ExportSummary:
    """Writes one judgements folder: judgements/<model>_judge.json, cases.jsonl, scores.json, manifest.json."""
    entries_of = _entries(plan, progress)
    directory = prepare_dir(Path(directory), JUDGEMENTS_FILES)
    for stale in _stale_judgements(directory):
        stale.unlink()  # the layout before judgements/ had the files at the top
    folder = prepare_dir(directory / JUDGEMENTS_DIR, [])
    for stale in _stale_judgements(folder):
        stale.unlink()
    records = plan.records
    files = {}
    write_lines(directory / "cases.jsonl", (json_text(record) for record in records), len(records), no_progress, "")
    files["cases.jsonl"] = sha256_file(directory / "cases.jsonl")
    for model in plan.models:
        write_json_without_floats(folder / plan.filenames[model], entries_of[model])
        files[f"{JUDGEMENTS_DIR}/{plan.filenames[model]}"] = sha256_file(folder / plan.filenames[model])

    kept, source = plan.kept, read.source
    counted = plan.decisions.groupby("response_id")["met"].sum()
    frame = kept.assign(
        s=kept["response_id"].map(counted).astype(float), n=kept["case_pk"].map(read.per_case).astype(float)
    )
    write_json(
        directory / "scores.json", {"source": source, "cases": len(records), **judgement_scores(frame, records, k)}
    )
    files["scores.json"] = sha256_file(directory / "scores.json")

    manifest = {
        "source": source,
        "gold_basis": read.basis,
        "k": k,
        "models": {model: plan.filenames[model] for model in plan.models},
        # the exact model of each file, whatever its name had to encode
        "judgement_files": {f"{JUDGEMENTS_DIR}/{plan.filenames[model]}": model for model in plan.models},
        "cases": len(records),
        "models_left_out": models_left_out,
        "cases_left_out": plan.cases_left_out,
        "responses_left_out": plan.responses_left_out,
        "sha256": files,
        "official_scorer": "python scripts/eval_cacs.py --data DIR/cases.jsonl --judgements-dir DIR/judgements "
        f"--threshold {k}",
        "audit_head": read.head,
    }
    write_json(directory / JUDGEMENTS_MANIFEST, manifest)
    summary = ExportSummary(
        "judgements",
        directory,
        counts={
            "source": source,
            "models": len(plan.models),
            "cases": len(records),
            "cases left out": len(plan.cases_left_out),
            "models left out": len(models_left_out),
        },
        files=files,
    )
    summary.left_out = _left_out(plan, models_left_out)
    if plan.cases_left_out:
        summary.notes.append(
            f"{len(plan.cases_left_out)} case(s) left out: not every exported model has a complete response there "
            f"(listed in {JUDGEMENTS_MANIFEST})"
        )
    if models_left_out:
        summary.notes.append("no complete response, not exported: " + ", ".join(models_left_out))
    return summary


def _left_out(plan: _Folder, models_left_out: dict[str, str]) -> list[LeftOut]:
    """The folder's left-out cases, responses and models, by reason, for a page to show."""
    found = [
        left_out(
            "cases_incomplete",
            [
                f"{item['case_id']} ({item['reason'].removeprefix('no complete response of ')})"
                for item in plan.cases_left_out
            ],
        ),
        left_out(
            "responses_no_rubric",
            [
                f"{item['case_id']} · {item['model']}"
                for item in plan.responses_left_out
                if item["reason"] == "no approved rubric"
            ],
        ),
        left_out(
            "responses_incomplete",
            [
                f"{item['case_id']} · {item['model']}"
                for item in plan.responses_left_out
                if item["reason"] != "no approved rubric"
            ],
        ),
        left_out("models_no_complete", list(models_left_out)),
    ]
    return [item for item in found if item.count]


def export_judgements(
    engine: Engine,
    directory: Path,
    source: str = "gold",
    models: list[str] | None = None,
    k: int = DEFAULT_K,
    progress: Progress = no_progress,
    per_model: bool = False,
    basis: str | None = None,
) -> ExportSummary:
    """`export judgements DIR --source … [--models A,B] [--per-model]`: the official scorer's inputs (§3.5).

    DIR/judgements/ holds one `<model>_judge.json` per exported model and nothing else; DIR/cases.jsonl
    the cases on which every exported model has a complete response (so each file has one entry per
    case, as the official `eval_cacs.py` requires); DIR/scores.json our RA / Pass@k / CACS@k on exactly
    those cases; DIR/manifest.json what was left out and why. With `per_model`, DIR/<model>/ is such a
    folder for each model alone, over all of that model's complete responses (`export_per_model`).
    """
    parse_source(source)  # a bad source fails before any work
    basis = check_basis(basis)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationFailed(f"--k {k!r}: expected a whole number of at least 1")
    read = _read(engine, source, progress, basis)
    chosen, models_left_out = _choose_models(read, models)
    if per_model:
        return _export_per_model(Path(directory), read, chosen, models_left_out, k, progress)
    plan = _plan(read, chosen)
    _check_folder(Path(directory))
    return _write_folder(Path(directory), read, plan, k, models_left_out, progress)


def _export_per_model(
    directory: Path, read: _Read, chosen: list[str], models_left_out: dict[str, str], k: int, progress: Progress
) -> ExportSummary:
    """DIR/<model>/ for each model, laid out as a one-model export; DIR/manifest.json names each folder's model.

    Every folder is planned and checked before the first file is written, so a refusal writes nothing."""
    output_dir(directory, create=False)
    folders = _names_of(chosen, model_stem, "folder")
    taken = [model for model, name in folders.items() if name.casefold() == JUDGEMENTS_MANIFEST]
    if taken:
        raise ValidationFailed(f"model {taken[0]!r}: its folder would be the export's {JUDGEMENTS_MANIFEST}")
    plans = {model: _plan(read, [model]) for model in chosen}
    if directory.exists():
        output_file(directory / JUDGEMENTS_MANIFEST)
        for model in chosen:
            _check_folder(directory / folders[model])
    directory = output_dir(directory)
    files, cases = {}, {}
    for model in chosen:
        summary = _write_folder(directory / folders[model], read, plans[model], k, {}, progress)
        files.update({f"{folders[model]}/{name}": digest for name, digest in summary.files.items()})
        manifest = directory / folders[model] / JUDGEMENTS_MANIFEST
        files[f"{folders[model]}/{JUDGEMENTS_MANIFEST}"] = sha256_file(manifest)
        cases[model] = summary.counts["cases"]
    write_manifest(
        directory,
        export="judgements",
        head=read.head,
        files=files,
        per_model=True,
        source=read.source,
        gold_basis=read.basis,
        k=k,
        models={model: {"folder": folders[model], "cases": cases[model]} for model in chosen},
        models_left_out=models_left_out,
        official_scorer="python scripts/eval_cacs.py --data DIR/<folder>/cases.jsonl "
        f"--judgements-dir DIR/<folder>/judgements --threshold {k}",
    )
    summary = ExportSummary(
        "judgements",
        directory,
        counts={"source": read.source, "models": len(chosen), "models left out": len(models_left_out)},
        files=files,
    )
    summary.notes += [f"{folders[model]}/: {model}, {cases[model]} case(s)" for model in chosen]
    summary.left_out = [left_out("models_no_complete", list(models_left_out))] if models_left_out else []
    if models_left_out:
        summary.notes.append("no complete response, not exported: " + ", ".join(models_left_out))
    return summary


# judge items ----------------------------------------------------------------------------------
