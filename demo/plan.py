"""The demo's work plan: where each response stands, one state per (case, model), readable in one place.

A benchmark in progress is not a set of independent shares. Physicians finish whole cases, model after model;
a new model is judged by LLMs and physicians grade its calibration sample first; a round is closed and its
feedback opened while other cases are still being labeled. The plan says so case by case:

- ``small`` (trying the app): a finished benchmark beside work in progress. On `finished_cases` approved cases
  every model but the last is **final** (docs/REFERENCE.md §4.1: both groups label all N criteria, both checkers
  write a check label on each, every disagreement is adjudicated); on `all_final_cases` of those the last model
  is final too, and those cases are one labeling round of their own whose feedback opens. The last model is the
  "new" one: a calibration sample of `calibration_size` of its responses is drawn (the same seeded draw as
  `clinconsensus assign calibration`), and all of the sample but a few is final. Every other response takes one
  of the in-progress states in turn, so each shape a physician meets appears: one group only, partly labeled,
  complete but unchecked in one or both groups, checked with disagreements still open, unlabeled.
- ``full`` (the paper's size, for benchmarks): every response labeled by both groups; `full_shares` gives the
  exact share of each state (so ≈ 95 % of (response, group) pairs are checked), laid out by a seeded
  permutation.

`write_demo_files` writes the labels each state calls for; `plan.json` carries the states with the rest of the
plan to the generator.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Literal

import numpy as np

Coverage = Literal["all", "part", "none"]


@dataclass(frozen=True)
class Shape:
    """What the physicians have done on one response: each group's labels (all N criteria, part of them, none),
    whether each group's checker went through them (a check label on every criterion), and whether every
    disagreement between the two groups was adjudicated."""

    labeled: tuple[Coverage, Coverage]
    checked: tuple[bool, bool]
    adjudicated: bool = False

    @property
    def final(self) -> bool:
        return self.labeled == ("all", "all") and all(self.checked) and self.adjudicated


#: Every state a response of the demo can be in (the one table of them).
SHAPES: dict[str, Shape] = {
    "final": Shape(("all", "all"), (True, True), adjudicated=True),
    "checked_open": Shape(("all", "all"), (True, True)),  # both checked, disagreements wait for adjudication
    "group1_checked": Shape(("all", "all"), (True, False)),  # complete, group 2 not checked yet
    "group2_checked": Shape(("all", "all"), (False, True)),
    "unchecked": Shape(("all", "all"), (False, False)),
    "group1_only": Shape(("all", "none"), (False, False)),
    "group2_only": Shape(("none", "all"), (False, False)),
    "group2_partial": Shape(("all", "part"), (False, False)),  # group 2 part of the way through
    "group1_partial": Shape(("part", "all"), (False, False)),
    "unlabeled": Shape(("none", "none"), (False, False)),
}
STATE_NAMES: tuple[str, ...] = tuple(SHAPES)
FINAL = "final"
UNLABELED = "unlabeled"
#: The small demo's responses in progress take these states in turn (each appears).
IN_PROGRESS_TURN: tuple[str, ...] = (
    "group1_only",
    "checked_open",
    "group2_partial",
    "group1_checked",
    "unchecked",
    "group2_only",
    "checked_open",
    "group1_partial",
    "group2_checked",
    "unlabeled",
)
#: Calibration-sample responses still in progress in the small demo (what the New model page shows by stage).
CALIBRATION_IN_PROGRESS: tuple[str, ...] = ("group1_only", "checked_open", "group2_checked")


@dataclass(frozen=True)
class CalibrationPlan:
    """The calibration sample of `model`: the draw `db.work.calibration.draw_calibration_sample` makes with `seed`
    and `size`, and the cases whose response of `model` it picks."""

    model: str
    seed: int
    size: int
    case_indices: tuple[int, ...]

    def record(self, case_id) -> dict:
        return {
            "model": self.model,
            "seed": self.seed,
            "size": self.size,
            "case_ids": [case_id(i) for i in self.case_indices],
        }


def drawn_positions(n_eligible: int, size: int, seed: int) -> list[int]:
    """Positions (in response-id order) of the responses `draw_calibration_sample` draws from `n_eligible`:
    `random.Random(seed).sample` picks positions by the population's length only."""
    return sorted(random.Random(seed).sample(range(n_eligible), size))


