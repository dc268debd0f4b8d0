"""A checker's work in progress on the label check and the adjudication, kept as server-side drafts.

Like the annotator's labeling (db/labeling/drafts.py), every decision and note is kept at once as a
draft of (checker, response), in the same private `draft` table (db/labeling/draft_store.py), so a refresh, a
closed tab or a crash loses nothing and a reopened response shows its draft, marked unsaved.

Rules: only a checker who may do the work keeps a draft of it (a label check: a checker of the
group whose labels are still open to them; an adjudication: a checker who may adjudicate the
response and has opened it); a draft is read only by its owner. A draft remembers the revision of
each label it started from: a cell someone else saved since is not restored (the newer saved value
shows, and the page says how many were dropped), so a draft never silently overwrites anyone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sqlmodel import Session, select

from db.access import independence
from db.access.policies import LabelPolicy, authorize
from db.labeling.draft_store import checked_decisions, discard_draft, kept_at, load_draft, save_draft
from db.review.adjudication import AdjudicationView
from db.review.label_check import CheckView
from db.review.shared import _criteria, _response_and_case, current_rubric_version_id
from db.rules.enums import Stage
from db.rules.errors import NotFound, ValidationFailed
from db.rules.notes import clean_note
from db.store.models import Label, User, utcnow

CHECK, ADJUDICATION = "check", "adjudication"


@dataclass(frozen=True)
class CheckerDraft:
    """What a reopened response restores: decisions and notes per criterion id, the shared rationale."""

    decisions: dict[str, bool | None] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    shared_note: str = ""
    at: datetime | None = None
    dropped: int = 0  # draft cells left out because someone saved them since the draft began

    def differs_from(self, states: Mapping[str, bool | None], notes: Mapping[str, str]) -> bool:
        """True when the draft changes anything shown from the saved labels (then it is marked unsaved)."""
        if self.shared_note:
            return True
        for cid, value in self.decisions.items():
            if states.get(cid) != value:
                return True
        return any((notes.get(cid) or "") != text for cid, text in self.notes.items())


def _key(kind: str, response_id: int) -> str:
    # Internal only: the key never leaves the server.
    return f"{kind}:{int(response_id)}"


def _require_may_check(session: Session, user: User, response_id: int) -> None:
    user = authorize(session, user, LabelPolicy.check())
    response, _ = _response_and_case(session, response_id)
    annotated = session.exec(
        select(Label.id)
        .where(Label.response_id == response_id, Label.group_no == user.group_no, Label.stage == Stage.annotation)
        .limit(1)
    ).first()
    if annotated is None:
        raise NotFound(
            f"your group has no labels on response {response.code}",
            key="errors.group_no_labels",
            params={"response": response.code},
        )
    independence.require_group_labels_open(session, user, response_id)


def _require_may_adjudicate(session: Session, user: User, response_id: int) -> None:
    independence.require_may_adjudicate(session, user, response_id)
    _response_and_case(session, response_id)
    authorize(
        session, user, LabelPolicy.adjudicate(opened=bool(independence.opened_by(session, user.id, [response_id])))
    )


def _criterion_ids(session: Session, response_id: int) -> set[str]:
    _, case = _response_and_case(session, response_id)
    version = current_rubric_version_id(session, case.id) if case.id is not None else None
    return {c.criterion_id for c in _criteria(session, version)}


def _cleaned(
    known: set[str],
    decisions: Mapping[str, bool | None],
    notes: Mapping[str, str] | None,
    seen: Mapping[str, int | None],
) -> tuple[dict, dict, dict]:
    if not isinstance(decisions, Mapping) or not isinstance(notes or {}, Mapping) or not isinstance(seen, Mapping):
        raise ValidationFailed(
            "draft: decisions, notes and revisions are maps by criterion id", key="errors.draft_shape"
        )
    cleaned, cleaned_notes = checked_decisions(known, decisions, notes, subject="draft", other_ids=seen)
    revisions: dict[str, int | None] = {}
    for cid, version in seen.items():
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise ValidationFailed(
                f"revision of {cid}: a whole number or none", key="errors.draft_revision", params={"criterion": cid}
            )
        revisions[cid] = version
    return cleaned, cleaned_notes, revisions


def _keep(
    session: Session,
    user: User,
    kind: str,
    response_id: int,
    decisions: Mapping[str, bool | None],
    notes: Mapping[str, str] | None,
    seen: Mapping[str, int | None],
    shared_note: str | None = None,
) -> datetime:
    cleaned, cleaned_notes, revisions = _cleaned(_criterion_ids(session, response_id), decisions, notes, seen)
    payload = {
        "decisions": cleaned,
        "notes": cleaned_notes,
        "seen": revisions,
        "shared_note": clean_note(shared_note, "rationale") or "",
        "at": (at := utcnow()).isoformat(),
    }
    save_draft(session, user, _key(kind, response_id), payload)
    return at


def keep_check_draft(
    session: Session,
    user: User,
    response_id: int,
    *,
    decisions: Mapping[str, bool | None],
    notes: Mapping[str, str] | None = None,
    seen: Mapping[str, int | None],
) -> datetime:
    """Keep the checker's working decisions on a response of their group (called on each decision);
    returns when it was kept.

    `seen`: the revision of each check label as the page first showed it (None where there was none).
    """
    _require_may_check(session, user, response_id)
    return _keep(session, user, CHECK, response_id, decisions, notes, seen)


def keep_adjudication_draft(
    session: Session,
    user: User,
    response_id: int,
    *,
    decisions: Mapping[str, bool | None],
    notes: Mapping[str, str] | None = None,
    shared_note: str | None = None,
    seen: Mapping[str, int | None],
) -> datetime:
    """Keep the adjudicator's working decisions and rationales on a response whose adjudication they opened;
    returns when it was kept."""
    _require_may_adjudicate(session, user, response_id)
    return _keep(session, user, ADJUDICATION, response_id, decisions, notes, seen, shared_note)


def _restore(payload: dict | None, current: Mapping[str, int | None]) -> CheckerDraft | None:
    """The draft over the current labels: cells absent now, or saved by someone since, are left out."""
    if not payload:
        return None
    seen = payload.get("seen") or {}
    decisions: dict[str, bool | None] = {}
    notes: dict[str, str] = {}
    dropped = 0
    for cid, value in (payload.get("decisions") or {}).items():
        if cid not in current:
            continue
        if seen.get(cid) != current[cid]:
            dropped += 1
            continue
        decisions[cid] = None if value is None else bool(value)
    for cid, text in (payload.get("notes") or {}).items():
        if cid in decisions and text:
            notes[cid] = str(text)
    return CheckerDraft(
        decisions=decisions,
        notes=notes,
        shared_note=str(payload.get("shared_note") or ""),
        at=kept_at(payload.get("at")),
        dropped=dropped,
    )


def check_draft(session: Session, user: User, view: CheckView) -> CheckerDraft | None:
    """The checker's own draft of a response they are checking, over the labels of `view` (None: no draft,
    or the response's labels are closed to them since they opened its adjudication)."""
    user = authorize(session, user, LabelPolicy.read_checks())
    if view.closed or user.group_no != view.group_no:
        return None
    current = {
        row.criterion_id: row.check.lock_version if row.check is not None else None
        for row in view.rows
        if row.annotation is not None and not row.own
    }
    return _restore(load_draft(session, user, _key(CHECK, view.response_id)), current)


def adjudication_draft(session: Session, user: User, view: AdjudicationView) -> CheckerDraft | None:
    """The adjudicator's own draft of a response, over the disputed cells of `view` (None: no draft).

    Read in the session that opened the view: on SQLite's shared read the opening, committed apart,
    is not visible to it yet, so this asks only whether the checker may adjudicate.
    """
    independence.require_may_adjudicate(session, user, view.response_id)
    current = {cell.criterion_id: cell.decision.lock_version if cell.decision else None for cell in view.cells}
    return _restore(load_draft(session, user, _key(ADJUDICATION, view.response_id)), current)


def discard_check_draft(session: Session, user: User, response_id: int) -> bool:
    """Drop the checker's draft of a response (after its save); True when there was one."""
    user = authorize(session, user, LabelPolicy.read_checks())
    return discard_draft(session, user, _key(CHECK, response_id))


def discard_adjudication_draft(session: Session, user: User, response_id: int) -> bool:
    user = authorize(session, user, LabelPolicy.read_checks())
    return discard_draft(session, user, _key(ADJUDICATION, response_id))
