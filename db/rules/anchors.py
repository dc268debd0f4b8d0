"""Anchor answers and reference answers (docs/REFERENCE.md §3.1, §4.2): the words and limits, no SQL.

A rubric validation run grades three anchor answers of each case on its rubric: the case's reference
answer (an expert-reviewed answer, when it has one) and two weak anchors, the same texts for every
case. A good rubric is met by the reference on each criterion and by neither weak anchor.
"""

from __future__ import annotations

import hashlib

from db.rules.errors import Said

REFERENCE = "reference"
REFUSAL = "refusal"
GENERIC = "generic"
#: Every anchor, in the order pages and reports list them.
ANCHORS = (REFERENCE, REFUSAL, GENERIC)
WEAK_ANCHORS = (REFUSAL, GENERIC)
#: The weak anchors' texts (docs/REFERENCE.md §4.2), the same for every case.
WEAK_TEXTS = {
    REFUSAL: "抱歉，我无法回答这个问题，请咨询专业医生。",
    GENERIC: "建议您尽快到正规医院就诊，遵医嘱进行检查和治疗，注意休息，如有不适及时复诊。",
}

#: The flags of a criterion from a validation run.
REFERENCE_NOT_MET = "reference_not_met"
WEAK_MET = "weak_met"
FLAGS = (REFERENCE_NOT_MET, WEAK_MET)

#: Longest reference answer, in Unicode code points.
MAX_REFERENCE_CHARS = 200_000

#: The field a reference answer travels in (a case line's optional key, a references file's column).
REFERENCE_FIELD = "reference_answer"


def reference_problem(text: object) -> Said | None:
    """Why `text` cannot be a reference answer (one sentence naming the field), or None when it can."""
    field = REFERENCE_FIELD
    if not isinstance(text, str):
        return Said(f"{field}: must be a string", "references.not_text", field=field)
    if not text.strip():
        return Said(f"{field}: must not be empty", "references.empty", field=field)
    if "\x00" in text or not text.isprintable() and _has_surrogate(text):
        return Said(f"{field}: contains a NUL character or an unpaired surrogate", "references.nul", field=field)
    if len(text) > MAX_REFERENCE_CHARS:
        return Said(
            f"{field}: at most {MAX_REFERENCE_CHARS:,} characters (got {len(text):,})",
            "references.too_long",
            field=field,
            limit=f"{MAX_REFERENCE_CHARS:,}",
            length=f"{len(text):,}",
        )
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def text_sha256(text: str) -> str:
    """The digest the audit log keeps of a reference answer (never the text itself)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