@dataclass
class WorkPlan:
    """The state of every (case, model) response — `states[i, m]` indexes STATE_NAMES; cases waiting for a rubric
    hold UNLABELED — with the round of finished cases whose feedback opens and the calibration sample."""

    models: tuple[str, ...]
    states: np.ndarray
    feedback_cases: tuple[int, ...] = ()
    calibration: CalibrationPlan | None = None

    def state(self, case: int, model: int) -> str:
        return STATE_NAMES[int(self.states[case, model])]

    def shape(self, case: int, model: int) -> Shape:
        return SHAPES[self.state(case, model)]

    def counts(self, cases: list[int] | None = None) -> Counter:
        """How many responses (of `cases`, default every case) are in each state."""
        rows = self.states if cases is None else self.states[cases]
        return Counter({STATE_NAMES[k]: int(v) for k, v in zip(*np.unique(rows, return_counts=True), strict=True)})

    def final_counts(self, approved: list[int]) -> dict[str, int]:
        """Per model, how many of its responses on `approved` cases are planned final."""
        index = STATE_NAMES.index(FINAL)
        return {model: int((self.states[approved, m] == index).sum()) for m, model in enumerate(self.models)}


def _index(name: str) -> int:
    return STATE_NAMES.index(name)


def small_plan(
    models: tuple[str, ...],
    n_cases: int,
    approved: list[int],
    unassigned: set[int],
    *,
    finished_cases: int,
    all_final_cases: int,
    calibration_size: int,
    calibration_seed: int,
    rng: np.random.Generator,
) -> WorkPlan:
    """The small demo's plan: a finished core of cases beside cases and responses in progress (module docstring).

    `approved` lists the cases with an approved rubric in case order; `unassigned` are cases nobody was handed
    (their responses stay unlabeled)."""
    n_models = len(models)
    states = np.full((n_cases, n_models), _index(UNLABELED), dtype=np.int8)
    handed = [i for i in approved if i not in unassigned]
    core = sorted(rng.permutation(handed)[: min(finished_cases, len(handed))].tolist())
    all_final = sorted(rng.permutation(core)[: min(all_final_cases, len(core))].tolist())
    last = n_models - 1
    for i in core:
        states[i, :last] = _index(FINAL)
    for i in all_final:
        states[i, last] = _index(FINAL)

    calibration: CalibrationPlan | None = None
    sampled: list[int] = []
    if calibration_size and len(approved) > calibration_size:
        # The draw reads the model's responses on approved cases in response-id order, which is case order.
        sampled = [approved[p] for p in drawn_positions(len(approved), calibration_size, calibration_seed)]
        calibration = CalibrationPlan(models[last], calibration_seed, calibration_size, tuple(sampled))
        open_sampled = [i for i in sampled if i in handed and i not in all_final]
        still_open = set(open_sampled[:: max(1, len(open_sampled) // len(CALIBRATION_IN_PROGRESS))][:3])
        for turn, i in enumerate(sorted(still_open)):
            states[i, last] = _index(CALIBRATION_IN_PROGRESS[turn % len(CALIBRATION_IN_PROGRESS)])
        for i in open_sampled:
            if i not in still_open:
                states[i, last] = _index(FINAL)

    turn = 0
    for i in handed:
        for m in range(n_models):
            planned = int(states[i, m]) != _index(UNLABELED) or (m == last and i in sampled)
            if not planned:
                states[i, m] = _index(IN_PROGRESS_TURN[turn % len(IN_PROGRESS_TURN)])
                turn += 1
    return WorkPlan(models, states, feedback_cases=tuple(all_final), calibration=calibration)


def full_plan(
    models: tuple[str, ...], n_cases: int, shares: tuple[tuple[str, float], ...], rng: np.random.Generator
) -> WorkPlan:
    """The full scale's plan: every state's exact share of all responses (largest remainders), laid out over the
    (case, model) responses by a seeded permutation."""
    total = n_cases * len(models)
    weights = np.array([share for _name, share in shares], dtype=float)
    exact = weights / weights.sum() * total
    sizes = np.floor(exact).astype(int)
    for k in np.argsort(-(exact - sizes), kind="stable")[: total - int(sizes.sum())]:
        sizes[k] += 1
    flat = np.repeat(np.array([_index(name) for name, _share in shares], dtype=np.int8), sizes)
    states = rng.permutation(flat).reshape(n_cases, len(models))
    return WorkPlan(models, states)
