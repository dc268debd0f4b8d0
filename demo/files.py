"""The synthetic data as JSON Lines files (cases, responses, labels, judges), in the formats the importers read."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from db.rules.errors import ValidationFailed
from db.rules.progress_report import Progress, no_progress
from db.rules.taxonomy import Taxonomy, get_taxonomy
from demo.content import (
    ADJUDICATION_ERROR,
    ANNOTATION_ERROR,
    CASE_EFFECT_SD,
    CASES_PER_TEAM,
    CHECK_CORRECTS,
    CRITERION_EFFECT_SD,
    DIFFICULTY_EFFECT,
    JUDGES,
    KIND_BONUS_SD,
    KIND_INDEX,
    KINDS,
    MACRO_BONUS_SD,
    MODELS,
    PLANS,
    CriterionSpec,
    DemoTeam,
    JudgeProfile,
    ModelProfile,
    ScalePlan,
    case_templates,
    compose_response,
    compose_rubric,
    team_count,
    team_of_case,
)
from demo.plan import Shape, WorkPlan, full_plan, small_plan

# Writing the files -----------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _label_line(
    case_id: str,
    model: str,
    criterion_id: str,
    met: bool,
    stage: str,
    group: int | None,
    annotator: str,
    note: str | None = None,
) -> str:
    row = {
        "case_id": case_id,
        "model": model,
        "criterion_id": criterion_id,
        "met": bool(met),
        "stage": stage,
        "group": group,
        "annotator": annotator,
    }
    if note:
        row["note"] = note
    return json.dumps(row, ensure_ascii=False) + "\n"


ANNOTATION_NOTES = ("回答未涉及该要点。", "回答仅笼统提及，未达到该条标准的具体要求。")
CHECK_NOTES = ("复核后更正：原标注与回答原文不符。", "复核回答原文后更正。")
ADJUDICATION_NOTES = {
    True: "两组意见不一；复核原文，回答已明确覆盖该要点，判定为满足。",
    False: "两组意见不一；复核原文，回答对该要点未提及或表述含糊，判定为不满足。",
}


def demo_case_id(index: int) -> str:
    """The case id of case `index` (from 0): CC-0001, CC-0002, …"""
    return f"CC-{index + 1:04d}"


@dataclass
class _Case:
    index: int
    case_id: str
    template: dict
    register: str
    age: int
    approved: bool
    criteria: list[CriterionSpec]
    team: DemoTeam


def resolve_plan(scale: str, n_cases: int | None, n_models: int | None, n_judges: int | None) -> ScalePlan:
    """The scale's plan with the sizes given instead of its own; refuses an unknown scale or a size out of range."""
    if scale not in PLANS:
        raise ValidationFailed(f"scale: must be small or full, found {scale!r}")
    plan = PLANS[scale]
    values = dict(plan.__dict__)
    for name, value in (("n_cases", n_cases), ("n_models", n_models), ("n_judges", n_judges)):
        if value is not None:
            values[name] = value
    if values["n_cases"] < 1:
        raise ValidationFailed("n_cases: at least 1")
    if not 1 <= values["n_models"] <= len(MODELS):
        raise ValidationFailed(f"n_models: 1 to {len(MODELS)}")
    if not 0 <= values["n_judges"] <= len(JUDGES):
        raise ValidationFailed(f"n_judges: 0 to {len(JUDGES)}")
    return ScalePlan(**values)


@dataclass(frozen=True)
class _World:
    """What every case of the data set draws on: the case templates, the models with their strengths by kind of
    criterion and by macro-category, and the judges."""

    templates: tuple[dict, ...]
    taxonomy: Taxonomy
    models: tuple[ModelProfile, ...]
    judges: tuple[JudgeProfile, ...]
    macro_ids: list[str]
    kind_bonus: np.ndarray
    macro_bonus: np.ndarray


