"""Errors the data layer raises for pages and the command line to show.

Each error says what went wrong twice: its message, in English, for the command line and the
logs; and `key` with `params`, the entry of the text catalog (`i18n/locales/errors.json`) a page
shows in the reader's language (`ui.widgets.error_text`). The data layer imports no catalog.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ClinConsensusError(Exception):
    """Base class: the message is meant for the person who caused it."""

    def __init__(self, message: str, *, key: str | None = None, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.params: dict[str, Any] = dict(params or {})


class PermissionDenied(ClinConsensusError):
    """The user may not do or see this (role, group, blinding, separation of duties)."""


class NotFound(ClinConsensusError):
    pass


class ValidationFailed(ClinConsensusError):
    pass


class DatabaseBusy(ClinConsensusError):
    """Another writer (typically a long import) held the database past the wait; nothing was saved."""


class DiskFull(ClinConsensusError):
    """The database's disk is full (SQLite "database or disk is full", PostgreSQL disk_full); nothing was saved."""


class StaleEdit(ClinConsensusError):
    """Someone saved the item since it was opened; `current` is the newer version."""

    def __init__(
        self, message: str, current=None, *, key: str | None = None, params: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message, key=key, params=params)
        self.current = current


class Said(str):
    """A sentence for a person: English as a `str` (the command line, logs, tests), and the catalog entry
    `key` with `params` a page shows in the reader's language. A parameter may itself be `Said`."""

    key: str | None
    params: dict[str, Any]

    def __new__(cls, english: str, key: str | None = None, /, **params: Any) -> Said:
        text = super().__new__(cls, english)
        text.key = key
        text.params = params
        return text

    def __reduce__(self):  # keeps key and params through pickling (a page's cached results)
        return (_said, (str(self), self.key, self.params))


def _said(english: str, key: str | None, params: dict[str, Any]) -> Said:
    return Said(english, key, **params)


def said_record(text: str | None) -> dict[str, Any] | str | None:
    """`text` as JSON keeps it: a `Said` as {"en", "key", "params"} (parameters that are `Said` nested the
    same way), any other text as it is. A stored sentence is read back by `said_from_record`."""
    if not isinstance(text, Said) or not text.key:
        return None if text is None else str(text)
    params = {name: said_record(value) if isinstance(value, Said) else value for name, value in text.params.items()}
    return {"en": str(text), "key": text.key, "params": params}


def said_from_record(record: Any) -> Any:
    """The sentence `said_record` stored: a `Said` again (English as its `str`), or the plain text."""
    if isinstance(record, dict) and "en" in record:
        params = {name: said_from_record(value) for name, value in (record.get("params") or {}).items()}
        return Said(str(record["en"]), record.get("key"), **params)
    return record
