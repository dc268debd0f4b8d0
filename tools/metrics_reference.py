"""Seeded synthetic frames and a straightforward reference implementation of the report metrics.

The reference loops over responses and aligned pairs and calls `sklearn.metrics.f1_score` per case,
exactly as docs/REFERENCE.md §4 reads; the property tests and the report benchmark check that the vectorised
metric code in `analysis/` gives the same numbers.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import f1_score

from analysis.frames import Frames
from db.rules.enums import NO_GROUP, Stage
from db.rules.gold import gold_labels, group_final_labels
from db.rules.taxonomy import get_taxonomy

THEMES = [
    "differential_diagnosis",
    "causal_reasoning",
    "treatment_planning",
    "medication_instructions",
    "evidence_retrieval",
    "chart_understanding",
    "patient_education",
    "lab_interpretation",
    "康复随访",
]
SUBJECTS = ["心内科", "消化内科", "神经内科", "妇产科", "普外科", "老年医学科", "皮肤科", "未知科室"]
ROLES = ["患者家属", "心内科医生", "护士", "患者本人", "医学生"]


def synthetic_frames(
    n_cases: int = 40,
    n_models: int = 4,
    n: int = 30,
    seed: int = 0,
    *,
    judges: tuple[str, ...] = ("judge-a", "judge-b"),
    check_share: float = 0.05,
    adjudication_share: float = 0.5,
    missing_share: float = 0.002,
    annotators_per_group: int = 12,
) -> Frames:
    """Frames shaped like `analysis.loader.load_frames`, with seeded labels of varying quality."""
    rng = np.random.default_rng(seed)
    cases = _synthetic_cases(rng, n_cases, n)
    case_pk = cases["case_pk"].to_numpy()
    criteria = pd.DataFrame(
        {
            "case_pk": np.repeat(case_pk, n),
            "rubric_version_id": np.repeat(case_pk, n),
            "position": np.tile(np.arange(1, n + 1), n_cases),
            "criterion_id": np.tile([f"c{i:02d}" for i in range(1, n + 1)], n_cases),
        }
    )
    responses, truth = _synthetic_responses(rng, cases, n_models, n)
    # One entry per (response, criterion), responses in order, criteria in position order.
    decisions = (
        np.repeat(responses["response_id"].to_numpy(), n),
        np.tile(np.array([f"c{i:02d}" for i in range(1, n + 1)], dtype=object), len(responses)),
    )
    users = [{"user_id": 1, "username": "admin", "role": "admin", "group_no": None}]
    parts = []
    for group in (1, 2):
        parts += _group_labels(
            rng, truth, decisions, users, group, check_share, missing_share, annotators_per_group=annotators_per_group
        )
    labels = _with_adjudications(rng, pd.concat(parts, ignore_index=True), truth, decisions, adjudication_share)
    return Frames(
        cases=cases,
        criteria=criteria,
        responses=responses,
        labels=labels,
        judge=_judge_decisions(rng, judges, truth, decisions, missing_share),
        users=pd.DataFrame(users),
    )


def _synthetic_cases(rng: np.random.Generator, n_cases: int, n: int) -> pd.DataFrame:
    """Cases with seeded themes, subjects, roles and difficulties, and their register and macro-category."""
    taxonomy = get_taxonomy()
    case_pk = np.arange(1, n_cases + 1)
    task_labels = [list(rng.choice(THEMES, size=rng.integers(1, 3), replace=False)) for _ in case_pk]
    subject_labels = [[str(rng.choice(SUBJECTS))] for _ in case_pk]
    roles = rng.choice(ROLES, size=n_cases)
    cases = pd.DataFrame(
        {
            "case_pk": case_pk,
            "case_id": [f"CC-{i:05d}" for i in case_pk],
            "difficulty": rng.choice(["low", "medium", "high"], size=n_cases),
            "task": [labels[0] for labels in task_labels],
            "task_labels": task_labels,
            "subject": [labels[0] for labels in subject_labels],
            "subject_labels": subject_labels,
            "user_role": roles,
        }
    )
    cases["register"] = [taxonomy.register(role) for role in roles]
    cases["macro_category"] = cases["subject_labels"].map(taxonomy.macro_category)
    cases["n_criteria"] = n
    return cases


def _synthetic_responses(
    rng: np.random.Generator, cases: pd.DataFrame, n_models: int, n: int
) -> tuple[pd.DataFrame, np.ndarray]:
    """Every model's response to every case, and the truth of each (response, criterion)."""
    n_cases = len(cases)
    case_pk = cases["case_pk"].to_numpy()
    models = [f"model-{chr(ord('a') + i)}" for i in range(n_models)]
    responses = pd.DataFrame({"case_pk": np.repeat(case_pk, n_models), "model": np.tile(models, n_cases)})
    responses.insert(0, "response_id", np.arange(1, len(responses) + 1))
    responses.insert(2, "case_id", responses["case_pk"].map(dict(zip(cases["case_pk"], cases["case_id"]))))
    n_responses = len(responses)
    # Each response has a latent quality; decisions are met with that probability, and each group
    # (and judge) flips a few of them, so agreement and scores vary by model and case.
    quality = np.clip(rng.normal(0.35 + 0.5 * (np.arange(n_responses) % n_models) / max(n_models, 1), 0.2), 0, 1)
    responses["length"] = (400 + 2000 * quality + rng.normal(0, 300, n_responses)).clip(10).astype(int)
    truth = rng.random((n_responses, n)) < quality[:, None]
    return responses, truth


