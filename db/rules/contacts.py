"""Contact-like strings in free text (phone numbers, Chinese ID numbers, e-mail addresses).

Cases come from real clinical records; anything that looks like a way to reach or identify a
person is reported for manual review (by the importers and by the release export), never
changed automatically. Matches are returned masked so a report does not repeat them.
"""

from __future__ import annotations

import re

EMAIL, ID_NUMBER, MOBILE, LANDLINE = "email", "id_number", "mobile_phone", "landline_phone"

# The official release check (validate_dataset.py --strict-contact) flags these three, in the
# JSON text of each line; they come first, so a release we call clean passes that check too.
OFFICIAL_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    (EMAIL, re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+")),
    (MOBILE, re.compile(r"(?<!\d)1[3-9]\d{9}(?!\d)")),
    (ID_NUMBER, re.compile(r"(?<!\d)\d{17}[0-9Xx](?!\d)")),
)
# Ours besides: digit look-arounds keep a match from being the middle of a longer number (a lab
# value, a date run); a resident ID with its birth date, a mobile written with separators or +86.
_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    OFFICIAL_PATTERNS[0],
    OFFICIAL_PATTERNS[2],
    (
        ID_NUMBER,
        re.compile(
            r"(?<![0-9])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[0-9Xx](?![0-9])"
        ),
    ),
    OFFICIAL_PATTERNS[1],
    (MOBILE, re.compile(r"(?<![0-9])(?:\+?86[- ]?)?1[3-9]\d[- ]?\d{4}[- ]?\d{4}(?![0-9])")),
    (LANDLINE, re.compile(r"(?<![0-9])0\d{2,3}-\d{7,8}(?![0-9])")),
)


def mask(value: str) -> str:
    """Keep the first three and last two characters (the domain of an e-mail), hide the rest."""
    if "@" in value:
        local, _, domain = value.partition("@")
        return f"{local[:1]}***@{domain}"
    if len(value) <= 5:
        return "*" * len(value)
    return value[:3] + "*" * (len(value) - 5) + value[-2:]


def find_contacts(text: str | None) -> list[tuple[str, str]]:
    """(kind, masked match) for every contact-like string in `text`, in order of appearance."""
    return [(kind, mask(value)) for kind, value in contact_matches(text)]


def official_matches(text: str) -> list[tuple[str, str]]:
    """(kind, match) of the official release check's patterns, each pattern on its own (as it scans)."""
    return [(kind, match.group()) for kind, pattern in OFFICIAL_PATTERNS for match in pattern.finditer(text)]


def contact_matches(text: str | None) -> list[tuple[str, str]]:
    """(kind, match) for every contact-like string in `text`, in order of appearance (overlaps reported once)."""
    if not text:
        return []
    found: list[tuple[int, str, str]] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(start < other_end and other_start < end for other_start, other_end in taken):
                continue  # an ID number is not also reported as a phone number
            taken.append((start, end))
            found.append((start, kind, match.group()))
    return [(kind, value) for _, kind, value in sorted(found)]
