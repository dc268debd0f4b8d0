"""`report --out DIR`: leaderboard, comparisons, calibrated and judge-ranking CSVs and report.html sections hold
report.json's numbers (docs/REFERENCE.md §3.7)."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from analysis.report import build_report, report_json, write_html, write_tables
from db.rules.gold import PROVISIONAL
from tools import metrics_reference as reference


def _same(a, b) -> bool:
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return a == pytest.approx(b, abs=1e-12) if isinstance(b, float) else a == b


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    frames = reference.synthetic_frames(24, 4, n=8, seed=5, adjudication_share=0.6, missing_share=0.01)
    report = build_report(frames, 4, resamples=50, gold_basis=PROVISIONAL, min_responses=15)
    folder = tmp_path_factory.mktemp("report-out")
    write_tables(report, folder)
    write_html(report, folder / "report.html", lang="en")
    return report_json(report), folder


def test_the_csvs_hold_report_json_numbers(written):
    document, folder = written
    board = pd.read_csv(folder / "leaderboard.csv", keep_default_na=True)
    assert list(board["model"]) == [row["model"] for row in document["leaderboard"]]
    assert any(not row["ranked"] for row in document["leaderboard"])  # the minimum of 15 leaves some out
    for csv_row, row in zip(board.to_dict("records"), document["leaderboard"]):
        for key in ("ranked", "n_responses", "cacs_at_k", "ci_low", "ci_high"):
            assert _same(row[key], csv_row[key]), key
        assert _same(row["tier"], None if pd.isna(csv_row["tier"]) else int(csv_row["tier"]))
    comparisons = pd.read_csv(folder / "comparisons.csv")
    expected = [(metric, *entry["models"]) for metric, entries in document["comparisons"].items() for entry in entries]
    assert list(comparisons[["metric", "model_a", "model_b"]].itertuples(index=False, name=None)) == expected
    flat = [entry for entries in document["comparisons"].values() for entry in entries]
    for csv_row, entry in zip(comparisons.to_dict("records"), flat):
        for key in ("n_cases", "diff", "ci_low", "ci_high", "p_value", "p_holm"):
            assert _same(entry[key], None if pd.isna(csv_row[key]) else csv_row[key]), key
    ranking = pd.read_csv(folder / "judge_ranking.csv", keep_default_na=False)
    assert list(ranking["judge"]) == [*document["judge_ranking"], ""]
    for csv_row, (_, values) in zip(ranking.to_dict("records"), document["judge_ranking"].items()):
        assert csv_row["n_models"] == values["n_models"]
    calibrated = pd.read_csv(folder / "calibrated.csv")
    n_entries = sum(len(models) for models in document["calibrated"].values())
    assert len(calibrated) == 2 * n_entries


def test_report_html_has_a_section_for_each_with_its_basis(written):
    _, folder = written
    page = (folder / "report.html").read_text(encoding="utf-8")
    ids = re.findall(r'<section id="([a-z-]+)">', page)
    assert ids == ["leaderboard", "comparisons", "calibrated", "judge-ranking"]
    # Each states its basis, the provisional one marked as such.
    assert page.count('<p class="basis">Provisional: on provisional gold') == 4
