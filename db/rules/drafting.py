"""Drafted criteria (docs/REFERENCE.md §4.3), pure: reading a model's draft, and the origin of each criterion.

A draft is answered as JSON `[{"criterion": str, "tags": [str]?}]`, possibly inside a fenced block or
after a few words. `read_draft` keeps what is valid and counts what it drops: items that are not an
object with a criterion text, duplicates (compared as the rubric lint compares them), items beyond N,
and over-long texts (cut at the criterion limit, counted). Control characters are removed and runs of
white space made one space; tags the taxonomy does not know are dropped. An answer holding no JSON
list at all is unreadable (`None`): the runner asks again.

`origins` decides, when a version is submitted, where each criterion came from: `drafted` (its text
is a drafted criterion's, after trimming), `edited` (derived from a drafted criterion: the closest
still unmatched one, by character edit distance, when that distance is at most half the longer
text), or `written`; drafted criteria matched by nothing are `deleted`.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from db.rules.limits import TEXT_LIMITS
from db.rules.lint import normalized_criterion

DRAFTED, EDITED, WRITTEN, DELETED = "drafted", "edited", "written", "deleted"
ORIGINS = (DRAFTED, EDITED, WRITTEN, DELETED)
#: An edited criterion is at most this share of the longer text away from the draft it came from.
EDITED_SHARE = 0.5
MAX_CRITERION_CHARS = TEXT_LIMITS["criterion"]
MAX_TAGS = 8
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_SPACES = re.compile(r"\s+")


@dataclass
class DraftReading:
    """What was kept of one answer, and how many items were dropped or changed, by reason."""

    criteria: list[dict] = field(default_factory=list)  # {"criterion": str, "tags": [str]}
    duplicates: int = 0
    beyond_n: int = 0
    invalid: int = 0
    too_long: int = 0
    control: int = 0

    def dropped(self) -> dict[str, int]:
        return {
            "duplicates": self.duplicates,
            "beyond_n": self.beyond_n,
            "invalid": self.invalid,
            "too_long": self.too_long,
            "control": self.control,
        }


def clean_text(text: str) -> tuple[str, bool]:
    """The text without control or format characters, white space made single spaces; (text, whether changed)."""
    kept = "".join(
        " " if char in "\t\n\r" else char
        for char in text
        if char in "\t\n\r" or unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Co", "Cn")
    )
    cleaned = _SPACES.sub(" ", kept).strip()
    removed = len(kept) != len(text)
    return cleaned, removed


def _json_list(answer: str) -> list | None:
    """The first JSON list of the answer: the whole text, a fenced block, or from the first `[` on."""
    candidates = [answer.strip()]
    candidates += [block.strip() for block in _FENCE.findall(answer)]
    start = answer.find("[")
    if start >= 0:
        candidates.append(answer[start:])
    decoder = json.JSONDecoder()
    for text in candidates:
        if not text.startswith("["):
            continue
        try:
            value, _end = decoder.raw_decode(text)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(value, list):
            return value
    return None


def read_draft(answer: str, n: int, known_tags: Iterable[str] = ()) -> DraftReading | None:
    """What a draft answer holds (see the module's text); None when it holds no JSON list (ask again)."""
    items = _json_list(answer or "")
    if items is None:
        return None
    known = set(known_tags)
    reading = DraftReading()
    seen: set[str] = set()
    for item in items:
        text = item.get("criterion") if isinstance(item, dict) else item if isinstance(item, str) else None
        if not isinstance(text, str):
            reading.invalid += 1
            continue
        text, changed = clean_text(text)
        if not normalized_criterion(text):
            reading.invalid += 1
            continue
        if changed:
            reading.control += 1
        if len(text) > MAX_CRITERION_CHARS:
            reading.too_long += 1
            text = text[:MAX_CRITERION_CHARS]
        key = normalized_criterion(text)
        if key in seen:
            reading.duplicates += 1
            continue
        if len(reading.criteria) >= n:
            reading.beyond_n += 1
            continue
        seen.add(key)
        raw_tags = item.get("tags") if isinstance(item, dict) else None
        tags = [tag for tag in raw_tags if isinstance(tag, str) and tag in known] if isinstance(raw_tags, list) else []
        reading.criteria.append({"criterion": text, "tags": list(dict.fromkeys(tags))[:MAX_TAGS]})
    return reading


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between two texts, in Unicode code points (insert, delete, substitute: 1 each)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


@dataclass(frozen=True)
class Origin:
    """Where one submitted criterion (index `row`) came from; `draft` indexes the drafted criteria."""

    row: int | None  # None for a deleted draft
    origin: str
    draft: int | None = None
    distance: int | None = None


def origins(submitted: Sequence[str], drafted: Sequence[str]) -> list[Origin]:
    """Each submitted criterion's origin, in order, then one `deleted` entry per unmatched drafted criterion."""
    texts = [(text or "").strip() for text in submitted]
    drafts = [(text or "").strip() for text in drafted]
    found: dict[int, Origin] = {}
    free = set(range(len(drafts)))
    by_text: dict[str, list[int]] = {}
    for index, text in enumerate(drafts):
        by_text.setdefault(text, []).append(index)
    for row, text in enumerate(texts):
        same = [index for index in by_text.get(text, []) if index in free]
        if text and same:
            free.discard(same[0])
            found[row] = Origin(row, DRAFTED, same[0], 0)
    pairs = []
    for row, text in enumerate(texts):
        if row in found or not text:
            continue
        for index in free:
            longer = max(len(text), len(drafts[index]))
            if abs(len(text) - len(drafts[index])) > EDITED_SHARE * longer:
                continue  # the distance is at least the difference in length
            distance = edit_distance(text, drafts[index])
            if distance <= EDITED_SHARE * max(len(text), len(drafts[index])):
                pairs.append((distance, row, index))
    for distance, row, index in sorted(pairs):
        if row in found or index not in free:
            continue
        free.discard(index)
        found[row] = Origin(row, EDITED, index, distance)
    result = [found.get(row, Origin(row, WRITTEN)) for row, text in enumerate(texts) if text]
    result += [Origin(None, DELETED, index) for index in sorted(free)]
    return result
