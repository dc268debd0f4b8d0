"""Reading JSON Lines: one record per line, field checks that name file, line and field, problems collected."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import BinaryIO

from db.importers.import_summary import MAX_ERRORS, MAX_LISTED_WARNINGS, ImportFailed, ImportSummary
from db.rules import limits
from db.rules.contacts import EMAIL, ID_NUMBER, LANDLINE, MOBILE, find_contacts
from db.rules.errors import Said
from db.rules.records import kind_of

# Reading -------------------------------------------------------------------------------------


#: Every phone or ID number `find_contacts` knows has three digits, a digit or separator, four digits
#: somewhere; text without that and without "@" is skipped, which saves most of the scanning time.
_DIGIT_GROUP = re.compile(r"\d\d\d[\d\- ]\d\d\d\d")
_raw_decode = limits.raw_decode

#: How a warning names each kind of contact-like string.
CONTACT_KINDS = {
    ID_NUMBER: "an ID-card number",
    MOBILE: "a mobile phone number",
    LANDLINE: "a landline number",
    EMAIL: "an e-mail address",
}


class _Problems:
    """Errors and contact-like warnings of one file, each prefixed with the file and the line."""

    def __init__(self, source: str, summary: ImportSummary) -> None:
        self.source = source
        self.summary = summary
        self.errors: list[str] = []
        self.stopped = False

    def at(self, line: int | None, message: str) -> None:
        where = f"{self.source} line {line}" if line else self.source
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(
                Said(
                    f"{where}: {message}",
                    "import.at_line" if line else "import.in_file",
                    file=self.source,
                    line=line,
                    reason=message,
                )
            )
        else:
            self.stop()

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.errors.append(
                Said(
                    f"{self.source}: stopped after {MAX_ERRORS} errors",
                    "import.stopped",
                    file=self.source,
                    n=MAX_ERRORS,
                )
            )

    @property
    def full(self) -> bool:
        return len(self.errors) >= MAX_ERRORS

    def scan(self, line: int, field_name: str, text: str | None) -> None:
        if not text or ("@" not in text and _DIGIT_GROUP.search(text) is None):
            return
        for kind, masked in find_contacts(text):
            self.summary.warning_count += 1
            if len(self.summary.warnings) < MAX_LISTED_WARNINGS:
                self.summary.warnings.append(
                    Said(
                        f"{self.source} line {line}: {field_name} contains {CONTACT_KINDS.get(kind, kind)} ({masked})",
                        "import.contact",
                        file=self.source,
                        line=line,
                        field=field_name,
                        kind=Said(CONTACT_KINDS.get(kind, kind), f"import.contact.{kind}"),
                        masked=masked,
                    )
                )

    def raise_if_any(self) -> None:
        if self.errors:
            raise ImportFailed(self.errors)


def _json_lines(stream: BinaryIO, problems: _Problems, digest) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line; bad lines are reported and skipped."""
    number = 0
    records = 0
    errors = problems.errors
    for raw in stream:
        number += 1
        digest.update(raw)
        if len(errors) >= MAX_ERRORS:
            problems.stop()
            return
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            byte = f"0x{raw[error.start]:02x}"
            problems.at(
                number,
                Said(
                    f"not valid UTF-8 (byte {byte} at byte {error.start + 1} of the line)", "import.not_utf8", byte=byte
                ),
            )
            continue
        if number == 1 and text.startswith("\ufeff"):
            text = text[1:]
        if not text or text.isspace():
            continue
        try:
            # The decoder's raw_decode skips json.loads' wrapping; anything unusual (leading blanks,
            # trailing data, an error) goes through json.loads for its standard message.
            try:
                record, end = _raw_decode(text)
                if end != len(text) and not text[end:].isspace():
                    record = limits.loads(text)
            except json.JSONDecodeError:
                record = limits.loads(text)
        except json.JSONDecodeError as error:
            problems.at(number, not_json(text, error)[1])
            continue
        except limits.InputRejected as error:
            problems.at(number, Said(f"not accepted: {error}", "import.not_accepted", reason=_reason(error)))
            continue
        if type(record) is not dict:
            problems.at(
                number,
                Said(
                    f"each line must be a JSON object, found {kind_of(record)}",
                    "import.not_object",
                    found=kind_of(record),
                ),
            )
            continue
        records += 1
        yield number, record
    if not records and not errors:
        problems.at(None, EMPTY_FILE)


#: A file with no record (0 bytes, or only blank lines) is a mistake, never an import of nothing.
EMPTY_FILE = Said("the file is empty (no records)", "import.empty_file")


def not_json(text: str, error: json.JSONDecodeError) -> tuple[int, Said]:
    """(line, message) of a JSON error, its column counted from the decoder's position, 1-based.

    An error found at the end of the text (a missing "}" or ",") is placed just after the last
    character written: the decoder's own line and column then point past the line's newline
    ("line 2, column 1" for an error on line 1).
    """
    position = error.pos
    if position >= len(text.rstrip()):
        position = len(text.rstrip())
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return line, Said(f"not valid JSON ({error.msg} at column {column})", "import.not_json", column=column)


def _reason(error: Exception) -> str:
    """The message of a refusal, keeping its catalog entry when it has one."""
    key = getattr(error, "key", None)
    return Said(str(error), key, **getattr(error, "params", {})) if key else str(error)


def _extra(extra: dict, errors: list[str], name: str = "extra keys") -> dict:
    """The extra keys kept with a record, within the size limit (numbers are finite: the decoder saw to it)."""
    if extra:
        try:
            limits.check_extra(name, extra)
        except limits.InputRejected as error:
            errors.append(_reason(error))
    return extra
