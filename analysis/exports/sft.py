"""Judge training data from gold labels: prompt template, case-level split, train/dev/held-out files."""

from __future__ import annotations

import random
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator
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
from analysis.exports.export_summary import DEFAULT_SEED, ExportSummary, left_out
from analysis.exports.file_writers import (
    PROGRESS_CHUNK,
    HashingWriter,
    json_text,
    json_texts,
    prepare_dir,
    sha256_file,
    write_json,
)
from analysis.exports.judge_items import cases_with_text
from analysis.loader import (
    audit_head,
    load_calibration_samples,
    load_disagreement_draws,
    load_label_decisions,
    load_label_notes,
    load_responses,
)
from analysis.prompt import (
    PromptTemplate,
    json_body,
    judge_answer,
    read_template,
    template_name,
    template_path as resolve_template,
    user_message,
)
from db.rules.enums import Stage
from db.rules.errors import ValidationFailed
from db.rules.gold import DECISION, FINAL, check_basis, decisions_with_finals, gold_from_decisions
from db.rules.progress_report import Progress, no_progress

#: Explanations for SFT rows without a physician's note (the label alone).
GENERIC_EXPLANATION = {True: "回答满足该评分标准的要求。", False: "回答未满足该评分标准的要求。"}
EXPLANATION_RULE = (
    "explanation = the first non-empty physician note that supports the gold label: the "
    "adjudication note; else a check note whose label equals gold (group 1, then group 2); "
    "else an annotation note whose label equals gold (group 1, then group 2); else a generic "
    "sentence stating met / not met"
)
#: Rows turned into Python values at once while the files are written.
ROWS_PER_BLOCK = 20_000

SFT_FILES = ("train.jsonl", "dev.jsonl", "heldout.jsonl", "manifest.json", "judge_prompt.txt")


def _supporting_notes(labels: pd.DataFrame, gold: pd.DataFrame) -> pd.DataFrame:
    """DECISION + note: per gold decision, the note chosen by EXPLANATION_RULE (where there is one).

    `labels` are label rows with a `note` column (those without a note are ignored).
    """
    text = labels["note"].fillna("").astype(str).str.strip()
    notes = labels.assign(note=text)[text != ""]
    notes = notes.merge(gold[[*DECISION, "met"]].rename(columns={"met": "gold_met"}), on=DECISION, how="inner")
    stage, group = notes["stage"], notes["group_no"]
    rank = np.select(
        [
            stage == Stage.adjudication,
            (stage == Stage.check) & (group == 1),
            (stage == Stage.check) & (group == 2),
            (stage == Stage.annotation) & (group == 1),
            (stage == Stage.annotation) & (group == 2),
        ],
        [0, 1, 2, 3, 4],
        default=9,
    )
    notes = notes.assign(rank=rank)
    notes = notes[(notes["rank"] == 0) | ((notes["rank"] < 9) & (notes["met"] == notes["gold_met"]))]
    notes = notes.sort_values([*DECISION, "rank"], kind="stable").drop_duplicates(DECISION)
    return notes[[*DECISION, "note"]]


def split_cases(case_ids: list[str], seed: int, dev_fraction: float) -> set[str]:
    """The dev cases: a seeded shuffle of the case ids (given in case order), first share taken."""
    shuffled = list(case_ids)
    random.Random(seed).shuffle(shuffled)
    n_dev = int(round(dev_fraction * len(shuffled)))
    if dev_fraction > 0 and len(shuffled) >= 2:
        n_dev = min(max(n_dev, 1), len(shuffled) - 1)
    return set(shuffled[:n_dev])


