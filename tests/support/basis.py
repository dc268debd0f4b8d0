"""Figures as docs/REFERENCE.md §4 defines them without §4.1: the provisional gold basis, every scored model ranked.

For tests of the metric definitions themselves on frames that carry no check labels; the final basis and
the ranking minimum have tests of their own (tests/analysis/test_gold_basis.py).
"""

from __future__ import annotations

from functools import partial

import pytest

from analysis.report import build_report
from db.rules.gold import PROVISIONAL

report_as_written = partial(build_report, gold_basis=PROVISIONAL, min_responses=1)


@pytest.fixture
def provisional_basis(monkeypatch):
    """Every figure, export and snapshot of the test on the provisional basis, every scored model ranked, as
    `CLINCONSENSUS_GOLD_BASIS` / `CLINCONSENSUS_MIN_RESPONSES` set them (commands started from the test too)."""
    monkeypatch.setenv("CLINCONSENSUS_GOLD_BASIS", PROVISIONAL)
    monkeypatch.setenv("CLINCONSENSUS_MIN_RESPONSES", "1")
