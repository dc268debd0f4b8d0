"""`clinconsensus report`: every figure of docs/REFERENCE.md §4 into report.json (§3.6), CSV tables and one HTML file.

`build_report(frames, k, source)` is pure (frames in, numbers out) and serves the command line, the
dashboard and the benchmark. JSON has no NaN: a value that is undefined — a model without complete
responses, a macro-F1 over no decisions, a correlation of constant input or of fewer than two
points, a top-k overlap with no ranked model — is written as null.

Conventions where §3.6 leaves a choice: `top3`/`top5` are the size of the intersection of the two
top-k model sets divided by min(k, models ranked) (§4; ties in a ranking are broken by model name);
a ranking uses only the models both sides score. `n_aligned` counts aligned (model, case)
pairs. Decisions count only for criteria of the case's current approved rubric; `n_decisions` of a
judge counts all its rows.

Beyond §3.6 (under keys of their own): `source`, `confidence_intervals` (bootstrap over cases),
`agreement_extra` (κ, PABAK, AC1 beside MF1), `criterion_agreement` (the lowest-agreement criteria),
`low_agreement_cases` (the tail of cases by mean case-level MF1), and with a judge named for it,
`judge_scored_models` (models the source does not score, scored by that judge, marked `scored_by`);
from `analysis.reliability`: `criteria_flags` (the flag rule and counts), `judge_slices` (judge
fidelity per slice value), `human_ceiling` (physicians against the other group), `agreement_slices`
and `annotators` (pooled MF1 with bootstrap bounds; per annotator also the within-group check
corrections); from `analysis.time_agreement`: `time_agreement` (time on task against agreement with
the other group, per annotator and per time bucket, with Spearman's ρ and its n).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
import orjson
import pandas as pd

from analysis import (
    agreement as agreement_extra,
    comparisons,
    insights_section,
    metrics,
    provenance,
    rubric_quality,
    score_section,
    score_tables,
    static_figures,
    time_section,
    validity_section,
)
from analysis.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, LEVEL, confidence_intervals
from analysis.case_scores import case_scores
from analysis.exports.csv_cells import write_csv
from analysis.exports.paths import open_for_writing, output_dir, output_file, write_text
from analysis.figures import figures as figure_builders, html_report, translator
from analysis.frames import JUDGE_PREFIX, Frames
from analysis.grid import DecisionGrid, prepare
from analysis.json_values import count, number
from analysis.loader import load_frames
from analysis.reliability.insights import Insights, build_insights
from analysis.reliability.slices_and_judges import judges_by_model
from analysis.score_figures import score_figures
from analysis.time_agreement import TimeAgreement, time_agreement
from db.rules.errors import ValidationFailed
from db.rules.gold import DEFAULT_MIN_RESPONSES, FINAL, check_basis, check_min_responses
from db.rules.progress_report import Progress, no_progress

TOP_CRITERIA_IN_JSON = agreement_extra.LOWEST_CRITERIA


@dataclass
class Report:
    k: int
    n: int
    source: str
    grid: DecisionGrid
    scores: metrics.Scores
    models: pd.DataFrame
    agreement: metrics.Agreement
    judges: pd.DataFrame
    sensitivity: pd.DataFrame
    length: dict
    cross_grader: pd.DataFrame
    positive_rates: pd.DataFrame
    slices: pd.DataFrame
    pending: dict
    coefficients: pd.DataFrame
    criterion_agreement: pd.DataFrame
    low_agreement_cases: pd.DataFrame
    intervals: pd.DataFrame | None = None
    bootstrap: dict = field(default_factory=dict)
    # Models the source does not score, scored by a judge instead (see metrics.judge_scored_models).
    judge_scored: pd.DataFrame | None = None
    insights: Insights | None = None
    # Time on task against agreement (empty without stored timings; None when the frames or grid carry none).
    time: TimeAgreement | None = None
    # Comparisons, tiers, calibrated scores, ranking fidelity (analysis.score_section).
    scores_section: score_section.ScoreSection | None = None
    # The gold basis every gold figure stands on, and the ranking minimum (docs/REFERENCE.md §4.1).
    gold_basis: str = FINAL
    min_responses: int = DEFAULT_MIN_RESPONSES
    # Rubric quality (docs/REFERENCE.md §4.2): item–rest and redundancy per criterion; anchor validity per case
    # (None when the report was built without the database's validation runs).
    rubric_quality: pd.DataFrame | None = None
    rubric_validity: dict | None = None
    # What authors did with LLM drafts (analysis.provenance), read beside the frames by run_report.
    rubric_provenance: dict | None = None


def build_report(
    frames: Frames | None,
    k: int = metrics.DEFAULT_K,
    source: str = metrics.GOLD,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    grid: DecisionGrid | None = None,
    judge_scored: str | None = None,
    insights: bool = True,
    heldout_models: list[str] | None = None,
    gold_basis: str | None = None,
    min_responses: int | None = None,
) -> Report:
    """Every metric over `frames` (or an already prepared `grid` of them, `frames` then None).

    `judge_scored`: a judge's name; models the source does not score (no complete response, e.g. a
    new model with responses only) are scored by that judge and listed apart, marked.
    `insights=False` leaves out the analysis depth of `analysis.reliability` (criteria, judges by
    model and slice, physicians). `heldout_models`: judge figures (`judges`, `judges_by_model`,
    `judge_ranking`, `calibrated`) over those models' responses only. `gold_basis` (final or provisional)
    and `min_responses` (the ranking minimum): docs/REFERENCE.md §4.1; None reads the settings
    (`CLINCONSENSUS_GOLD_BASIS`, `CLINCONSENSUS_MIN_RESPONSES`; else final and 20).
    """
    gold_basis = check_basis(gold_basis)
    min_responses = check_min_responses(min_responses)
    if grid is None:
        if frames is None:
            raise ValueError("build_report needs the frames or their grid")
        grid = prepare(frames)
    n = grid.rubric_size
    k = metrics.validate_k(k, n)
    every = grid
    grid = grid.on_basis(gold_basis)
    judged = score_section.heldout_grid(grid, heldout_models)
    report = _core_report(every, grid, judged, k, source, gold_basis, min_responses)
    scores, models, agreement = report.scores, report.models, report.agreement
    if frames is not None and frames.timings is not None:
        report.time = time_agreement(grid, frames.timings, frames.users)
    if judge_scored:
        metrics.source_labels(grid, JUDGE_PREFIX + judge_scored)  # an unknown judge is named
        report.judge_scored = metrics.judge_scored_models(grid, source, judge_scored, k)
    if resamples:
        report.intervals = confidence_intervals(grid, scores, agreement, k, resamples=resamples, seed=seed)
        report.bootstrap = {"level": LEVEL, "resamples": resamples, "seed": seed, "unit": "case"}
    if insights:
        report.insights = build_insights(grid, resamples=resamples, seed=seed)
        if heldout_models:
            report.insights.judges_by_model = judges_by_model(judged)
    report.rubric_quality = rubric_quality.criteria_quality(grid)
    samples = frames.calibration if frames is not None else grid.calibration
    report.scores_section = score_section.build_section(
        grid,
        scores,
        models,
        report.intervals,
        k,
        samples=samples,
        heldout_models=heldout_models,
        min_responses=min_responses,
    )
    return report


def _core_report(
    every: DecisionGrid, grid: DecisionGrid, judged: DecisionGrid, k: int, source: str, basis: str, minimum: int
) -> Report:
    """The report's sections every report has, on `grid` (the grid on the gold basis; `every`: on the provisional
    one; `judged`: the held-out models' part, for the judges' fidelity)."""
    n = grid.rubric_size
    scores = metrics.response_scores(grid, source)
    models = metrics.model_scores(grid, scores, k)
    ranked = models.loc[sorted(comparisons.ranked_models(models, minimum))]
    agreement = metrics.agreement(grid)
    return Report(
        k=k,
        n=n,
        source=source,
        grid=grid,
        scores=scores,
        models=models,
        agreement=agreement,
        judges=metrics.judge_fidelity(judged),
        sensitivity=metrics.threshold_sensitivity(ranked, k, n=n),
        length=metrics.length_diagnostics(scores, k),
        cross_grader=metrics.cross_grader(grid),
        positive_rates=metrics.positive_rates(grid),
        slices=metrics.slices(grid, scores, k),
        pending=basis_pending(every, grid, source),
        coefficients=agreement_extra.agreement_coefficients(agreement),
        criterion_agreement=agreement_extra.criterion_agreement(grid),
        low_agreement_cases=agreement_extra.low_agreement_cases(agreement),
        gold_basis=basis,
        min_responses=minimum,
    )


def basis_pending(every: DecisionGrid, grid: DecisionGrid, source: str) -> dict[str, int]:
    """`pending` of report.json: unresolved disagreements and incomplete responses as §4 defines them (on
    `every`, the grid of the provisional basis), and `provisional_responses`: complete but not final under
    the final basis (`grid`), 0 under the provisional one."""
    result = metrics.pending(every, metrics.response_scores(every, source))
    complete = metrics.complete_mask(every, every.gold)
    provisional = complete & ~every.final if grid.basis == FINAL else np.zeros(len(complete), dtype=bool)
    result["provisional_responses"] = int(provisional.sum())
    return result


# report.json -----------------------------------------------------------------------------------


def report_json(report: Report) -> dict:
    """report.json's document (docs/REFERENCE.md §3.6, and the keys beyond it): JSON-safe values, keys in order."""
    result = {
        "k": report.k,
        "n": report.n,
        "models": _models_json(report),
        "agreement": _agreement_json(report.agreement.per_model),
        "agreement_overall": {
            "pooled_mf1": number(report.agreement.overall_mf1),
            "n_aligned": report.agreement.n_aligned,
        },
        "judges": _judges_json(report.judges),
        "threshold_sensitivity": {
            str(k2): {"spearman": number(row["spearman"]), "top3": number(row["top3"]), "top5": number(row["top5"])}
            for k2, row in report.sensitivity.iterrows()
        },
        "length": {key: number(value) for key, value in report.length.items()},
        "cross_grader": _cross_grader_json(report.cross_grader),
        "slices": _slices_json(report.slices),
        "pending": {key: count(value) for key, value in report.pending.items()},
        "source": report.source,
        "gold_basis": report.gold_basis,
        "min_responses": report.min_responses,
    }
    if report.judge_scored is not None:
        result["judge_scored_models"] = _judge_scored_json(report.judge_scored)
    result["confidence_intervals"] = _intervals_json(report)
    result["agreement_extra"] = _coefficients_json(report.coefficients)
    result["criterion_agreement"] = _criterion_agreement_json(report.criterion_agreement)
    result["low_agreement_cases"] = _low_agreement_cases_json(report.low_agreement_cases)
    if report.insights is not None:
        result.update(insights_section.section_json(report.insights))
    if report.time is not None:
        result["time_agreement"] = time_section.section_json(report.time)
    if report.scores_section is not None:
        result.update(report.scores_section.as_json())
    criteria = result.get("criteria")
    if report.rubric_quality is not None and isinstance(criteria, dict):
        validity_section.add_quality(criteria, report.rubric_quality)
    if report.rubric_validity is not None:
        result["rubric_validity"] = report.rubric_validity
    if report.rubric_provenance is not None:
        result["rubric_provenance"] = report.rubric_provenance
    return result