def _world(plan: ScalePlan, rng: np.random.Generator) -> _World:
    taxonomy = get_taxonomy()
    models = MODELS[: plan.n_models]
    macro_ids = [macro["id"] for macro in taxonomy.raw["macro_categories"]]
    kind_bonus = rng.normal(0.0, KIND_BONUS_SD, (len(models), len(KINDS)))
    macro_bonus = rng.normal(0.0, MACRO_BONUS_SD, (len(models), len(macro_ids) + 1))
    return _World(case_templates(), taxonomy, models, JUDGES[: plan.n_judges], macro_ids, kind_bonus, macro_bonus)


@dataclass(frozen=True)
class _CasePlan:
    """Which template each case takes, which cases wait for a rubric, which are left for the admin, and the work
    plan: the state of every (case, model) response (demo/plan.py)."""

    template_index: np.ndarray
    waiting: set[int]
    unassigned: set[int]
    work: WorkPlan


#: The seed of the small demo's calibration draw (recorded in the draw's audit entry like any given seed).
CALIBRATION_SEED = 11


def _case_plan(scale: str, plan: ScalePlan, world: _World, rng: np.random.Generator) -> _CasePlan:
    n = plan.n_cases
    n_templates = len(world.templates)
    # The small demo shows every template, in order (and again from the first when it has more cases).
    template_index = np.arange(n) % n_templates if scale == "small" else rng.integers(0, n_templates, n)
    n_waiting = int(round(n * plan.waiting_share))
    waiting = set(rng.permutation(n)[:n_waiting].tolist())
    # The last few waiting cases and approved cases are left for the admin to hand out.
    unassigned = set(sorted(waiting)[len(waiting) - min(plan.unassigned_waiting, len(waiting)) :])
    approved = [i for i in range(n) if i not in waiting]
    unassigned |= set(approved[len(approved) - min(plan.unassigned_labeling, len(approved)) :])
    models = tuple(m.name for m in world.models)
    if plan.full_shares:
        work = full_plan(models, n, plan.full_shares, rng)
    else:
        work = small_plan(
            models,
            n,
            approved,
            unassigned,
            finished_cases=plan.finished_cases,
            all_final_cases=plan.all_final_cases,
            calibration_size=plan.calibration_size,
            calibration_seed=CALIBRATION_SEED,
            rng=rng,
        )
    return _CasePlan(template_index, waiting, unassigned, work)


@dataclass
class _Work:
    """Who is handed what: rubric authoring by author, labeling by annotator pair and round (the cases where every
    model is final are a round of their own: a finished round), the one submitted rubric."""

    rubric_authoring: defaultdict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    labeling: defaultdict[tuple[bool, str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    # calibration-sample responses of cases otherwise left unassigned: handed to the case's team, one by one
    sampled_alone: list[dict] = field(default_factory=list)
    submitted: dict | None = None
    author_turn: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))  # by team

    def hand_out_rubric(self, case: _Case) -> None:
        """The next author in turn of the case's team writes the case's rubric; the first such rubric is
        submitted for audit."""
        rotation = case.team.author_rotation
        turn = self.author_turn[case.team.number]
        author = rotation[turn % len(rotation)]
        self.author_turn[case.team.number] = turn + 1
        self.rubric_authoring[author.username].append(case.case_id)
        if self.submitted is None:
            self.submitted = {
                "case_id": case.case_id,
                "author": author.username,
                "criteria": [spec.record() for spec in case.criteria],
            }


