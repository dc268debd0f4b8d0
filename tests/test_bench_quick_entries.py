"""Every benchmark has a quick run: CI runs `make bench-quick`, which refuses a benchmark it has no arguments for."""

from __future__ import annotations

from benchmarks.quick import QUICK_ARGUMENTS, benchmark_names


def test_every_benchmark_file_has_quick_arguments() -> None:
    names = benchmark_names()
    assert names, "no benchmarks/bench_*.py found"
    assert sorted(set(names) - set(QUICK_ARGUMENTS)) == []
    assert sorted(set(QUICK_ARGUMENTS) - set(names)) == [], "quick arguments for a benchmark that is gone"
