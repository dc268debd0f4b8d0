"""Labels, as pages and the command line ask for them: one function per step of the work, each taking the stage
(annotation, check, adjudication). Every label row is written by db.label_rows.write.

- `queue`: the responses waiting for the user at the stage (the labeling queue, the check queue's window, the
  adjudication queue);
- `open`: one response as the stage's page opens it (the annotator's workbench with its draft; the checker's
  and the adjudicator's view);
- `keep_draft`: the page's working decisions kept server-side, called on each decision;
- `save`: the page's save; the stage's rules (db.labeling, db.review) decide what may be saved, every label
  row is written by db.label_rows.write, and the stage's draft is dropped;
- `import_rows`: a label file (each row names its stage; `clinconsensus import labels`), loaded in one transaction
  through the same writer's bulk path (db.importers).

Who may do what is checked in the functions this hands to, whatever the page asks.

May import: db.review, db.importers, db.labeling, and what they may.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.importers import ImportSummary, import_file
from db.labeling import annotation, drafts as label_drafts
from db.review import adjudication, drafts as review_drafts, label_check
from db.rules.enums import Stage
from db.rules.errors import ValidationFailed
from db.store.models import User

__all__ = ["queue", "open", "keep_draft", "save", "import_rows"]


def _stage(stage: str) -> Stage:
    try:
        return Stage(stage)
    except ValueError:
        raise ValidationFailed(
            f"stage: annotation, check or adjudication, not {stage!r}",
            key="errors.label_stage",
            params={"stage": stage},
        ) from None


_QUEUE: Mapping[Stage, Callable[..., Any]] = {
    Stage.annotation: annotation.labeling_queue,
    Stage.check: label_check.check_queue_window,
    Stage.adjudication: adjudication.adjudication_queue,
}
_OPEN: Mapping[Stage, Callable[..., Any]] = {
    Stage.annotation: label_drafts.open_response,
    Stage.check: label_check.check_view,
    Stage.adjudication: adjudication.adjudication_view,
}
_KEEP_DRAFT: Mapping[Stage, Callable[..., Any]] = {
    Stage.annotation: label_drafts.keep_draft,
    Stage.check: review_drafts.keep_check_draft,
    Stage.adjudication: review_drafts.keep_adjudication_draft,
}


def queue(session: Session, user: User, stage: str, **options: Any) -> Any:
    """The responses waiting for `user` at `stage`; `options` are the stage's (the check queue's mode and
    window)."""
    return _QUEUE[_stage(stage)](session, user, **options)


def open(session: Session, user: User, stage: str, response_id: int) -> Any:
    """One response as the stage's page opens it: a `Workbench` (annotation), a `CheckView`, an
    `AdjudicationView` (whose opening closes the checker's own group's labels on it to them)."""
    return _OPEN[_stage(stage)](session, user, response_id)


def keep_draft(session: Session, user: User, stage: str, response_id: int, **state: Any) -> Any:
    """Keeps the page's working decisions on a response; returns when they were kept. `state`: the decisions and
    notes, and what the page read (annotation: `rubric_version_id`, `expected_versions`, `active_ms`; check and
    adjudication: `seen`, and the adjudicator's `shared_note`)."""
    return _KEEP_DRAFT[_stage(stage)](session, user, response_id, **state)


def save(session: Session, user: User, stage: str, response_id: int, **decisions: Any) -> Any:
    """The page's save of a response's decisions at `stage`, all or nothing, and its draft dropped.

    Annotation: `rubric_version_id`, `decisions`, `notes`, `expected_versions`, `active_ms`; returns a
    `SaveOutcome`. Check: `decisions` as `CheckInput`s; adjudication: as `AdjudicationInput`s; both return the
    number of labels written.
    """
    match _stage(stage):
        case Stage.annotation:
            return label_drafts.save(session, user, response_id, **decisions)
        case Stage.check:
            written = label_check.save_checks(session, user, response_id=response_id, **decisions)
            review_drafts.discard_check_draft(session, user, response_id)
            return written
        case Stage.adjudication:
            saved = adjudication.adjudicate_many(session, user, response_id=response_id, **decisions)
            review_drafts.discard_adjudication_draft(session, user, response_id)
            return saved


def import_rows(engine: Engine, path: str | Path, **options: Any) -> ImportSummary:
    """A label file (every stage its rows name) imported in one transaction; refused whole (ImportFailed) on any
    bad row. `options`: `actor`, `progress`, `override_freeze` (db.importers.import_file)."""
    return import_file(engine, "labels", path, **options)