def _group_labels(
    rng: np.random.Generator,
    truth: np.ndarray,
    decisions: tuple[np.ndarray, np.ndarray],
    users: list[dict],
    group: int,
    check_share: float,
    missing_share: float,
    *,
    annotators_per_group: int,
) -> list[pd.DataFrame]:
    """One group's annotation labels (a few flipped, a few missing) and its checker's corrections; the group's
    accounts are added to `users`."""
    response_ids, criterion_ids = decisions
    n_responses, n = truth.shape
    flips = rng.random((n_responses, n)) < 0.08 + 0.04 * group
    met = (truth ^ flips).ravel()
    keep = rng.random(met.size) >= missing_share
    first_user = len(users) + 1
    users += [
        {"user_id": first_user + i, "username": f"g{group}-annotator-{i}", "role": "annotator", "group_no": group}
        for i in range(annotators_per_group)
    ]
    annotator = first_user + (np.repeat(np.arange(n_responses), n) * 7 + group) % annotators_per_group
    annotation = pd.DataFrame(
        {
            "response_id": response_ids[keep],
            "criterion_id": criterion_ids[keep],
            "stage": Stage.annotation,
            "group_no": group,
            "met": met[keep],
            "user_id": annotator[keep],
        }
    )
    checker = len(users) + 1
    users.append({"user_id": checker, "username": f"g{group}-checker", "role": "checker", "group_no": group})
    checked = keep & (rng.random(met.size) < check_share)
    check = pd.DataFrame(
        {
            "response_id": response_ids[checked],
            "criterion_id": criterion_ids[checked],
            "stage": Stage.check,
            "group_no": group,
            "met": truth.ravel()[checked],
            "user_id": checker,
        }
    )
    return [annotation, check]


def _with_adjudications(
    rng: np.random.Generator,
    labels: pd.DataFrame,
    truth: np.ndarray,
    decisions: tuple[np.ndarray, np.ndarray],
    adjudication_share: float,
) -> pd.DataFrame:
    """The labels, with a share of the groups' disagreements adjudicated to the truth."""
    response_ids, criterion_ids = decisions
    finals = group_final_labels(labels)
    wide = finals.pivot_table(
        index=["response_id", "criterion_id"], columns="group_no", values="met", aggfunc="first"
    ).reindex(columns=[1, 2])
    disagree = wide[(wide[1].notna() & wide[2].notna() & (wide[1] != wide[2]))].index.to_frame(index=False)
    adjudicate = disagree[rng.random(len(disagree)) < adjudication_share]
    if not len(adjudicate):
        return labels
    lookup = pd.Series(truth.ravel(), index=pd.MultiIndex.from_arrays([response_ids, criterion_ids]))
    met = lookup.reindex(pd.MultiIndex.from_frame(adjudicate[["response_id", "criterion_id"]])).to_numpy()
    adjudications = pd.DataFrame(
        {
            "response_id": adjudicate["response_id"].to_numpy(),
            "criterion_id": adjudicate["criterion_id"].to_numpy(),
            "stage": Stage.adjudication,
            "group_no": NO_GROUP,
            "met": met.astype(bool),
            "user_id": 1,
        }
    )
    return pd.concat([labels, adjudications], ignore_index=True)


