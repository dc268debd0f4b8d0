"""How an analysis table or figure names what it shows, in the reader's language: each column's header
and kind (rate, score, count, …), each cell's text, and slice values by their taxonomy names.

Pure (no Streamlit): the dashboard's tables (`ui.table_view`), the figure builders and the
offline HTML report read the same definitions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable

from analysis.reliability.thresholds_and_counts import NO_TAG
from db.rules.taxonomy import get_taxonomy

Translator = Callable[..., str]

RATE, SCORE, COUNT, LENGTH, POINTS, TEXT = "rate", "score", "count", "length", "points", "text"
EMPTY = "—"

#: Every column an analysis table shows, by kind; its header is the catalog entry `analysis.column.<name>`.
COLUMNS: dict[str, str] = {
    "model": TEXT,
    "n_responses": COUNT,
    "rubric_accuracy": RATE,
    "pass_at_k": RATE,
    "cacs_at_k": RATE,
    "calibrated_cacs": RATE,
    "raw_cacs": RATE,
    "diff": RATE,
    "mean_length": LENGTH,
    "scored_by": TEXT,
    "scored_by_name": TEXT,
    "pooled_mf1": SCORE,
    "case_mf1_mean": SCORE,
    "case_mf1_median": SCORE,
    "n_aligned": COUNT,
    "annotators_g1": COUNT,
    "annotators_g2": COUNT,
    "checkers_g1": COUNT,
    "checkers_g2": COUNT,
    "observed": RATE,
    "kappa": SCORE,
    "pabak": SCORE,
    "ac1": SCORE,
    "n_decisions": COUNT,
    "judge": TEXT,
    "mf1_group1": SCORE,
    "mf1_group2": SCORE,
    "mf1_mean": SCORE,
    "mf1_gold": SCORE,
    "n_group1": COUNT,
    "n_group2": COUNT,
    "n_gold": COUNT,
    "k2": COUNT,
    "spearman": SCORE,
    "kendall_tau_b": SCORE,
    "top3": RATE,
    "top5": RATE,
    "pearson_cacs": SCORE,
    "spearman_cacs": SCORE,
    "pearson_accuracy": SCORE,
    "spearman_accuracy": SCORE,
    "partial_cacs": SCORE,
    "judge_a": TEXT,
    "judge_b": TEXT,
    "mean_abs_diff_pp": POINTS,
    "n_models": COUNT,
    "dimension": TEXT,
    "name": TEXT,
    "value": TEXT,
    "unresolved_disagreements": COUNT,
    "incomplete_responses": COUNT,
    "case_id": TEXT,
    "criterion_id": TEXT,
    "agreement": RATE,
    "met_rate_group1": RATE,
    "met_rate_group2": RATE,
    "mean_case_mf1": SCORE,
    "min_case_mf1": SCORE,
    "mf1": SCORE,
    "a": COUNT,
    "b": COUNT,
    "c": COUNT,
    "d": COUNT,
    # analysis depth
    "text": TEXT,
    "flag_name": TEXT,
    "n_disagree": COUNT,
    "prevalence_g1": RATE,
    "prevalence_g2": RATE,
    "gold_met_rate": RATE,
    "n_flagged": COUNT,
    "unreliable": COUNT,
    "never_met": COUNT,
    "always_met": COUNT,
    "min_kappa": SCORE,
    "username": TEXT,
    "group": COUNT,
    "n_labels": COUNT,
    "n_checked": COUNT,
    "n_corrected": COUNT,
    "correction_rate": RATE,
    "group1": TEXT,
    "group2": TEXT,
    "gold": TEXT,
    "n_labeled": COUNT,
    "needed_classical_2": COUNT,
    "needed_ppi_2": COUNT,
    "needed_classical_5": COUNT,
    "needed_ppi_5": COUNT,
    # final and provisional gold, the published scores' tables (analysis.score_tables, judge pairs)
    "provisional_responses": COUNT,
    "ranked": TEXT,
    "tier": TEXT,
    "ci_low": RATE,
    "ci_high": RATE,
    "metric": TEXT,
    "model_a": TEXT,
    "model_b": TEXT,
    "n_cases": COUNT,
    "p_value": SCORE,
    "p_holm": SCORE,
    "n_unlabeled": COUNT,
    "n_pending": COUNT,
    "estimate": RATE,
    "classical_low": RATE,
    "classical_high": RATE,
    "judge_only": RATE,
    "n_graded": COUNT,
    "coverage": RATE,
}
CACS_AT = re.compile(r"^cacs@(\d+)$")
JUDGE_MF1 = re.compile(r"^judge_mf1:(.+)$")
BOUND = re.compile(r"^(.+)_(low|high)$")


def header_and_kind(t, column: str) -> tuple[str, str]:
    if column in COLUMNS:
        return t(f"analysis.column.{column}"), COLUMNS[column]
    if match := CACS_AT.match(column):
        return t("analysis.column.cacs_at", k=int(match.group(1))), RATE
    if match := JUDGE_MF1.match(column):
        return t("analysis.column.judge_mf1", judge=match.group(1)), SCORE
    if (match := BOUND.match(column)) and match.group(1) in COLUMNS:
        base, bound = match.groups()
        return t(f"analysis.column.{bound}", name=t(f"analysis.column.{base}")), COLUMNS[base]
    return column, TEXT


#: Taxonomy kinds whose ids have display names, per slice dimension (specialties and subjects are shown as stored).
NAMED_KINDS = {
    "difficulty": "difficulties",
    "register": "register",
    "macro_category": "macro_categories",
    "task_theme": "task_themes",
    "capability_family": "capability_families",
    "criterion_tag": "failure_tags",
}


def value_names(dimension: str, values: Iterable, t: Translator) -> list[str]:
    """Slice values by their names in the language `t` speaks (the catalog's `insights.lang_code`)."""
    kind = NAMED_KINDS.get(dimension)
    values = [str(value) for value in values]
    if kind is None:
        return values
    taxonomy, language = get_taxonomy(), t("insights.lang_code")
    return [t("insights.no_tag") if value == NO_TAG else taxonomy.name(kind, value, language) for value in values]


def cell_text(value, kind: str) -> str:
    """One cell as a reader sees it: rates as percentages with one decimal, scores with three, counts
    whole with thousands separators, an empty cell as "—"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return EMPTY
    if kind in (RATE, SCORE, POINTS, COUNT, LENGTH) and isinstance(value, (int, float)) and not isinstance(value, bool):
        if kind == RATE:
            return f"{value * 100:.1f}%"
        if kind == SCORE:
            return f"{value:.3f}"
        if kind == POINTS:
            return f"{value:.1f}"
        return f"{value:,.0f}"
    return str(value)
