"""The round's bookkeeping an admin runs: assignments, feedback, progress, judge runs and generation,
calibration samples, disagreements, the leaderboard, and row counts.

May import: every other db room.
"""