def _judge_decisions(
    rng: np.random.Generator,
    judges: tuple[str, ...],
    truth: np.ndarray,
    decisions: tuple[np.ndarray, np.ndarray],
    missing_share: float,
) -> pd.DataFrame:
    """Each judge's decisions: the truth with a few more flips the later the judge, a few missing."""
    response_ids, criterion_ids = decisions
    judge_parts = []
    for index, judge in enumerate(judges):
        flips = rng.random(truth.shape) < 0.1 + 0.03 * index
        keep = rng.random(flips.size) >= missing_share
        judge_parts.append(
            pd.DataFrame(
                {
                    "judge": judge,
                    "response_id": response_ids[keep],
                    "criterion_id": criterion_ids[keep],
                    "met": (truth ^ flips).ravel()[keep],
                }
            )
        )
    if not judge_parts:
        return pd.DataFrame({"judge": [], "response_id": [], "criterion_id": [], "met": []})
    return pd.concat(judge_parts, ignore_index=True)


# The straightforward reference ---------------------------------------------------------------


def _nan_to_none(value):
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _cacs(s: int, k: int, n: int) -> float:
    return (s - k + 1) / (n - k + 1) if s >= k else 0.0


def reference_scores(frames: Frames, source: str = "gold") -> pd.DataFrame:
    """One row per complete response: response_id, model, case_pk, n, s, length (loops over responses)."""
    n_of_case = dict(zip(frames.cases["case_pk"], frames.cases["n_criteria"]))
    criteria_of_case = frames.criteria.groupby("case_pk")["criterion_id"].apply(set).to_dict()
    if source == "gold":
        decided = gold_labels(frames.labels)
    elif source in ("group1", "group2"):
        finals = group_final_labels(frames.labels)
        decided = finals[finals["group_no"] == int(source[-1])]
    else:
        decided = frames.judge[frames.judge["judge"] == source.split(":", 1)[1]]
    by_response = {rid: dict(zip(part["criterion_id"], part["met"])) for rid, part in decided.groupby("response_id")}
    rows = []
    for response in frames.responses.itertuples():
        criteria = criteria_of_case.get(response.case_pk, set())
        decisions = by_response.get(response.response_id, {})
        if not criteria or any(criterion not in decisions for criterion in criteria):
            continue
        s = sum(bool(decisions[criterion]) for criterion in criteria)
        rows.append(
            {
                "response_id": response.response_id,
                "model": response.model,
                "case_pk": response.case_pk,
                "n": n_of_case[response.case_pk],
                "s": s,
                "length": response.length,
            }
        )
    return pd.DataFrame(rows, columns=["response_id", "model", "case_pk", "n", "s", "length"])


def reference_model_scores(frames: Frames, k: int, source: str = "gold") -> dict:
    scores = reference_scores(frames, source)
    result = {}
    for model in sorted(frames.responses["model"].unique()):
        part = scores[scores["model"] == model]
        if part.empty:
            result[model] = {"n_responses": 0, "rubric_accuracy": None, "pass_at_k": None, "cacs_at_k": None}
            continue
        result[model] = {
            "n_responses": len(part),
            "rubric_accuracy": float(np.mean([s / n for s, n in zip(part["s"], part["n"])])),
            "pass_at_k": float(np.mean([1.0 if s >= k else 0.0 for s in part["s"]])),
            "cacs_at_k": float(np.mean([_cacs(s, k, n) for s, n in zip(part["s"], part["n"])])),
            "mean_length": float(np.mean(part["length"])),
        }
    return result


