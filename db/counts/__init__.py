"""Kept figures: the per-response and per-person tallies the queues and checker pages read, and the one
rule for the state of a group's labels on a response. Writers call `refresh` inside their own transaction.

Recounting 1.8 M labels on every page visit is what made the checker pages slow at full scale. Small tables
hold the figures instead, with the state of each labeling assignment:

- `label_tally`: how many labels each person made on a response, per group, stage and rubric version, whether
  they count on the case's current rubric (marked at each refresh, which every rubric change runs), those of
  them no check label of the group answers yet, and of the annotation labels that count on the current rubric,
  those whose decision's gold differs and those whose decision has no gold yet;
- `label_totals`: those tallies summed per person, group and stage, apart for labels that count on the current
  rubric and those that do not (the checker's annotator list and the admin's totals read a few rows);
- `assignment_totals`: each person's labeling assignments per group and how many are done (the progress page),
  moved as `refresh` rewrites the assignments' states and as an assignment changes hands (`move_assignment_owner`);
- `judge_totals`: how many decisions each judge has (the import page's count), moved by the judge importer and
  judge runs as they insert decisions (`add_judge_decisions`);
- `response_status`: per response, from the labels that count on the current rubric only, the decisions both
  groups labeled, those where the groups' final labels differ, those still unresolved and those with gold;
- `unresolved_totals`: the unresolved decisions and the responses holding them, per shard of responses (the
  admins' sidebar), moved as `refresh` rewrites the status rows;
- `adjudication_ready`: the responses each group's labels are ready on for adjudication (done and all checked);
- on each labeling assignment, the state of its group's labels (`label_status`), how many count on the current
  rubric and that rubric's size.

What this room decides: those figures from the labels (`state`: the state rule; `status`: a response's status by
db.rules.gold), how they are written (`write`: every writer that changes labels, labeling assignments or a
case's current rubric calls `refresh`, `refresh_assignments` or `refresh_cases` inside its own transaction, in
plain sight at its call site) and how they are read (`read`); the tests compare them with a recount from the
label rows.

May import: db.store, db.rules.
"""

from db.counts.read import (
    ResponseFigures,
    annotation_counts,
    assignment_totals,
    feedback_tally,
    judge_decision_total,
    labels_by_stage,
    person_totals,
    ready_for_adjudication,
    responses_with_unresolved,
    tally,
    unresolved_figures,
    unresolved_total,
)
from db.counts.rebuild import (
    rebuild_all,
    rebuild_assignments,
    rebuild_judge_totals,
    rebuild_status,
    rebuild_tally,
    rebuild_unresolved_totals,
)
from db.counts.state import DONE, PARTIAL, STALE, TODO, WAITING, label_status
from db.counts.status import status_of_labels
from db.counts.tables import STATUS_COLUMNS
from db.counts.write import (
    REFRESH_CHUNK,
    add_judge_decisions,
    move_assignment_owner,
    refresh,
    refresh_assignments,
    refresh_cases,
)

__all__ = [
    "REFRESH_CHUNK",
    "STATUS_COLUMNS",
    "TODO",
    "PARTIAL",
    "DONE",
    "STALE",
    "WAITING",
    "label_status",
    "refresh",
    "refresh_assignments",
    "refresh_cases",
    "rebuild_all",
    "rebuild_status",
    "rebuild_tally",
    "rebuild_assignments",
    "status_of_labels",
    "ResponseFigures",
    "unresolved_total",
    "unresolved_figures",
    "responses_with_unresolved",
    "tally",
    "feedback_tally",
    "annotation_counts",
    "ready_for_adjudication",
    "person_totals",
    "labels_by_stage",
    "add_judge_decisions",
    "move_assignment_owner",
    "assignment_totals",
    "rebuild_judge_totals",
    "rebuild_unresolved_totals",
    "judge_decision_total",
]
