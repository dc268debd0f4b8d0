"""Contact-like strings in free text (phone numbers, Chinese ID numbers, e-mail addresses).

Cases come from real clinical records; anything that looks like a way to reach or identify a
person is reported for manual review (by the importers and by the release export), never
changed automatically. Matches are returned masked so a report does not repeat them.
"""

from __future__ import annotations

import re

EMAIL, ID_NUMBER, MOBILE, LANDLINE = "email", "id_number", "mobile_phone", "landline_phone"

# Digit look-arounds keep a match from being the middle of a longer number (a lab value, a date run).
_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    (EMAIL, re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")),
    # 18-digit resident ID: region, birth date (YYYYMMDD), sequence, check digit.
    (
        ID_NUMBER,
        re.compile(
            r"(?<![0-9])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[0-9Xx]"
            r"(?![0-9])"
        ),
    ),
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
            found.append((start, kind, mask(match.group())))
    return [(kind, masked) for _, kind, masked in sorted(found)]
