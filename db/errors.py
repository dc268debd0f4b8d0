"""Errors the data layer raises for pages and the command line to show."""


class ClinConsensusError(Exception):
    """Base class: the message is meant for the person who caused it."""


class PermissionDenied(ClinConsensusError):
    """The user may not do or see this (role, group, blinding, separation of duties)."""


class NotFound(ClinConsensusError):
    pass


class ValidationFailed(ClinConsensusError):
    pass


class DatabaseBusy(ClinConsensusError):
    """Another writer (typically a long import) held the database past the wait; nothing was saved."""


class StaleEdit(ClinConsensusError):
    """Someone saved the item since it was opened; `current` is the newer version."""

    def __init__(self, message: str, current=None) -> None:
        super().__init__(message)
        self.current = current
