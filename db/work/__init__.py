"""The round's bookkeeping an admin runs: assignments, feedback, progress, judge runs and generation,
calibration samples, disagreements, the leaderboard, and row counts.

May import: every other db room.
"""

#: The room's public modules: callers import these, never a private name inside them.
__all__ = [
    "assignments",
    "batches",
    "calibration",
    "disagreements",
    "feedback",
    "generation",
    "judge_error_detail",
    "judge_runs",
    "leaderboard",
    "progress",
    "status",
]