def _models_json(report: Report) -> dict:
    """model → its scores under the report's source, with CACS at every threshold."""
    return {
        model: {
            "n_responses": count(row["n_responses"]),
            "rubric_accuracy": number(row["rubric_accuracy"]),
            "pass_at_k": number(row["pass_at_k"]),
            "cacs_at_k": number(row["cacs_at_k"]),
            "cacs_by_k": {str(t): number(row[f"cacs@{t}"]) for t in range(1, report.n + 1)},
            "mean_length": number(row["mean_length"]),
        }
        for model, row in report.models.iterrows()
    }


def _agreement_json(per_model: pd.DataFrame) -> dict:
    """model → agreement between the expert groups on its aligned pairs, and who labeled and checked."""
    return {
        model: {
            "pooled_mf1": number(row["pooled_mf1"]),
            "case_mf1_mean": number(row["case_mf1_mean"]),
            "case_mf1_median": number(row["case_mf1_median"]),
            "n_aligned": count(row["n_aligned"]),
            "annotators": [count(row["annotators_g1"]), count(row["annotators_g2"])],
            "checkers": [count(row["checkers_g1"]), count(row["checkers_g2"])],
        }
        for model, row in per_model.iterrows()
    }


def _judges_json(judges: pd.DataFrame) -> dict:
    """judge → its macro-F1 against each group, their mean and gold."""
    return {
        judge: {
            "mf1_group1": number(row["mf1_group1"]),
            "mf1_group2": number(row["mf1_group2"]),
            "mf1_mean": number(row["mf1_mean"]),
            "mf1_gold": number(row["mf1_gold"]),
            "n_decisions": count(row["n_decisions"]),
        }
        for judge, row in judges.iterrows()
    }