def export_sft(
    engine: Engine,
    directory: Path,
    seed: int = DEFAULT_SEED,
    holdout_models: Iterable[str] = (),
    fmt: str = "instruction",
    dev_fraction: float = 0.1,
    template_path: str | Path | None = None,
    progress: Progress = no_progress,
    include_calibration: bool = False,
    only_disagreements: bool = False,
    basis: str | None = None,
) -> ExportSummary:
    """`export sft DIR`: judge training rows from gold, split by case, held-out models apart.

    `basis`: the gold basis (docs/REFERENCE.md §4.1); under `final` only gold of final responses trains.

    `template_path`: official (the default: the official judge's inference prompt), zh, or a file.
    Responses of a calibration sample are left out unless `include_calibration` (a judge must not
    train on the responses that calibrate it, docs/REFERENCE.md §4). `only_disagreements` keeps only the
    responses drawn where two judges disagree (`assign disagreements`, db.work.disagreements).
    """
    basis = check_basis(basis)
    if fmt not in ("instruction", "messages"):
        raise ValidationFailed(f"format {fmt!r}: expected instruction or messages")
    if not 0 <= dev_fraction < 1:
        raise ValidationFailed(f"dev fraction {dev_fraction}: expected a number from 0 up to (not including) 1")
    template = read_template(template_path)
    template_source = resolve_template(template_path)
    holdout = sorted({model.strip() for model in holdout_models if model and model.strip()})

    progress(0, None, "reading labels")
    gold = _gold_on_basis(engine, basis)
    responses = load_responses(engine, text=True)
    unknown = [model for model in holdout if model not in set(responses["model"])]
    if unknown:
        raise ValidationFailed(f"held-out model(s) not in the database: {', '.join(unknown)}")
    chosen = _training_rows(
        engine, gold, responses, include_calibration=include_calibration, only_disagreements=only_disagreements
    )
    rows = chosen.rows
    bodies, prompt = _prompt_bodies(engine, responses), PromptTemplate(template)
    del responses  # the bodies hold every text JSON-encoded; the raw texts are not read again
    part = _parts(rows, holdout, seed, dev_fraction)

    directory = prepare_dir(Path(directory), SFT_FILES)
    file_names = ["train.jsonl", "dev.jsonl"] + (["heldout.jsonl"] if holdout else [])
    written = _write_files(directory, file_names, rows, part, (bodies, prompt, fmt), template_source, progress)
    options = {
        "gold_basis": basis,
        "format": fmt,
        "dev_fraction": dev_fraction,
        "holdout_models": holdout,
        "template": template_name(template_path),
        "include_calibration": include_calibration,
        "only_disagreements": only_disagreements,
    }
    write_json(directory / "manifest.json", _manifest(engine, seed, options, chosen, written))
    return _summary(directory, chosen, written, include_calibration=include_calibration)


def _gold_on_basis(engine: Engine, basis: str) -> pd.DataFrame:
    """Gold of every decision (of final responses only under basis `final`)."""
    labels = load_label_decisions(engine)
    decisions = decisions_with_finals(labels)
    gold = gold_from_decisions(decisions)
    if basis == FINAL:
        states = response_gold_states(labels, response_keys(engine), current_criteria(engine), decisions)
        gold = gold[gold["response_id"].isin(states.loc[states["final"], "response_id"])].reset_index(drop=True)
    return gold


def _write_files(
    directory: Path,
    file_names: list[str],
    rows: pd.DataFrame,
    part: np.ndarray,
    shape: tuple[tuple[dict, dict], PromptTemplate, str],
    template_source: Path,
    progress: Progress,
) -> _Written:
    """The rows into their files (`shape`: the JSON bodies, the prompt and the format) and the judge prompt beside
    them; what was written."""
    bodies, prompt, fmt = shape
    writers = {name: HashingWriter(directory / name) for name in file_names}
    try:
        with_note = _write_rows(writers, rows, part, bodies, prompt, fmt, progress)
    finally:
        for writer in writers.values():
            writer.close()
    counts = Counter({name: writer.lines for name, writer in writers.items()})
    progress(len(rows), len(rows), "sft rows")
    shutil.copyfile(template_source, directory / "judge_prompt.txt")

    files: dict[str, dict[str, Any]] = {
        name: {"rows": counts[name], "sha256": writers[name].sha256} for name in file_names
    }
    files["judge_prompt.txt"] = {"sha256": sha256_file(directory / "judge_prompt.txt")}
    return _Written(
        rows={name: counts[name] for name in file_names},
        cases={name: int(rows.loc[part == name.split(".")[0], "case_id"].nunique()) for name in file_names},
        with_note=with_note,
        files=files,
    )


