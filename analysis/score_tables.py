"""The published scores as tables: leaderboard, comparisons, calibrated scores and judge ranking (pure).

`report --out DIR` writes each as a CSV (`leaderboard.csv`, `comparisons.csv`, `calibrated.csv`,
`judge_ranking.csv`) and as a section of report.html with the id `leaderboard`, `comparisons`,
`calibrated` and `judge-ranking`; the numbers are report.json's (`analysis.score_section`), one row per
entry, nothing recomputed. Each section's caption states the gold basis and the ranking minimum
(docs/REFERENCE.md §4.1); a provisional basis is marked 暂定 / provisional.
"""

from __future__ import annotations

import html
from collections.abc import Callable

import pandas as pd

from analysis.score_section import ScoreSection

Translator = Callable[..., str]

#: CSV file stem → report.html section id.
SECTIONS = {
    "leaderboard": "leaderboard",
    "comparisons": "comparisons",
    "calibrated": "calibrated",
    "judge_ranking": "judge-ranking",
}
CALIBRATED_VALUES = ("estimate", "ci_low", "ci_high", "classical_low", "classical_high", "judge_only")
RANKING_COLUMNS = ["judge", "spearman", "kendall_tau_b", "top3", "top5", "n_models"]


def leaderboard_table(section: ScoreSection) -> pd.DataFrame:
    """report.json `leaderboard`, one row per model in its order (ranked first)."""
    columns = ["model", "ranked", "tier", "n_responses", "cacs_at_k", "ci_low", "ci_high"]
    return pd.DataFrame([{key: row.get(key) for key in columns} for row in section.leaderboard], columns=columns)


def comparisons_table(section: ScoreSection) -> pd.DataFrame:
    """report.json `comparisons`, one row per (metric, pair)."""
    columns = ["metric", "model_a", "model_b", "n_cases", "diff", "ci_low", "ci_high", "p_value", "p_holm"]
    rows = [
        {
            "metric": metric,
            "model_a": entry["models"][0],
            "model_b": entry["models"][1],
            **{key: entry[key] for key in ("n_cases", "diff", "ci_low", "ci_high", "p_value", "p_holm")},
        }
        for metric, entries in section.comparisons.items()
        for entry in entries
    ]
    return pd.DataFrame(rows, columns=columns)


def calibrated_table(section: ScoreSection) -> pd.DataFrame:
    """report.json `calibrated`, one row per (judge, model, metric)."""
    columns = ["judge", "model", "metric", "n_labeled", "n_unlabeled", "n_pending", *CALIBRATED_VALUES]
    rows = [
        {
            "judge": judge,
            "model": model,
            "metric": metric,
            "n_labeled": entry["n_labeled"],
            "n_unlabeled": entry["n_unlabeled"],
            "n_pending": entry["n_pending"],
            **{key: (entry.get(metric) or {}).get(key) for key in CALIBRATED_VALUES},
        }
        for judge, models in section.calibrated.items()
        for model, entry in models.items()
        for metric in ("cacs_at_k", "rubric_accuracy")
    ]
    return pd.DataFrame(rows, columns=columns)


def judge_ranking_table(section: ScoreSection) -> pd.DataFrame:
    """report.json `judge_ranking`, one row per judge, then the physicians' ceiling (`judge` empty)."""
    rows = [{"judge": judge, **values} for judge, values in section.judge_ranking.items()]
    rows.append({"judge": "", **section.human_ceiling_ranking})
    return pd.DataFrame([{key: row.get(key) for key in RANKING_COLUMNS} for row in rows], columns=RANKING_COLUMNS)


def score_tables(section: ScoreSection | None) -> dict[str, pd.DataFrame]:
    """The four tables by CSV stem (none without a score section)."""
    if section is None:
        return {}
    return {
        "leaderboard": leaderboard_table(section),
        "comparisons": comparisons_table(section),
        "calibrated": calibrated_table(section),
        "judge_ranking": judge_ranking_table(section),
    }


def basis_caption(t: Translator, gold_basis: str, min_responses: int) -> str:
    """One line: the gold basis of a figure (provisional marked) and the ranking minimum."""
    return t(f"gold_basis.caption.{gold_basis}", m=min_responses)


def sections_html(
    tables: dict[str, pd.DataFrame],
    t: Translator,
    gold_basis: str,
    min_responses: int,
    table_html: Callable[[pd.DataFrame, Translator], str],
) -> str:
    """The report.html sections of `score_tables`, each `<section id=…>` with its heading and basis caption."""
    caption = html.escape(basis_caption(t, gold_basis, min_responses))
    parts = []
    for stem, identifier in SECTIONS.items():
        if stem not in tables:
            continue
        parts.append(
            f'<section id="{identifier}"><h2>{html.escape(t(f"gold_basis.section.{stem}"))}</h2>'
            f'<p class="basis">{caption}</p>{table_html(tables[stem], t)}</section>'
        )
    return "\n".join(parts)