def _cross_grader_json(cross_grader: pd.DataFrame) -> list:
    """How far each pair of judges ranks and scores the models alike."""
    return [
        {
            "judges": [row["judge_a"], row["judge_b"]],
            "spearman": number(row["spearman"]),
            "kendall_tau_b": number(row["kendall_tau_b"]),
            "mean_abs_diff_pp": number(row["mean_abs_diff_pp"]),
            "top3": number(row["top3"]),
            "top5": number(row["top5"]),
        }
        for _, row in cross_grader.iterrows()
    ]


def _judge_scored_json(judge_scored: pd.DataFrame) -> dict:
    """model → its scores by the judge named for models the source does not score, marked `scored_by`."""
    return {
        model: {
            "scored_by": row["scored_by"],
            "n_responses": count(row["n_responses"]),
            "rubric_accuracy": number(row["rubric_accuracy"]),
            "pass_at_k": number(row["pass_at_k"]),
            "cacs_at_k": number(row["cacs_at_k"]),
        }
        for model, row in judge_scored.iterrows()
    }


def _coefficients_json(coefficients: pd.DataFrame) -> dict:
    """model → κ, PABAK and AC1 beside the groups' macro-F1 (`agreement_extra`)."""
    return {
        model: {
            "pooled_mf1": number(row["pooled_mf1"]),
            "kappa": number(row["kappa"]),
            "pabak": number(row["pabak"]),
            "ac1": number(row["ac1"]),
            "observed_agreement": number(row["observed"]),
            "n_decisions": count(row["n_decisions"]),
        }
        for model, row in coefficients.iterrows()
    }


