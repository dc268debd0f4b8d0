"""One model's way from answers to a calibrated score, read off the shared decision grid (docs/REFERENCE.md §4).

For the new-model page: which judges graded the model (with each judge's fidelity against gold over the
held-out models), how far its calibration sample is labeled, and its calibrated scores. Every figure is
the report's own function on the grid (`metrics.judge_fidelity`, `score_section.heldout_grid`,
`calibrated.calibrated`), so the page and report.json agree. `PipelineFigures` keeps what it computed
for one grid, so a page rerun on the same data version recomputes nothing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis import calibrated as calibrated_scores, metrics, score_section
from analysis.grid import DecisionGrid
from analysis.reliability.physicians import human_ceiling
from db.rules.gold import check_basis

MIN_LABELED = calibrated_scores.MIN_LABELED
JUDGE_COLUMNS = ["judge", "n_decisions", "n_graded", "n_responses"]


#: Where a sampled response is on its way to final gold (docs/REFERENCE.md §4), in the order the work is done.
STAGES = ("waiting_labels", "waiting_checks", "waiting_adjudication", "final")


@dataclass(frozen=True)
class SampleProgress:
    """A model's calibration sample: responses drawn, final (they alone calibrate), provisional (complete
    but not final), still open, and how many wait at each stage (`STAGES`)."""

    drawn: int
    complete: int  # final: the responses the calibrated score's L may hold
    pending: int  # drawn − final
    provisional: int = 0
    stages: dict[str, int] = field(default_factory=dict)

    @property
    def open(self) -> int:
        """Sampled responses without gold on every decision yet."""
        return self.drawn - self.complete - self.provisional


@dataclass(frozen=True)
class ModelFigures:
    model: str
    n_responses: int
    judges: pd.DataFrame  # JUDGE_COLUMNS, judges with a decision on the model's responses
    sample: SampleProgress
    calibrated: dict[str, dict]  # judge → report.json `calibrated[judge][model]`


def _rows_of(grid: DecisionGrid, model: str) -> np.ndarray:
    return grid.responses["model"].to_numpy() == model


def judges_of(grid: DecisionGrid, model: str) -> pd.DataFrame:
    """Per judge with a decision on `model`'s responses: its decisions, the responses it graded on all N."""
    own = _rows_of(grid, model)
    rows = []
    for judge in sorted(grid.judges):
        decisions = grid.judge_rows[judge][0][own] if judge in grid.judge_rows else np.zeros(0)
        if not decisions.sum():
            continue
        graded = metrics.complete_mask(grid, grid.judges[judge]) & own
        rows.append([judge, int(decisions.sum()), int(graded.sum()), int(own.sum())])
    return pd.DataFrame(rows, columns=JUDGE_COLUMNS)


def response_stages(grid: DecisionGrid) -> np.ndarray:
    """Per response, the index in `STAGES` of where it waits: for labels (a group without its label on every
    decision), for checks (both labeled, a group unchecked), for adjudication (both checked, a disagreement or
    an unchecked agreement left), or final (docs/REFERENCE.md §4: `grid.final`). Read on the provisional grid."""
    labeled = metrics.complete_mask(grid, grid.group1) & metrics.complete_mask(grid, grid.group2)
    both_checked = grid.checked[:, 0] & grid.checked[:, 1]
    stage = np.where(labeled, np.where(both_checked, 2, 1), 0)
    return np.where(grid.final, 3, stage)


def sample_progress(grid: DecisionGrid, model: str) -> SampleProgress:
    """How far `model`'s calibration sample is on its way to final gold, by stage."""
    samples = grid.calibration if grid.calibration is not None else calibrated_scores.empty_samples()
    sampled = calibrated_scores.sampled_rows(grid, samples) & _rows_of(grid, model)
    final = int((sampled & grid.final).sum())
    provisional = int((sampled & metrics.complete_mask(grid, grid.gold) & ~grid.final).sum())
    stage_counts = np.bincount(response_stages(grid)[sampled], minlength=len(STAGES))
    drawn = int((samples["model"].astype(str) == model).sum())
    stages = {name: int(count) for name, count in zip(STAGES, stage_counts)}
    stages["waiting_labels"] += drawn - int(sampled.sum())  # drawn responses no longer on the grid: not labeled
    return SampleProgress(drawn=drawn, complete=final, pending=drawn - final, provisional=provisional, stages=stages)


def model_figures(grid: DecisionGrid, model: str, k: int) -> ModelFigures:
    """Everything the page shows of `model` from the grid (its calibrated scores as report.json has them)."""
    own = _rows_of(grid, model)
    samples = grid.calibration if grid.calibration is not None else calibrated_scores.empty_samples()
    scores = calibrated_scores.calibrated(grid.subset(own), samples, k) if own.any() else {}
    judges = judges_of(grid, model)
    graded = set(judges["judge"])
    return ModelFigures(
        model=model,
        n_responses=int(own.sum()),
        judges=judges,
        sample=sample_progress(grid, model),
        calibrated={judge: entry[model] for judge, entry in scores.items() if judge in graded and model in entry},
    )


def heldout_in_grid(grid: DecisionGrid, exported: list[str]) -> list[str]:
    """The exported held-out models that have responses (an empty list measures on every model)."""
    return [model for model in dict.fromkeys(exported) if model in grid.models]


def what_is_missing(entry: dict | None, sample: SampleProgress) -> list[str]:
    """Why a calibrated score is not given yet, as catalog keys in the order the work is done."""
    if not sample.drawn:
        return ["no_sample"]
    if entry is None:
        return ["no_judge"]
    missing = []
    if entry["n_labeled"] < MIN_LABELED:
        missing.append("too_few_labeled")
    if entry["n_unlabeled"] < 1:
        missing.append("no_unlabeled")
    if not missing and entry["cacs_at_k"]["estimate"] is None:
        missing.append("not_finite")
    return missing


@dataclass
class PipelineFigures:
    """The figures of one grid (one data version), computed on first use and kept for later reruns."""

    grid: DecisionGrid
    _fidelity: dict[tuple[str, ...], pd.DataFrame] = field(default_factory=dict)
    _models: dict[tuple[str, int], ModelFigures] = field(default_factory=dict)
    _ceiling: dict[str, float | None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fidelity(self, heldout: list[str], basis: str | None = None) -> pd.DataFrame:
        """Each judge's fidelity (`metrics.judge_fidelity`) over the held-out models' responses (all when none),
        on gold basis `basis` (None: the default, final unless configured; docs/REFERENCE.md §4.1): under final,
        against gold of final responses and each group's labels where that group is checked."""
        basis = check_basis(basis)
        key = (basis, *heldout)
        with self._lock:
            if key not in self._fidelity:
                grid = score_section.heldout_grid(self.grid.on_basis(basis), heldout or None)
                self._fidelity[key] = metrics.judge_fidelity(grid)
            return self._fidelity[key]

    def physicians_ceiling(self) -> float | None:
        """What the physicians reach against the other group's finals (pooled macro-F1, the reliability page's
        human ceiling): the bar a judge's macro-F1 against gold is read beside. None without physician layers."""
        with self._lock:
            if "ceiling" not in self._ceiling:
                layers = self.grid.physicians
                value = human_ceiling(self.grid, layers)["pooled_mf1"] if layers is not None else None
                self._ceiling["ceiling"] = None if value is None or np.isnan(value) else float(value)
            return self._ceiling["ceiling"]

    def model(self, model: str, k: int) -> ModelFigures:
        with self._lock:
            if (model, k) not in self._models:
                self._models[(model, k)] = model_figures(self.grid, model, k)
            return self._models[(model, k)]
