"""Decisions as the labeling page sends them to its save (db.labels.save, stage annotation)."""

from __future__ import annotations

from collections.abc import Iterable

from db.labeling.annotation import LabelInput


def as_sent(decisions: Iterable[LabelInput]) -> dict:
    """`decisions` and `notes` as the workbench sends them: criterion → met, criterion → note (the non-empty)."""
    decisions = list(decisions)
    return {
        "decisions": {d.criterion_id: d.met for d in decisions},
        "notes": {d.criterion_id: d.note for d in decisions if d.note},
    }