def _criterion_agreement_json(criteria: pd.DataFrame) -> dict:
    """How many criteria were compared, and the lowest-agreement ones."""
    return {
        "n_criteria": int(len(criteria)),
        "lowest": [
            {
                "case_id": row["case_id"],
                "criterion_id": row["criterion_id"],
                "n_decisions": count(row["n_decisions"]),
                "agreement": number(row["agreement"]),
                "met_rate_group1": number(row["met_rate_group1"]),
                "met_rate_group2": number(row["met_rate_group2"]),
            }
            for _, row in criteria.head(TOP_CRITERIA_IN_JSON).iterrows()
        ],
    }


def _low_agreement_cases_json(cases: pd.DataFrame) -> dict:
    """The tail of cases by mean case-level macro-F1, and the share of cases it is."""
    return {
        "share": agreement_extra.TAIL_SHARE,
        "cases": [
            {
                "case_id": row["case_id"],
                "n_aligned": count(row["n_aligned"]),
                "mean_case_mf1": number(row["mean_case_mf1"]),
                "min_case_mf1": number(row["min_case_mf1"]),
            }
            for _, row in cases.iterrows()
        ],
    }


def _slices_json(frame: pd.DataFrame) -> dict:
    result: dict = {dimension: {} for dimension in metrics.SLICE_DIMENSIONS}
    for dimension, value, model, score in frame[["dimension", "value", "model", "cacs_at_k"]].itertuples(index=False):
        result[dimension].setdefault(str(value), {})[model] = number(score)
    return result


