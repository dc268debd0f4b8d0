"""What people write beside a decision (a label's note, a checker's comment, an adjudication's
rationale): one length limit and one cleaning rule for all of them."""

from __future__ import annotations

from typing import Literal, overload

from db.rules.errors import ValidationFailed
from db.rules.limits import TEXT_LIMITS

#: Longest note, comment or rationale anyone may save (the pages' text boxes and imports stop there too).
MAX_NOTE_CHARS = TEXT_LIMITS["note"]


@overload
def clean_note(value: str | None, what: str, *, required: Literal[True], criterion: str | None = None) -> str: ...
@overload
def clean_note(value: str | None, what: str, *, required: bool = False, criterion: str | None = None) -> str | None: ...
def clean_note(value: str | None, what: str, *, required: bool = False, criterion: str | None = None) -> str | None:
    """`value` without surrounding blanks, None when empty; refused when over the limit (or empty and required).

    `criterion`: the criterion the note is about, named in the refusal so the page can say which and go there."""
    text = ("" if value is None else str(value)).strip()
    if required and not text:
        if criterion is not None:
            raise ValidationFailed(
                f"criterion {criterion}: {what} required",
                key="errors.note_required_criterion",
                params={"field": what, "criterion": criterion},
            )
        raise ValidationFailed(f"{what}: required", key="errors.note_required", params={"field": what})
    if len(text) > MAX_NOTE_CHARS:
        raise ValidationFailed(
            f"{what}: at most {MAX_NOTE_CHARS} characters (got {len(text)})",
            key="errors.note_too_long",
            params={"field": what, "limit": MAX_NOTE_CHARS, "length": len(text)},
        )
    return text or None
