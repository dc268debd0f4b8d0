"""Limits on what the app accepts: JSON shape, numbers, and the length of every text field.

Generous enough for any real clinical case (the longest public ClinConsensus context is a few
thousand characters), small enough that one file cannot fill the database or the browser.
The README lists them; importers and savers use them to name the field that is too long.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

#: Deepest nesting of arrays and objects in one JSON value (a case line needs 3).
MAX_JSON_DEPTH = 32

#: Longest text per field, in Unicode code points.
TEXT_LIMITS: dict[str, int] = {
    "case_id": 64,
    "model": 128,
    "judge": 128,
    "criterion_id": 64,
    "username": 64,
    "difficulty": 16,
    "task": 128,
    "subject": 128,
    "user_role": 128,
    "label": 128,  # one task or subject label, one tag
    "clinical_context": 100_000,
    "user_request": 20_000,
    "response": 200_000,
    "criterion": 2_000,
    "note": 2_000,  # a label's note, a check's note, an adjudication's rationale, a review comment
    "extra": 100_000,  # the JSON text of the extra keys kept with a case or a judge decision
}
#: Largest file the import page accepts, in megabytes: what a page import needs (a labels file of a few
#: hundred cases); larger files (a full-scale labels file is about 250 MB) go through `clinconsensus import`.
#: `.streamlit/config.toml` sets Streamlit's `server.maxUploadSize` to the same number.
MAX_UPLOAD_MB = 64
#: Most items in a list field (task_labels, subject_labels, tags).
MAX_LIST_ITEMS = 64


class InputRejected(ValueError):
    """A value the app does not accept; the message names the problem (the caller adds file, line, field)."""

    def __init__(self, message: str, field: str | None = None, *, key: str | None = None, **params: Any) -> None:
        super().__init__(message)
        self.field = field
        self.key = key  # the catalog entry a page shows (db.rules.errors); `params` fill it
        self.params = {"field": field, **params} if field else params


def _reject_constant(name: str) -> Any:
    raise InputRejected(f"{name} is not valid JSON (numbers must be finite)", key="import.not_finite", value=name)


#: The longest number literal read (Python's own limit for converting digits to an integer).
MAX_NUMBER_DIGITS = 4300


def _refuse_long_number(text: str) -> None:
    if len(text) > MAX_NUMBER_DIGITS:
        raise InputRejected(
            f"a number longer than {MAX_NUMBER_DIGITS:,} digits", key="import.number_too_long", limit=MAX_NUMBER_DIGITS
        )


def _bounded_int(text: str) -> int:
    _refuse_long_number(text.lstrip("-"))
    return int(text)


def _finite_float(text: str) -> float:
    _refuse_long_number(text.lstrip("-"))
    value = float(text)
    if not math.isfinite(value):
        raise InputRejected(f"{text} is out of range (numbers must be finite)", key="import.not_finite", value=text)
    return value


def _refuse_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise InputRejected(f"key {name!r} appears twice in one object", name, key="import.repeated_key")
            seen.add(name)
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_bounded_int)
#: The same decoder, slower, seeing every key of every object: a repeated key is refused, never "last wins".
_PAIRS_DECODER = json.JSONDecoder(
    parse_constant=_reject_constant,
    parse_float=_finite_float,
    parse_int=_bounded_int,
    object_pairs_hook=_refuse_repeated_keys,
)
#: A NUL or a UTF-16 surrogate can only come from an escape (`\u0000`, `\ud800`); text without one is skipped.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
_NUL_OR_SURROGATE = re.compile("[\x00\ud800-\udfff]")


def _check_decoded(text: str, start: int, end: int, value: Any) -> None:
    """Refuses repeated keys and NUL or unpaired surrogates in any string of a decoded value.

    A flat object with as many keys as the text has colons cannot repeat a key (every key is
    followed by a colon); anything else is decoded again by the decoder that sees every key.
    """
    if not (type(value) is dict and text.count(":", start, end) == len(value)) and text.find("{", start, end) >= 0:
        _PAIRS_DECODER.raw_decode(text, start)
    if _SUSPECT_ESCAPE.search(text, start, end):
        refuse_invisible_text(value)


def refuse_invisible_text(value: Any) -> None:
    """Raises InputRejected naming the first key or string (`rubrics[3].criterion`) holding a NUL or an
    unpaired surrogate: PostgreSQL cannot store the one, no driver can encode the other."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            _refuse_in_string(item, where or "value")
        elif isinstance(item, dict):
            for name, child in item.items():
                path = f"{where}.{name}" if where else str(name)
                _refuse_in_string(str(name), f"key {path}")
                stack.append((child, path))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{index}]") for index, child in enumerate(item))