def reference_agreement(frames: Frames) -> dict:
    """Per model: case-level MF1 per aligned pair by looping over pairs; pooled MF1 over their decisions."""
    finals = group_final_labels(frames.labels)
    criteria_of_case = frames.criteria.groupby("case_pk")["criterion_id"].apply(list).to_dict()
    per_group = {
        g: {
            rid: dict(zip(part["criterion_id"], part["met"]))
            for rid, part in finals[finals["group_no"] == g].groupby("response_id")
        }
        for g in (1, 2)
    }
    result = {}
    all_g1: list[bool] = []
    all_g2: list[bool] = []
    for model, responses in frames.responses.groupby("model"):
        case_scores, pooled_g1, pooled_g2 = [], [], []
        for response in responses.itertuples():
            criteria = criteria_of_case.get(response.case_pk, [])
            one = per_group[1].get(response.response_id, {})
            two = per_group[2].get(response.response_id, {})
            if not criteria or any(c not in one or c not in two for c in criteria):
                continue
            g1 = [bool(one[c]) for c in criteria]
            g2 = [bool(two[c]) for c in criteria]
            case_scores.append(f1_score(g1, g2, average="macro"))
            pooled_g1 += g1
            pooled_g2 += g2
        all_g1 += pooled_g1
        all_g2 += pooled_g2
        result[model] = {
            "pooled_mf1": float(f1_score(pooled_g1, pooled_g2, average="macro")) if pooled_g1 else None,
            "case_mf1_mean": float(np.mean(case_scores)) if case_scores else None,
            "case_mf1_median": float(np.median(case_scores)) if case_scores else None,
            "n_aligned": len(case_scores),
        }
    overall = float(f1_score(all_g1, all_g2, average="macro")) if all_g1 else None
    return {
        "models": result,
        "overall": {"pooled_mf1": overall, "n_aligned": sum(r["n_aligned"] for r in result.values())},
    }


def reference_judge_fidelity(frames: Frames) -> dict:
    finals = group_final_labels(frames.labels)
    gold = gold_labels(frames.labels)
    result = {}
    for judge, decisions in frames.judge.groupby("judge"):
        entry = {"n_decisions": len(decisions)}
        references = {
            "mf1_group1": finals[finals["group_no"] == 1],
            "mf1_group2": finals[finals["group_no"] == 2],
            "mf1_gold": gold,
        }
        for key, reference in references.items():
            both = reference.merge(decisions, on=["response_id", "criterion_id"], suffixes=("_ref", "_judge"))
            entry[key] = (
                float(f1_score(both["met_ref"].astype(bool), both["met_judge"].astype(bool), average="macro"))
                if len(both)
                else None
            )
        values = [entry["mf1_group1"], entry["mf1_group2"]]
        entry["mf1_mean"] = None if None in values else (values[0] + values[1]) / 2
        result[judge] = entry
    return result


def reference_length(frames: Frames, k: int, source: str = "gold") -> dict:
    scores = reference_scores(frames, source)
    cacs = np.array([_cacs(s, k, n) for s, n in zip(scores["s"], scores["n"])])
    accuracy = (scores["s"] / scores["n"]).to_numpy(float)
    length = scores["length"].to_numpy(float)
    cacs_resid = cacs - scores.assign(v=cacs).groupby("case_pk")["v"].transform("mean").to_numpy()
    length_resid = length - scores.assign(v=length).groupby("case_pk")["v"].transform("mean").to_numpy()

    def corr(func, x, y):
        if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
            return None
        return _nan_to_none(func(x, y)[0])

    return {
        "pearson_cacs": corr(stats.pearsonr, length, cacs),
        "spearman_cacs": corr(stats.spearmanr, length, cacs),
        "pearson_accuracy": corr(stats.pearsonr, length, accuracy),
        "spearman_accuracy": corr(stats.spearmanr, length, accuracy),
        "partial_cacs": corr(stats.pearsonr, length_resid, cacs_resid),
    }
