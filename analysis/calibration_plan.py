"""How many physician-labeled responses a calibration sample needs for a target interval (docs/REFERENCE.md §4.4), pure.

A response is *judged* when the judge decided all N of its criteria. From the model's judged responses
that are final (with fewer than 10 of those: every final response the judge graded, of any model),
σ²_Y is the variance of the per-response CACS@k from gold (ddof 0, as the PPI++ interval's) and ρ
its Pearson correlation with the judge's per-response CACS@k. With N_J the model's judged responses
and N_U = N_J − n (the sample is drawn from them), the PPI++ interval's half-width at n labeled
responses is

    h(n) = z_{1−α/2} · sqrt(σ²_Y / n · (1 − ρ² · N_U / (N_U + n)))

The plan is the smallest n ≤ N_J − 1 with h(n) ≤ the target, beside the classical (gold only)
half-width z · σ_Y / sqrt(n) at that n; when no n reaches the target, n = N_J − 1 and `reached` is
False. Labeling costs n × N decisions in each of the two expert groups.

The responses the figures stand on come from one accessor, `final_rows`: which responses count as
final is the gold basis's rule (§4.1), read from the grid in that one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from analysis.grid import DecisionGrid
from analysis.metrics import cacs, complete_mask, met_counts
from db.rules.errors import ValidationFailed

MIN_BASIS = 10
DEFAULT_HALF_WIDTH = 0.03
DEFAULT_ALPHA = 0.05
GROUPS = 2
JSON_KEYS = ("n", "half_width", "classical_half_width", "sigma_y", "rho", "n_unlabeled", "n_basis")


class PlanRefused(ValidationFailed):
    """The plan cannot be made (too few final judged responses, a constant metric, a bad option)."""

    def __init__(self, message: str, key: str, **params: object) -> None:
        super().__init__(message, key=key, params=params)


@dataclass(frozen=True)
class CalibrationPlan:
    judge: str
    model: str
    target: float
    alpha: float
    n: int
    half_width: float
    classical_half_width: float
    sigma_y: float
    rho: float
    n_judged: int
    n_basis: int
    rubric_size: int
    reached: bool

    @property
    def n_unlabeled(self) -> int:
        return self.n_judged - self.n

    @property
    def decisions(self) -> int:
        """Physician decisions the sample costs: n responses × N criteria × two groups."""
        return self.n * self.rubric_size * GROUPS

    def as_json(self) -> dict:
        return {
            "n": self.n,
            "half_width": self.half_width,
            "classical_half_width": self.classical_half_width,
            "sigma_y": self.sigma_y,
            "rho": self.rho,
            "n_unlabeled": self.n_unlabeled,
            "n_basis": self.n_basis,
        }


def final_rows(grid: DecisionGrid) -> np.ndarray:
    """(R,) bool: responses whose gold is final (§4.1), whatever the grid's basis — the one place the plan
    reads it."""
    return complete_mask(grid, grid.gold) & grid.final


def half_widths(n: np.ndarray, sigma2: float, rho: float, n_judged: int, alpha: float) -> np.ndarray:
    """h(n) of the PPI++ interval for each n (the formula of §4.4)."""
    n = np.asarray(n, dtype=np.float64)
    z = NormalDist().inv_cdf(1 - alpha / 2)
    unlabeled = n_judged - n
    return z * np.sqrt(sigma2 / n * (1 - rho**2 * unlabeled / (unlabeled + n)))


def plan(
    grid: DecisionGrid,
    judge: str,
    model: str,
    k: int,
    half_width: float = DEFAULT_HALF_WIDTH,
    alpha: float = DEFAULT_ALPHA,
) -> CalibrationPlan:
    """The calibration plan of `model` under `judge`; PlanRefused with a one-line reason when it cannot be made."""
    if not 0 < half_width < 1:
        raise PlanRefused(
            f"--half-width {half_width}: expected a fraction between 0 and 1", "plan.bad_half_width", value=half_width
        )
    if not 0 < alpha < 1:
        raise PlanRefused(f"--alpha {alpha}: expected a fraction between 0 and 1", "plan.bad_alpha", value=alpha)
    if judge not in grid.judges:
        raise PlanRefused(f"--judge {judge}: this judge has no decisions", "plan.unknown_judge", judge=judge)
    own = grid.responses["model"].to_numpy() == model
    if not own.any():
        raise PlanRefused(f"--model {model}: no responses of this model", "plan.unknown_model", model=model)
    judged = complete_mask(grid, grid.judges[judge])
    final = final_rows(grid)
    basis = own & judged & final
    if basis.sum() < MIN_BASIS:
        basis = judged & final
    n_basis = int(basis.sum())
    if n_basis < MIN_BASIS:
        raise PlanRefused(
            f"{judge} on {model}: {n_basis} final responses graded by the judge, at least {MIN_BASIS} needed",
            "plan.too_few",
            n=n_basis,
            need=MIN_BASIS,
        )
    y = cacs(met_counts(grid.gold[basis]), grid.n[basis], k)
    yhat = cacs(met_counts(grid.judges[judge][basis]), grid.n[basis], k)
    if np.ptp(y) == 0 or np.ptp(yhat) == 0:
        raise PlanRefused(
            f"{judge} on {model}: the per-response CACS@{k} is constant over the {n_basis} responses; no plan",
            "plan.constant",
            k=k,
            n=n_basis,
        )
    n_judged = int((own & judged).sum())
    if n_judged < 2:
        raise PlanRefused(
            f"{judge} on {model}: {n_judged} judged responses of the model; a sample needs at least 2",
            "plan.too_few_judged",
            n=n_judged,
        )
    found = sample_size(y, yhat, n_judged, half_width, alpha)
    return CalibrationPlan(
        judge=judge,
        model=model,
        target=half_width,
        alpha=alpha,
        n_judged=n_judged,
        n_basis=n_basis,
        rubric_size=int(grid.rubric_size),
        **found,
    )


def sample_size(y: np.ndarray, yhat: np.ndarray, n_judged: int, half_width: float, alpha: float) -> dict:
    """n, half_width, classical_half_width, sigma_y, rho and reached from the basis's per-response values."""
    y, yhat = np.asarray(y, dtype=np.float64), np.asarray(yhat, dtype=np.float64)
    sigma2 = float(np.var(y))
    rho = float(np.corrcoef(y, yhat)[0, 1])
    sizes = np.arange(1, n_judged, dtype=np.int64)
    widths = half_widths(sizes, sigma2, rho, n_judged, alpha)
    met = np.flatnonzero(widths <= half_width)
    index = int(met[0]) if len(met) else len(sizes) - 1
    n = int(sizes[index])
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return {
        "n": n,
        "half_width": float(widths[index]),
        "classical_half_width": z * math.sqrt(sigma2 / n),
        "sigma_y": math.sqrt(sigma2),
        "rho": rho,
        "reached": bool(len(met)),
    }
