"""Stored labels: the one writer of `label` rows (`write`: every save of every stage, and the label importer's
bulk load), every refusal of a label save (`refusals`), and one stored label as a page shows it (`view`).

The stages' rules stand above (db.labeling, db.review, db.importers) and hand their decisions to `write`;
pages reach labels through db.labels.

May import: db.access, db.counts, db.store, db.rules.
"""

from db.label_rows import write
from db.label_rows.refusals import LabelsChanged, RubricChanged, SavedSince, UnjudgedCriteria
from db.label_rows.view import LabelView
from db.label_rows.write import ADJUDICATION, ANNOTATION, CHECK, Place, StageRule, Wanted

__all__ = [
    "write",
    "StageRule",
    "ANNOTATION",
    "CHECK",
    "ADJUDICATION",
    "Place",
    "Wanted",
    "LabelView",
    "RubricChanged",
    "LabelsChanged",
    "UnjudgedCriteria",
    "SavedSince",
]