def write_demo_files(
    out_dir: str | Path,
    *,
    scale: str = "small",
    seed: int = 7,
    n_cases: int | None = None,
    n_models: int | None = None,
    n_judges: int | None = None,
    cases_per_team: int = CASES_PER_TEAM,
    progress: Progress = no_progress,
) -> dict[str, Path]:
    """Write the demo data set into `out_dir`; returns {"cases", "responses", "labels", "plan", judge
    file stems…} → path. Sizes default to the scale's (full: 2,500 cases, 11 models, 3 judges).

    Case `i` belongs to team `i // cases_per_team + 1` (content.demo_people), whose physicians label, check,
    adjudicate and author it; up to `cases_per_team` cases the one team is DEMO_PEOPLE."""
    plan = resolve_plan(scale, n_cases, n_models, n_judges)
    team_count(plan.n_cases, cases_per_team)  # refuses a team size below 1
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    world = _world(plan, rng)
    n = plan.n_cases
    cases = _case_plan(scale, plan, world, rng)
    paths = {
        "cases": out / "cases.jsonl",
        "responses": out / "responses.jsonl",
        "labels": out / "labels.jsonl",
        "plan": out / "plan.json",
    }
    paths.update({judge.file_stem: out / f"{judge.file_stem}.jsonl" for judge in world.judges})
    buffer = 1 << 20
    # Closed in the `finally` below (several files open at once, written case by case).
    handles = {
        key: open(path, "w", encoding="utf-8", newline="\n", buffering=buffer)  # noqa: SIM115
        for key, path in paths.items()
        if key != "plan"
    }
    work = _Work()
    try:
        for i in range(n):
            template = world.templates[int(cases.template_index[i])]
            team = team_of_case(i, cases_per_team)
            if _write_case(i, template, team, world, plan, cases, work, handles, rng):
                progress(i + 1, n, "cases")
    finally:
        for handle in handles.values():
            handle.close()
    _write_plan(paths["plan"], scale, seed, n, world, work, cases)
    progress(n, n, "files written")
    return paths


