"""The one rule for the state of a group's labels on an assigned response (the annotator's queue, the sidebar,
the progress page), and the names of its states."""

from __future__ import annotations

TODO, PARTIAL, DONE, STALE, WAITING = "todo", "partial", "done", "stale", "waiting"


def label_status(current_version_id: int | None, size: int, fresh: int, stale: int) -> str:
    """The one rule: waiting (no approved rubric), stale (labels on an older rubric), done (every criterion of
    the current rubric labeled), partial (some), todo (none). `fresh`/`stale`: labels that do / do not count."""
    if current_version_id is None:
        return WAITING
    if stale:
        return STALE
    if fresh >= size:
        return DONE
    if fresh:
        return PARTIAL
    return TODO