def _intervals_json(report: Report) -> dict:
    if report.intervals is None:
        return {}
    models = {}
    for model, row in report.intervals.iterrows():
        models[model] = {
            metric: [number(row[f"{metric}_low"]), number(row[f"{metric}_high"])]
            for metric in ("cacs_at_k", "rubric_accuracy", "pooled_mf1")
        }
    return {**report.bootstrap, "models": models}


# Tables ----------------------------------------------------------------------------------------


def tables(report: Report) -> dict[str, pd.DataFrame]:
    """Every table of the report, as frames (what the CSV files and the dashboard show)."""
    models = report.models.copy()
    if report.intervals is not None:
        models = models.join(report.intervals)
    models["scored_by"] = report.source
    if report.judge_scored is not None and len(report.judge_scored):
        # Beside the others, marked: rows of models only a judge has scored replace their empty rows.
        models = pd.concat([models.drop(index=report.judge_scored.index), report.judge_scored])
    agreement = report.agreement.per_model.drop(columns=["a", "b", "c", "d"])
    cross = report.cross_grader
    return {
        "models": models.reset_index(),
        "agreement": pd.concat(
            [
                agreement.reset_index(),
                pd.DataFrame(
                    [
                        {
                            "model": agreement_extra.ALL,
                            "pooled_mf1": report.agreement.overall_mf1,
                            "n_aligned": report.agreement.n_aligned,
                        }
                    ]
                ),
            ],
            ignore_index=True,
        ),
        "agreement_extra": report.coefficients.reset_index(),
        "judges": report.judges.reset_index(),
        "threshold_sensitivity": report.sensitivity.reset_index(),
        "length": pd.DataFrame([report.length]),
        "cross_grader": cross,
        "positive_rates": report.positive_rates.reset_index()
        if len(report.positive_rates.columns)
        else pd.DataFrame({"model": report.grid.models}),
        "slices": report.slices,
        "pending": pd.DataFrame([report.pending]),
        "criterion_agreement": report.criterion_agreement,
        "low_agreement_cases": report.low_agreement_cases,
        "case_mf1": report.agreement.pairs.drop(columns=["case_row"]),
        **(insights_section.section_tables(report.insights) if report.insights is not None else {}),
        **(time_section.section_tables(report.time) if report.time is not None else {}),
    }


MODEL_COLUMNS = ["n_responses", "rubric_accuracy", "pass_at_k", "cacs_at_k", "mean_length"]
AGREEMENT_COLUMNS = [
    "pooled_mf1",
    "case_mf1_mean",
    "case_mf1_median",
    "n_aligned",
    "annotators_g1",
    "annotators_g2",
    "checkers_g1",
    "checkers_g2",
]


def print_tables(report: Report, stream: TextIO) -> None:
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.float_format", "{:.4f}".format):
        print(
            f"Models (source {report.source}, gold basis {report.gold_basis}, k = {report.k}, N = {report.n}; "
            f"complete responses only; ranked with at least {report.min_responses})",
            file=stream,
        )
        print(report.models[MODEL_COLUMNS].to_string(), file=stream)
        print(file=stream)
        if report.judge_scored is not None and len(report.judge_scored):
            by = report.judge_scored["scored_by"].iloc[0]
            print(
                f"Models scored by {by} (judge-scored, not physician-scored; no complete response under "
                f"{report.source})",
                file=stream,
            )
            print(report.judge_scored[MODEL_COLUMNS].to_string(), file=stream)
            print(file=stream)
        print("Agreement between the expert groups (aligned pairs)", file=stream)
        print(report.agreement.per_model[AGREEMENT_COLUMNS].to_string(), file=stream)
        overall = number(report.agreement.overall_mf1)
        print(
            f"overall pooled MF1: {'n/a' if overall is None else f'{overall:.4f}'} over "
            f"{report.agreement.n_aligned} aligned pairs",
            file=stream,
        )
        print(
            f"pending: {report.pending['unresolved_disagreements']} unresolved disagreements, "
            f"{report.pending['incomplete_responses']} incomplete responses, "
            f"{report.pending.get('provisional_responses', 0)} provisional responses",
            file=stream,
        )