def _write_case(
    i: int,
    template: dict,
    team: DemoTeam,
    world: _World,
    plan: ScalePlan,
    cases: _CasePlan,
    work: _Work,
    handles: dict,
    rng: np.random.Generator,
) -> bool:
    """Case `i`, its responses, and — with an approved rubric — its labels and judge decisions; or, waiting for
    a rubric, its authoring handed out. True when the case has an approved rubric."""
    register = world.taxonomy.register(template["user_role"])
    low, high = template["age"]
    case = _Case(
        index=i,
        case_id=demo_case_id(i),
        template=template,
        register=register,
        age=int(rng.integers(low, high + 1)),
        approved=i not in cases.waiting,
        criteria=compose_rubric(template, register, rng),
        team=team,
    )
    truth = _latent_truth(case, world, rng)
    handles["cases"].write(json.dumps(_case_record(case), ensure_ascii=False) + "\n")
    lengths = np.zeros(len(world.models))
    for m, model in enumerate(world.models):
        text = compose_response(template, case.criteria, truth[m], model, register, rng)
        lengths[m] = len(text)
        handles["responses"].write(
            json.dumps({"case_id": case.case_id, "model": model.name, "response": text}, ensure_ascii=False) + "\n"
        )

    if not case.approved:
        if i not in cases.unassigned:
            work.hand_out_rubric(case)
        return False
    pair = (team.annotators[1][i % 3].username, team.annotators[2][(i + i // 3) % 3].username)
    if i not in cases.unassigned:
        work.labeling[(i not in cases.work.feedback_cases, *pair)].append(case.case_id)
    elif (calibration := cases.work.calibration) and i in calibration.case_indices:
        # The draw would hand this response to any team's annotator: it goes to the case's own team first.
        work.sampled_alone.append(
            {"annotators": list(pair), "case_ids": [case.case_id], "models": [calibration.model], "finished": False}
        )
    states = [cases.work.shape(i, m) for m in range(len(world.models))]
    lines = _case_labels(case, world.models, truth, pair, states, rng)
    handles["labels"].write("".join(lines))
    if world.judges:
        _write_judges(case, world.models, world.judges, truth, lengths, handles, rng)
    return True


def _latent_truth(case: _Case, world: _World, rng: np.random.Generator) -> np.ndarray:
    """Whether each model's response meets each criterion: (models × criteria) booleans drawn from the model's
    ability, consistency and strengths, the case's difficulty and effect, and the criterion's."""
    template = case.template
    kinds = np.array([KIND_INDEX[spec.kind] for spec in case.criteria])
    macro = world.taxonomy.macro_category(template["subject_labels"])
    macro_col = world.macro_ids.index(macro) if macro in world.macro_ids else len(world.macro_ids)
    abilities = np.array([m.ability for m in world.models])
    spreads = np.array([m.spread for m in world.models])
    logit = (
        abilities[:, None]
        + DIFFICULTY_EFFECT[template["difficulty"]]
        + rng.normal(0.0, CASE_EFFECT_SD)
        + rng.normal(0.0, 1.0, len(world.models))[:, None] * spreads[:, None]
        + rng.normal(0.0, CRITERION_EFFECT_SD, len(case.criteria))[None, :]
        + world.kind_bonus[:, kinds]
        + world.macro_bonus[:, macro_col][:, None]
    )
    return rng.random(logit.shape) < _sigmoid(logit)


def _write_plan(path: Path, scale: str, seed: int, n: int, world: _World, work: _Work, cases: _CasePlan) -> None:
    """plan.json: the sizes, who is assigned what (the generator hands the work out from it), the state of every
    response, the round whose feedback opens and the calibration draw."""
    rounds = [
        {"annotators": [first, second], "case_ids": ids, "finished": not in_progress}
        for (in_progress, first, second), ids in sorted(work.labeling.items())
    ] + work.sampled_alone
    finished = [k for k, item in enumerate(rounds) if item["finished"]]
    plan = cases.work
    plan_record = {
        "scale": scale,
        "seed": seed,
        "n_cases": n,
        "models": [m.name for m in world.models],
        "judges": [j.name for j in world.judges],
        "rubric_authoring": dict(sorted(work.rubric_authoring.items())),
        "labeling": rounds,
        "feedback_round": finished[0] if finished else None,
        "calibration": plan.calibration.record(demo_case_id) if plan.calibration else None,
        "submitted_rubric": work.submitted,
        "states": {
            demo_case_id(i): [plan.state(i, m) for m in range(len(world.models))]
            for i in range(n)
            if i not in cases.waiting
        },
    }
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        json.dump(plan_record, handle, ensure_ascii=False, indent=1)
        handle.write("\n")


def _case_record(case: _Case) -> dict:
    template = case.template
    return {
        "case_id": case.case_id,
        "difficulty": template["difficulty"],
        "task": template["task"],
        "task_labels": list(template["task_labels"]),
        "subject": template["subject"],
        "subject_labels": list(template["subject_labels"]),
        "user_role": template["user_role"],
        "clinical_context": template["clinical_context"].replace("{age}", str(case.age)),
        "user_request": template["user_request"],
        "rubrics": [spec.record() for spec in case.criteria] if case.approved else [],
    }


def _coverage(shapes: list[Shape], group: int, size: int, partial: np.ndarray) -> np.ndarray:
    """How many criteria (the first ones) each response's group has labeled."""
    return np.array(
        [
            size if s.labeled[group - 1] == "all" else int(p) if s.labeled[group - 1] == "part" else 0
            for s, p in zip(shapes, partial, strict=True)
        ]
    )


def _case_labels(
    case: _Case,
    models: tuple[ModelProfile, ...],
    truth: np.ndarray,
    pair: tuple[str, str],
    shapes: list[Shape],
    rng: np.random.Generator,
) -> list[str]:
    """Annotation, check and adjudication lines of one case's responses, each as its planned state says (all
    draws vectorised). A checked group has a check label on every criterion (confirming or correcting); a response
    both groups checked and planned to stay open keeps at least one disagreement."""
    n_models, size = truth.shape
    error = ANNOTATION_ERROR[case.template["difficulty"]]
    annotation: dict[int, np.ndarray] = {g: truth ^ (rng.random(truth.shape) < error) for g in (1, 2)}
    partial = rng.integers(size // 4, size - size // 4, n_models)
    covered = {g: _coverage(shapes, g, size, partial) for g in (1, 2)}
    checked = {g: np.array([s.checked[g - 1] for s in shapes], dtype=bool) for g in (1, 2)}
    correction: dict[int, np.ndarray] = {
        g: (annotation[g] != truth) & (rng.random(truth.shape) < CHECK_CORRECTS) for g in (1, 2)
    }
    final: dict[int, np.ndarray] = {
        g: np.where(checked[g][:, None], annotation[g] ^ correction[g], annotation[g]) for g in (1, 2)
    }
    kept_open = checked[1] & checked[2] & np.array([not s.adjudicated for s in shapes])
    forced = rng.integers(0, size, (n_models,))
    for m in map(int, np.flatnonzero(kept_open & (final[1] == final[2]).all(axis=1))):
        # group 2's annotator missed criterion `f` and its checker confirmed it: one disagreement stays open
        f = int(forced[m])
        other = np.logical_not(final[1][m])
        annotation[2][m, f] = other[f]
        correction[2][m, f] = False
        final[2][m, f] = other[f]
    resolved = np.array([s.adjudicated for s in shapes], dtype=bool)
    adjudicated = (final[1] != final[2]) & resolved[:, None]
    adjudication = truth ^ (rng.random(truth.shape) < ADJUDICATION_ERROR)
    note_draw = rng.random(truth.shape)
    adjudicator = case.team.checkers[1 + case.index % 2].username

    ids = [spec.criterion_id for spec in case.criteria]
    lines: list[str] = []
    for m, model in enumerate(models):
        prefix = f'{{"case_id": "{case.case_id}", "model": "{model.name}", "criterion_id": "'
        for g in (1, 2):
            annotator = pair[g - 1]
            tail = f', "stage": "annotation", "group": {g}, "annotator": "{annotator}"}}\n'
            values = annotation[g][m]
            for j in range(int(covered[g][m])):
                if not values[j] and note_draw[m, j] < 0.03:
                    lines.append(
                        _label_line(
                            case.case_id,
                            model.name,
                            ids[j],
                            False,
                            "annotation",
                            g,
                            annotator,
                            ANNOTATION_NOTES[j % len(ANNOTATION_NOTES)],
                        )
                    )
                else:
                    lines.append(f'{prefix}{ids[j]}", "met": {"true" if values[j] else "false"}{tail}')
            if checked[g][m]:
                lines += _check_lines(case, model.name, ids, g, final[g][m], correction[g][m])
        for j in map(int, np.flatnonzero(adjudicated[m])):
            met = bool(adjudication[m, j])
            rationale = ADJUDICATION_NOTES[met] if note_draw[m, j] > 0.6 else None
            lines.append(
                _label_line(case.case_id, model.name, ids[j], met, "adjudication", None, adjudicator, rationale)
            )
    return lines


def _check_lines(
    case: _Case, model: str, ids: list[str], group: int, values: np.ndarray, corrected: np.ndarray
) -> list[str]:
    """The group checker's check label on every criterion of one response: confirming, or correcting with a note."""
    checker = case.team.checkers[group].username
    prefix = f'{{"case_id": "{case.case_id}", "model": "{model}", "criterion_id": "'
    tail = f', "stage": "check", "group": {group}, "annotator": "{checker}"}}\n'
    lines: list[str] = []
    for j, criterion_id in enumerate(ids):
        if corrected[j]:
            note = CHECK_NOTES[j % len(CHECK_NOTES)]
            lines.append(_label_line(case.case_id, model, criterion_id, bool(values[j]), "check", group, checker, note))
        else:
            lines.append(f'{prefix}{criterion_id}", "met": {"true" if values[j] else "false"}{tail}')
    return lines


def _write_judges(
    case: _Case,
    models: tuple[ModelProfile, ...],
    judges: tuple[JudgeProfile, ...],
    truth: np.ndarray,
    lengths: np.ndarray,
    handles: dict,
    rng: np.random.Generator,
) -> None:
    spread = lengths.std()
    length_z = (lengths - lengths.mean()) / spread if spread > 0 else np.zeros_like(lengths)
    ids = [spec.criterion_id for spec in case.criteria]
    for judge in judges:
        draw = rng.random(truth.shape)
        false_positive = judge.false_positive + judge.length_bias * np.clip(length_z, 0.0, 2.0)[:, None]
        verdict = np.where(truth, draw >= judge.false_negative, draw < false_positive)
        parts: list[str] = []
        for m, model in enumerate(models):
            prefix = (
                f'{{"judge": "{judge.name}", "case_id": "{case.case_id}", "model": "{model.name}", "criterion_id": "'
            )
            parts.extend(
                f'{prefix}{ids[j]}", "met": {"true" if verdict[m, j] else "false"}}}\n' for j in range(len(ids))
            )
        handles[judge.file_stem].write("".join(parts))
