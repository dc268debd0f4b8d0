"""The run's report of its suites (tests/support/suites.py): a test counts in the suite of its markers, and the
summary names a skipped suite's reason."""

from __future__ import annotations

from types import SimpleNamespace

from tests.support import suites


def test_a_test_counts_in_the_suite_of_its_markers():
    assert suites.suite_of({"browser": 1, "postgres": 1}) == "browser"
    assert suites.suite_of({"postgres": 1, "test_x": 1}) == "postgres"
    assert suites.suite_of({"test_x": 1}) == "sqlite"


def test_the_summary_says_each_suite_and_the_reasons_of_its_skips(monkeypatch):
    monkeypatch.setattr(suites, "_outcomes", suites.defaultdict(suites.Counter))
    monkeypatch.setattr(suites, "_skip_reasons", suites.defaultdict(suites.Counter))
    skipped = SimpleNamespace(
        keywords={"postgres": 1},
        skipped=True,
        failed=False,
        when="setup",
        longrepr=("conftest.py", 54, "Skipped: PostgreSQL not available: initdb not found"),
    )
    passed = SimpleNamespace(keywords={}, skipped=False, failed=False, when="call", longrepr=None)
    for report in (skipped, skipped, passed):
        suites.pytest_runtest_logreport(report)
    lines: list[str] = []
    suites.pytest_terminal_summary(SimpleNamespace(write_line=lines.append))
    assert lines == [
        "suites after the run:",
        "  sqlite: 1 passed",
        "  postgres: 2 skipped",
        "    skipped 2× because: PostgreSQL not available: initdb not found",
        "  browser: not run (no test of it selected)",
    ]
