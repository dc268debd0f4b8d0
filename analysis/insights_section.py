"""The report's section on the analysis depth (`analysis.reliability`): its keys of report.json and its tables.

`criteria` and `judges_by_model` are those of docs/REFERENCE.md §3.6; beyond it: judge fidelity per slice, the
human ceiling, agreement per slice and per annotator, and the flag rule used.
"""

from __future__ import annotations

import pandas as pd

from analysis.json_values import count, counts, number, numbers
from analysis.reliability.insights import Insights
from analysis.reliability.thresholds_and_counts import FLAGS, KAPPA_THRESHOLD, MIN_ALIGNED, MIN_DISAGREEMENTS


def section_json(insights: Insights) -> dict:
    """The keys report.json gets from the analysis depth, in the order the file lists them."""
    return {
        "criteria": _criteria_json(insights.criteria),
        "criteria_flags": _flags_json(insights.criteria),
        "judges_by_model": _judges_by_model_json(insights.judges_by_model),
        "judge_slices": _judge_slices_json(insights.judge_slices),
        "human_ceiling": _human_ceiling_json(insights.human_ceiling),
        "agreement_slices": _agreement_slices_json(insights.agreement_slices),
        "annotators": _annotators_json(insights.annotators),
    }


def _criteria_json(frame: pd.DataFrame) -> dict:
    """case_id → criterion_id → the groups' agreement on it, each judge's macro-F1 against gold, its flag."""
    judges = [column for column in frame.columns if column.startswith("judge_mf1:")]
    judge_names = [column.split(":", 1)[1] for column in judges]
    judge_values = list(zip(*(numbers(frame[column]) for column in judges))) if judges else [()] * len(frame)
    criteria: dict = {}
    for case_id, criterion_id, n, agree, kappa, p1, p2, gold, mf1s, flag in zip(
        frame["case_id"].tolist(),
        frame["criterion_id"].tolist(),
        counts(frame["n_aligned"]),
        numbers(frame["agreement"]),
        numbers(frame["kappa"]),
        numbers(frame["prevalence_g1"]),
        numbers(frame["prevalence_g2"]),
        numbers(frame["gold_met_rate"]),
        judge_values,
        frame["flag"].tolist(),
    ):
        criteria.setdefault(case_id, {})[criterion_id] = {
            "n_aligned": n,
            "agreement": agree,
            "kappa": kappa,
            "prevalence_g1": p1,
            "prevalence_g2": p2,
            "gold_met_rate": gold,
            "judge_mf1": dict(zip(judge_names, mf1s)),
            "flag": flag if isinstance(flag, str) else None,
        }
    return criteria


def _flags_json(criteria: pd.DataFrame) -> dict:
    """The flag rule and how many criteria each flag marks."""
    flags = criteria["flag"].value_counts()
    return {
        "kappa_threshold": KAPPA_THRESHOLD,
        "min_aligned": MIN_ALIGNED,
        "min_disagreements": MIN_DISAGREEMENTS,
        "counts": {flag: int(flags.get(flag, 0)) for flag in FLAGS},
    }


def _judges_by_model_json(frame: pd.DataFrame) -> dict:
    """judge → model → the judge's macro-F1 against each group and gold on that model's responses."""
    by_model: dict = {}
    for row in frame.itertuples(index=False):
        by_model.setdefault(row.judge, {})[row.model] = {
            "mf1_group1": number(row.mf1_group1),
            "mf1_group2": number(row.mf1_group2),
            "mf1_gold": number(row.mf1_gold),
            "n_decisions": count(row.n_decisions),
        }
    return by_model


def _judge_slices_json(frame: pd.DataFrame) -> dict:
    """judge → slice dimension → value → the judge's macro-F1 against each group and gold."""
    judge_slices: dict = {}
    for row in frame.itertuples(index=False):
        judge_slices.setdefault(row.judge, {}).setdefault(row.dimension, {})[str(row.value)] = {
            "mf1_group1": number(row.mf1_group1),
            "mf1_group2": number(row.mf1_group2),
            "mf1_gold": number(row.mf1_gold),
            "n_decisions": count(row.n_decisions),
        }
    return judge_slices


def _human_ceiling_json(ceiling: dict) -> dict:
    """The physicians against the other group, in all and by group."""
    return {
        "pooled_mf1": number(ceiling["pooled_mf1"]),
        "n_decisions": count(ceiling["n_decisions"]),
        "by_group": {
            str(group): {"pooled_mf1": number(values["pooled_mf1"]), "n_decisions": count(values["n_decisions"])}
            for group, values in ceiling["by_group"].items()
        },
    }


def _agreement_slices_json(frame: pd.DataFrame) -> dict:
    """slice dimension → value → the groups' pooled macro-F1 with its bootstrap interval."""
    agreement_slices: dict = {}
    for row in frame.itertuples(index=False):
        agreement_slices.setdefault(row.dimension, {})[str(row.value)] = {
            "pooled_mf1": number(row.pooled_mf1),
            "interval": [number(row.pooled_mf1_low), number(row.pooled_mf1_high)],
            "n_aligned": count(row.n_aligned),
            "n_decisions": count(row.n_decisions),
        }
    return agreement_slices


def _annotators_json(frame: pd.DataFrame) -> dict:
    """username → agreement with the other group (with its interval) and the within-group check corrections."""
    return {
        row.username: {
            "group": count(row.group),
            "pooled_mf1": number(row.pooled_mf1),
            "interval": [number(row.pooled_mf1_low), number(row.pooled_mf1_high)],
            "n_decisions": count(row.n_decisions),
            "n_labels": count(row.n_labels),
            "n_checked": count(row.n_checked),
            "n_corrected": count(row.n_corrected),
            "correction_rate": number(row.correction_rate),
        }
        for row in frame.itertuples(index=False)
    }


def section_tables(insights: Insights) -> dict[str, pd.DataFrame]:
    """The analysis depth's tables, as the CSV files and the dashboard show them."""
    ceiling = insights.human_ceiling
    ceiling_rows = [{"group": "(all)", "pooled_mf1": ceiling["pooled_mf1"], "n_decisions": ceiling["n_decisions"]}]
    ceiling_rows += [{"group": str(group), **values} for group, values in ceiling["by_group"].items()]
    return {
        "criteria": insights.criteria.drop(columns=["case_row", "slot"]),
        "judges_by_model": insights.judges_by_model,
        "judge_slices": insights.judge_slices,
        "human_ceiling": pd.DataFrame(ceiling_rows),
        "agreement_slices": insights.agreement_slices,
        "annotators": insights.annotators.drop(columns=["user_id"]),
    }