def json_bytes(document: dict) -> bytes:
    """report.json (UTF-8): the layout of `json.dumps(indent=2, ensure_ascii=False)` (same lines, keys, order
    and float values), written by orjson, as bytes (decoding them to text would hold a second copy). A small
    number may be spelled differently (`0.000078` for `7.8e-05`); both read back as the same float.
    `report_json` has already turned every NaN and infinity into null."""
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE)


def write_json(report: Report, path: Path) -> None:
    with open_for_writing(output_file(path), "wb") as handle:
        handle.write(json_bytes(report_json(report)))


def write_tables(report: Report, out_dir: Path) -> list[Path]:
    out_dir = output_dir(out_dir)
    written = []
    for name, frame in tables(report).items():
        path = out_dir / f"{name}.csv"
        write_csv(frame, path)
        written.append(path)
    # The published scores, as report.json holds them (analysis.score_tables; sections of report.html too).
    for name, frame in score_tables.score_tables(report.scores_section).items():
        path = out_dir / f"{name}.csv"
        write_csv(frame, path)
        written.append(path)
    # Kept out of tables(): one row per response is too long for the HTML report and the dashboard.
    written.append(out_dir / "case_scores.csv")
    write_csv(case_scores(report.grid, report.scores, report.k), written[-1])
    return written


def write_html(report: Report, path: Path, lang: str = "en") -> None:
    write_text(path, html_report(report, tables(report), lang=lang))


def run_report(
    engine,
    *,
    k: int = metrics.DEFAULT_K,
    source: str = metrics.GOLD,
    json_path=None,
    out_dir=None,
    figures: bool = False,
    lang: str = "zh",
    stream: TextIO = sys.stdout,
    progress: Progress = no_progress,
    judge_scored: str | None = None,
    heldout_models: list[str] | None = None,
    gold_basis: str | None = None,
    min_responses: int | None = None,
) -> Report:
    """Load the database, compute, print the model and agreement tables, write what was asked for.

    With `figures`, every figure of the HTML report is also written to `out_dir/figures/` as PNG and SVG.
    """
    gold_basis, min_responses = check_basis(gold_basis), check_min_responses(min_responses)
    if figures and not out_dir:
        raise ValidationFailed("--figures: give --out DIR for the image files")
    if figures:
        static_figures.browser_path()  # no browser: say so before the long part
    # A target that cannot be written is said before the long part, and again as each file is written.
    if json_path:
        output_file(json_path)
    if out_dir:
        output_dir(out_dir, create=False)
    steps = 2 + bool(json_path) + bool(out_dir) + bool(figures)
    progress(0, steps, "loading the database")
    frames = load_frames(engine)
    progress(1, steps, "computing")
    report = build_report(
        frames,
        k=k,
        source=source,
        judge_scored=judge_scored,
        heldout_models=heldout_models,
        gold_basis=gold_basis,
        min_responses=min_responses,
    )
    report.rubric_validity = validity_section.load_validity(engine, report.grid, report.k)
    report.rubric_provenance = provenance.section_json(provenance.load_provenance(engine))
    del frames  # the report holds its grid: the decision rows go before writing
    done = 2
    print_tables(report, stream)
    if json_path:
        write_json(report, Path(json_path))
        done += 1
        progress(done, steps, f"wrote {json_path}")
    if out_dir:
        write_tables(report, Path(out_dir))
        write_html(report, Path(out_dir) / "report.html", lang=lang)
        done += 1
        progress(done, steps, f"wrote tables and report.html to {out_dir}")
    if figures:
        folder = output_dir(Path(out_dir) / "figures")
        drawn = figure_builders(report, translator(lang)) + score_figures(report, translator(lang))
        written = static_figures.write_figures(drawn, folder)
        done += 1
        progress(done, steps, f"wrote {len(written)} images to {Path(out_dir) / 'figures'}")
    progress(steps, steps, "done")
    return report