@dataclass(frozen=True)
class _TrainingRows:
    """The gold decisions that become rows, in export order, and what was left out on the way."""

    rows: pd.DataFrame
    outside_rubric: int
    calibration_rows: int


@dataclass(frozen=True)
class _Written:
    """What the files hold: rows and cases per file, explanations from a physician's note, files' digests."""

    rows: dict[str, int]
    cases: dict[str, int]
    with_note: int
    files: dict[str, dict[str, Any]]


def _training_rows(
    engine: Engine, gold: pd.DataFrame, responses: pd.DataFrame, *, include_calibration: bool, only_disagreements: bool
) -> _TrainingRows:
    """Gold decisions on the current rubrics (without the calibration samples unless included; only the drawn
    disagreements when asked), each with its supporting note and its rubric item's text."""
    criteria = current_criteria(engine, text=True)
    keys = responses[["response_id", "case_pk", "case_id", "model"]]
    rows = in_decision_order(in_current_rubric(gold[[*DECISION, "met"]], keys, criteria))
    outside_rubric = len(gold) - len(rows)
    calibration = rows["response_id"].isin(set(load_calibration_samples(engine)["response_id"]))
    calibration_rows = int(calibration.sum())
    if not include_calibration:
        rows = rows[~calibration.to_numpy()].reset_index(drop=True)
    if only_disagreements:
        drawn = rows["response_id"].isin(set(load_disagreement_draws(engine)["response_id"]))
        rows = rows[drawn.to_numpy()].reset_index(drop=True)
    rows = rows.merge(_supporting_notes(load_label_notes(engine), gold), on=DECISION, how="left")
    rows = rows.merge(
        criteria[["case_pk", "criterion_id", "text"]].rename(columns={"text": "rubric_item"}),
        on=["case_pk", "criterion_id"],
        how="left",
    )
    return _TrainingRows(rows, outside_rubric, calibration_rows)


def _parts(rows: pd.DataFrame, holdout: list[str], seed: int, dev_fraction: float) -> np.ndarray:
    """The file of each row: heldout for the held-out models' responses, else dev or train by its case."""
    in_holdout = rows["model"].isin(holdout).to_numpy()
    pool = rows.loc[~in_holdout, "case_id"].drop_duplicates().tolist()
    dev_cases = split_cases(pool, seed, dev_fraction)
    return np.where(in_holdout, "heldout", np.where(rows["case_id"].isin(dev_cases), "dev", "train"))


def _prompt_bodies(engine: Engine, responses: pd.DataFrame) -> tuple[dict, dict]:
    """The JSON bodies of each case's user message (by case_pk) and of each response (by response_id)."""
    cases = cases_with_text(engine).set_index("case_pk")
    message_body = {
        pk: json_body(user_message(context, request))
        for pk, context, request in zip(cases.index, cases["clinical_context"], cases["user_request"])
    }
    response_body = {
        response_id: json_body(text) for response_id, text in zip(responses["response_id"], responses["text"])
    }
    return message_body, response_body


