"""`clinconsensus plan calibration` (docs/REFERENCE.md §3.7, §4.4): the calibration sample a target interval needs.

The figures are `analysis.calibration_plan`'s on the decision grid the report reads; a plan that cannot
be made (too few final judged responses, a constant metric) is one line and exit status 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable


def cmd_plan(args, engine_of: Callable) -> int:
    from analysis import calibration_plan
    from analysis.grid import prepare
    from analysis.loader import load_frames
    from analysis.metrics import DEFAULT_K

    grid = prepare(load_frames(engine_of()))
    found = calibration_plan.plan(grid, args.judge, args.model, DEFAULT_K, args.half_width, args.alpha)
    if args.json:
        print(json.dumps(found.as_json(), indent=2))
        return 0
    level = round((1 - found.alpha) * 100, 2)
    if found.reached:
        print(
            f"{found.model} under {found.judge}: label n = {found.n} responses for a {level:g} % interval "
            f"of ±{found.half_width:.4f} (target ±{found.target:g}); the classical interval at that n: "
            f"±{found.classical_half_width:.4f}"
        )
    else:
        print(
            f"{found.model} under {found.judge}: no sample reaches ±{found.target:g}; "
            f"at n = {found.n} (every judged response but one) the half-width is ±{found.half_width:.4f}, "
            f"classical ±{found.classical_half_width:.4f}"
        )
    print(
        f"  cost: {found.decisions:,} physician decisions ({found.n} × {found.rubric_size} criteria × "
        f"{calibration_plan.GROUPS} groups); σ_Y {found.sigma_y:.4f}, ρ {found.rho:.3f}, "
        f"{found.n_unlabeled} judged responses left unlabeled, estimated from {found.n_basis} final responses"
    )
    return 0


def add_commands(sub, engine_of: Callable) -> None:
    p = sub.add_parser("plan", help="plan a calibration sample: the n a target interval needs (§4.4)")
    plans = p.add_subparsers(dest="what", required=True)
    q = plans.add_parser("calibration", help="responses to label for a calibrated score of ± the half-width")
    q.add_argument("--judge", required=True, help="the judge whose decisions the calibrated score uses")
    q.add_argument("--model", required=True, help="the model to calibrate")
    q.add_argument("--half-width", type=float, default=0.03, help="target half-width of the interval (default 0.03)")
    q.add_argument("--alpha", type=float, default=0.05, help="1 − the interval's coverage (default 0.05)")
    q.add_argument("--json", action="store_true", help="print the plan as JSON")
    q.set_defaults(handler=lambda args: cmd_plan(args, engine_of))
