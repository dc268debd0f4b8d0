"""Every benchmark runs somewhere: CI runs `make bench-quick` and `make bench` runs the full scale, and each
refuses a benchmark it has no arguments for."""

from __future__ import annotations

from benchmarks.full import APART, FULL_ARGUMENTS
from benchmarks.quick import QUICK_ARGUMENTS
from benchmarks.suite import benchmark_names


def test_every_benchmark_file_has_quick_arguments() -> None:
    names = benchmark_names()
    assert names, "no benchmarks/bench_*.py found"
    assert sorted(set(names) - set(QUICK_ARGUMENTS)) == []
    assert sorted(set(QUICK_ARGUMENTS) - set(names)) == [], "quick arguments for a benchmark that is gone"


def test_every_benchmark_file_runs_at_full_scale_or_says_why_not() -> None:
    names = set(benchmark_names())
    assert sorted(names - set(FULL_ARGUMENTS) - set(APART)) == []
    assert sorted(set(FULL_ARGUMENTS) | set(APART)) == sorted(names), "full-scale entries for a benchmark that is gone"
    assert not set(FULL_ARGUMENTS) & set(APART), "a benchmark both in the full run and apart from it"
    assert all(why.startswith("make ") for why in APART.values()), "a benchmark apart names the target that runs it"
