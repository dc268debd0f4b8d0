"""Unsaved edits kept per user and page key, so a refresh or a closed tab loses nothing.

Pages call `save_draft` whenever an edit changes (cheap: one upsert), `load_draft` when they
open, and `discard_draft` once the edit is saved for real or thrown away. A draft is private to
its user and is not an audited change: the audited change is the save it leads to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, cast

from sqlalchemy import delete
from sqlalchemy.engine import CursorResult
from sqlmodel import Session, col, select

from db.access.policies import active, authorize
from db.rules.errors import ValidationFailed
from db.rules.notes import clean_note
from db.store.models import Draft, User, utcnow

MAX_KEY_LENGTH = 128


def _check_key(key: str) -> None:
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ValidationFailed(
            f"draft key: 1–{MAX_KEY_LENGTH} characters", key="errors.draft_key", params={"limit": MAX_KEY_LENGTH}
        )


def _find(session: Session, user: User, key: str) -> Draft | None:
    return session.exec(select(Draft).where(Draft.user_id == user.id, Draft.key == key)).first()


def save_draft(session: Session, user: User, key: str, payload: dict[str, Any]) -> Draft:
    """Create or replace `user`'s draft under `key`."""
    _require_active(session, user)
    _check_key(key)
    if not isinstance(payload, dict):
        raise ValidationFailed("draft payload: must be a JSON object", key="errors.draft_payload")
    draft = _find(session, user, key)
    if draft is None:
        draft = Draft(user_id=user.id, key=key, payload=payload)
    else:
        # A new dict, so the JSON column sees the change.
        draft.payload = dict(payload)
        draft.updated_at = utcnow()
    session.add(draft)
    session.flush()
    return draft


def _require_active(session: Session, user: User) -> None:
    """An active account, as the database says now (an account deactivated since the caller read it is refused)."""
    authorize(session, user, active())


def load_draft(session: Session, user: User, key: str) -> dict[str, Any] | None:
    """`user`'s draft payload under `key`, or None; refused for an account no longer active."""
    _require_active(session, user)
    draft = _find(session, user, key)
    return dict(draft.payload) if draft is not None else None


def discard_draft(session: Session, user: User, key: str) -> bool:
    """Drop the draft; True when there was one."""
    # One statement (a save drops its draft on every save-and-next); a loaded Draft leaves the session too.
    result = cast(
        CursorResult, session.execute(delete(Draft).where(col(Draft.user_id) == user.id, col(Draft.key) == key))
    )
    return bool(result.rowcount)


# Decisions kept in drafts (the labeling workbench, label check, adjudication) ----------------------------


def checked_decisions(
    known: set[str],
    decisions: Mapping[str, Any],
    notes: Mapping[str, str] | None,
    *,
    subject: str,
    other_ids: Iterable[str] = (),
) -> tuple[dict[str, bool | None], dict[str, str]]:
    """`decisions` (met, not met or undecided) and the non-empty `notes`, by criterion id.

    Refused (nothing kept) when a criterion id of the decisions, the notes or `other_ids` is not in
    `known`, or a decision is anything but True, False or None. `subject` names what is checked in
    the message for the log ("labels", "draft").
    """
    unknown = sorted((set(decisions) | set(notes or {}) | set(other_ids)) - known)
    if unknown:
        raise ValidationFailed(
            f"{subject}: unknown criteria {unknown[:5]}",
            key="errors.labels_unknown_criteria",
            params={"criteria": ", ".join(map(str, unknown[:5]))},
        )
    cleaned: dict[str, bool | None] = {}
    for cid, value in decisions.items():
        if value is not None and not isinstance(value, bool):
            raise ValidationFailed(
                f"{subject}: {cid} is met, not met or undecided", key="errors.label_value", params={"criterion": cid}
            )
        cleaned[cid] = value
    cleaned_notes = {}
    for cid, given in (notes or {}).items():
        text = clean_note(given, f"note of {cid}")
        if text:
            cleaned_notes[cid] = text
    return cleaned, cleaned_notes


def kept_at(value: Any) -> datetime | None:
    """The time a draft payload was kept (its ISO "at"), or None when absent or unreadable."""
    try:
        return datetime.fromisoformat(value) if value else None
    except (TypeError, ValueError):
        return None