def _printable(where: str) -> str:
    """A key path as a message may print it: control characters and surrogates as `\\uXXXX` escapes."""
    return "".join(
        f"\\u{ord(char):04x}" if ord(char) < 32 or ord(char) == 127 or 0xD800 <= ord(char) <= 0xDFFF else char
        for char in where
    )


def _refuse_in_string(text: str, where: str) -> None:
    found = _NUL_OR_SURROGATE.search(text)
    if found is None:
        return
    where = _printable(where)
    if found.group() == "\x00":
        raise InputRejected(f"{where} contains a NUL character (\\u0000)", where, key="import.nul_char")
    code = f"U+{ord(found.group()):04X}"
    raise InputRejected(
        f"{where} contains an unpaired surrogate ({code})", where, key="import.surrogate_char", code=code
    )


def raw_decode(text: str, position: int = 0) -> tuple[Any, int]:
    """`JSONDecoder.raw_decode` for untrusted input (see `loads`); the value's depth is checked too."""
    try:
        value, end = _DECODER.raw_decode(text, position)
        _check_decoded(text, position, end, value)
    except RecursionError:
        raise InputRejected(
            f"nested deeper than {MAX_JSON_DEPTH} levels", key="import.too_deep", n=MAX_JSON_DEPTH
        ) from None
    # Counting brackets is cheap; the walk runs only when the text could be that deep.
    brackets = text.count("[", position, end) + text.count("{", position, end)
    if brackets > MAX_JSON_DEPTH and nesting_depth(value) > MAX_JSON_DEPTH:
        raise InputRejected(f"nested deeper than {MAX_JSON_DEPTH} levels", key="import.too_deep", n=MAX_JSON_DEPTH)
    return value, end


def loads(text: str | bytes) -> Any:
    """json.loads for untrusted input: no NaN/Infinity, no overflowing numbers, no deep nesting.

    Raises InputRejected (or json.JSONDecodeError for malformed text); never RecursionError.
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_bounded_int)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogatepass")
        _check_decoded(text, 0, len(text), value)
    except RecursionError:
        raise InputRejected(
            f"nested deeper than {MAX_JSON_DEPTH} levels", key="import.too_deep", n=MAX_JSON_DEPTH
        ) from None
    if nesting_depth(value) > MAX_JSON_DEPTH:
        raise InputRejected(f"nested deeper than {MAX_JSON_DEPTH} levels", key="import.too_deep", n=MAX_JSON_DEPTH)
    return value


def nesting_depth(value: Any) -> int:
    """Depth of arrays/objects (a scalar is 0), computed without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def dumps(value: Any, **options) -> str:
    """json.dumps that refuses NaN/Infinity: what we write is always valid JSON."""
    return json.dumps(value, allow_nan=False, **options)


def check_length(field: str, value: str | None, *, limit_key: str | None = None) -> None:
    """Raises InputRejected when `value` is longer than the limit of its field."""
    if value is None:
        return
    limit = TEXT_LIMITS[limit_key or field]
    if len(value) > limit:
        raise InputRejected(
            f"{field}: at most {limit:,} characters (got {len(value):,})",
            field,
            key="import.too_long",
            limit=f"{limit:,}",
            length=f"{len(value):,}",
        )


def check_extra(field: str, extra: dict | None) -> None:
    """The extra keys kept with a record: finite numbers only, bounded size."""
    if not extra:
        return
    try:
        text = dumps(extra, ensure_ascii=False)
    except ValueError:
        raise InputRejected(
            f"{field}: numbers must be finite (NaN or Infinity found)", field, key="import.field_not_finite"
        ) from None
    if len(text) > TEXT_LIMITS["extra"]:
        raise InputRejected(
            f"{field}: at most {TEXT_LIMITS['extra']:,} characters of JSON (got {len(text):,})",
            field,
            key="import.too_long",
            limit=f"{TEXT_LIMITS['extra']:,}",
            length=f"{len(text):,}",
        )
