"""An annotator's work on a response: the queue, the view of a response with its labels, drafts kept
while labeling, the save, the feedback freeze, and time on task.

May import: db.label_rows (every label row is written there), db.rubrics,
db.access, db.counts, db.store, db.rules.
"""

from db.label_rows.refusals import LabelsChanged, RubricChanged
from db.labeling.annotation import (
    DONE,
    PARTIAL,
    STALE,
    TODO,
    WAITING,
    LabelingView,
    LabelInput,
    LabelQueue,
    QueueItem,
    SaveOutcome,
    SaveTarget,
    criterion_ids_of,
    labeling_queue,
    labels_for,
    response_for_labeling,
    rubric_as_opened,
    save_target,
)

__all__ = [
    "TODO",
    "PARTIAL",
    "DONE",
    "STALE",
    "WAITING",
    "RubricChanged",
    "LabelsChanged",
    "QueueItem",
    "LabelQueue",
    "LabelingView",
    "LabelInput",
    "SaveOutcome",
    "labels_for",
    "response_for_labeling",
    "labeling_queue",
    "SaveTarget",
    "save_target",
    "rubric_as_opened",
    "criterion_ids_of",
]
