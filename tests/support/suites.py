"""Which suites a test run runs, said before and after it: SQLite (every test without a marker and the SQLite
half of the database tests), PostgreSQL (marker `postgres`) and the browser (marker `browser`).

Before the run: whether the PostgreSQL server binaries and Chromium are there, and whether a missing one is a
failure (CLINCONSENSUS_REQUIRE_POSTGRES, CLINCONSENSUS_REQUIRE_BROWSER: CI sets both) or a skip. After it: per
suite, how many tests passed, failed and were skipped, and each distinct reason of the skips, so a run that
left a suite out never reads as a whole one. The hooks are imported by tests/conftest.py.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from db.rules.config import get_settings
from tools.app_server import CHROMIUM
from tools.pg_server import PostgresUnavailable, _binary

SUITES = ("sqlite", "postgres", "browser")
_outcomes: dict[str, Counter] = defaultdict(Counter)
_skip_reasons: dict[str, Counter] = defaultdict(Counter)


def suite_of(keywords) -> str:
    """The suite a test belongs to, by its markers."""
    if "browser" in keywords:
        return "browser"
    return "postgres" if "postgres" in keywords else "sqlite"


def _postgres_state() -> str:
    try:
        found = _binary("initdb")
    except PostgresUnavailable as missing:
        return f"not available ({missing}): {_when_missing(get_settings().require_postgres)}"
    return f"server binaries at {found}"


def _browser_state() -> str:
    if CHROMIUM.exists():
        return f"Chromium at {CHROMIUM}"
    return f"not available ({CHROMIUM} not found): {_when_missing(get_settings().require_browser)}"


def _when_missing(required: bool) -> str:
    return "its tests FAIL (required)" if required else "its tests are SKIPPED (set CLINCONSENSUS_REQUIRE_… to fail)"


def pytest_report_header(config) -> list[str]:
    return [
        "suites before the run:",
        "  sqlite: always",
        f"  postgres: {_postgres_state()}",
        f"  browser: {_browser_state()}",
    ]


def pytest_runtest_logreport(report) -> None:
    suite = suite_of(report.keywords)
    if report.skipped:
        _outcomes[suite]["skipped"] += 1
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skip_reasons[suite][reason.removeprefix("Skipped: ")] += 1
    elif report.failed:
        _outcomes[suite]["failed"] += 1
    elif report.when == "call":
        _outcomes[suite]["passed"] += 1


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter) -> None:
    write = terminalreporter.write_line
    write("suites after the run:")
    for suite in SUITES:
        counted = _outcomes.get(suite, Counter())
        if not sum(counted.values()):
            write(f"  {suite}: not run (no test of it selected)")
            continue
        parts = ", ".join(f"{counted[kind]} {kind}" for kind in ("passed", "failed", "skipped") if counted[kind])
        write(f"  {suite}: {parts}")
        for reason, n in _skip_reasons[suite].most_common():
            write(f"    skipped {n}× because: {reason}")