def _write_rows(
    writers: dict[str, HashingWriter],
    rows: pd.DataFrame,
    part: np.ndarray,
    bodies: tuple[dict, dict],
    prompt: PromptTemplate,
    fmt: str,
    progress: Progress,
) -> int:
    """Write each row to its part's file; returns how many rows explain with a physician's note."""
    message_body, response_body = bodies
    item_body: dict[str, str] = {}
    generic = {met: json_text(judge_answer(GENERIC_EXPLANATION[met], met)) for met in (True, False)}
    with_note = 0
    # Each line is exactly json.dumps(record, ensure_ascii=False) of the record below, built from
    # pre-encoded pieces: {"instruction": prompt, "output": answer, "meta": {case_id, model, criterion_id}}
    # or {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}], "meta": …}.
    for index, (case_pk, response_id, rubric_item, note, met, where, meta) in enumerate(_row_values(rows, part)):
        item = item_body.get(rubric_item)
        if item is None:
            item = item_body[rubric_item] = json_body(rubric_item)
        instruction = prompt.fill_json_body(
            {"user_message": message_body[case_pk], "response": response_body[response_id], "rubric_item": item}
        )
        if isinstance(note, str) and note:
            with_note += 1
            answer = json_text(judge_answer(note, met))
        else:
            answer = generic[bool(met)]
        if fmt == "instruction":
            line = f'{{"instruction": "{instruction}", "output": {answer}, {meta}\n'
        else:
            line = (
                f'{{"messages": [{{"role": "user", "content": "{instruction}"}}, '
                f'{{"role": "assistant", "content": {answer}}}], {meta}\n'
            )
        writers[f"{where}.jsonl"].add(line)
        if index % PROGRESS_CHUNK == 0:
            progress(index, len(rows), "sft rows")
    return with_note


def _row_values(rows: pd.DataFrame, part: np.ndarray) -> Iterator[tuple]:
    """(case_pk, response_id, rubric item, note, met, file, meta text) of each row, in order.

    A block of rows at a time becomes Python values, so the whole frame never exists as Python objects at once.
    """
    for start in range(0, len(rows), ROWS_PER_BLOCK):
        block = rows.iloc[start : start + ROWS_PER_BLOCK]
        metas = (
            f'"meta": {{"case_id": {case_id}, "model": {model}, "criterion_id": {criterion_id}}}}}'
            for case_id, model, criterion_id in zip(
                json_texts(block["case_id"]), json_texts(block["model"]), json_texts(block["criterion_id"])
            )
        )
        yield from zip(
            block["case_pk"].tolist(),
            block["response_id"].tolist(),
            block["rubric_item"].tolist(),
            block["note"].tolist(),
            block["met"].tolist(),
            part[start : start + ROWS_PER_BLOCK].tolist(),
            metas,
        )


def _manifest(engine: Engine, seed: int, options: dict, chosen: _TrainingRows, written: _Written) -> dict:
    """manifest.json: the options, what each file holds, how explanations were chosen, the audit head."""
    return {
        "seed": seed,
        "gold_basis": options["gold_basis"],
        "options": options,
        "counts": {
            "rows": written.rows,
            "cases": written.cases,
            "explanations": {"physician_note": written.with_note, "generic": len(chosen.rows) - written.with_note},
            "gold_outside_current_rubric": chosen.outside_rubric,
            "calibration_sample_rows": {"found": chosen.calibration_rows, "included": options["include_calibration"]},
        },
        "explanation_rule": EXPLANATION_RULE,
        "files": written.files,
        "audit_head": audit_head(engine),
    }


def _summary(directory: Path, chosen: _TrainingRows, written: _Written, *, include_calibration: bool) -> ExportSummary:
    """What the command line prints and the export page shows, with what was left out and why."""
    summary = ExportSummary(
        "sft",
        directory,
        counts={"rows": written.rows, "cases": written.cases, "physician notes used": written.with_note},
        files={name: item["sha256"] for name, item in written.files.items()},
    )
    calibration_rows, outside_rubric = chosen.calibration_rows, chosen.outside_rubric
    if calibration_rows and not include_calibration:
        summary.notes.append(f"{calibration_rows} gold decision(s) on calibration-sample responses left out")
    if outside_rubric:
        summary.notes.append(f"{outside_rubric} gold decision(s) on criteria outside the current rubric skipped")
    if calibration_rows and not include_calibration:
        summary.left_out.append(left_out("calibration_rows", [], calibration_rows))
    if outside_rubric:
        summary.left_out.append(left_out("outside_rubric", [], outside_rubric))
    return summary
