"""The audit chain's key: from `CLINCONSENSUS_AUDIT_KEY`, else from its file (`Settings.audit_key_path`).

A process that cannot find the key must not invent one for a chain that already has entries: every
entry it wrote would fail `audit verify` from there on (a fork). So a new key file (mode 0600) is made
only for an empty chain; with entries and no key, writing is refused (`AuditKeyMissing`).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from db.rules.config import get_settings
from db.rules.errors import ClinConsensusError

KEY_ENV = "CLINCONSENSUS_AUDIT_KEY"
KEY_FILE_ENV = "CLINCONSENSUS_AUDIT_KEY_FILE"
_key_cache: dict[Path, bytes] = {}


class AuditKeyMissing(ClinConsensusError):
    """The audit log has entries but its key file is gone: nothing is written until the key is back."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"the audit key file {path} is missing but the audit log has entries: nothing was written; "
            f"restore the key file or point {KEY_FILE_ENV} at it",
            key="errors.audit_key_missing",
            params={"path": str(path)},
        )
        self.path = path


def audit_key_file() -> Path:
    """The absolute path of the key file (`CLINCONSENSUS_AUDIT_KEY_FILE`, else beside the database)."""
    return get_settings().audit_key_path()


def readable_audit_key() -> bytes | None:
    """The key when it can be read (environment or an existing file), else None; never creates one."""
    from_env = get_settings().audit_key
    if from_env:
        return from_env.encode("utf-8")
    path = audit_key_file()
    if path not in _key_cache:
        try:
            text = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None
        if not text:
            raise RuntimeError(f"the audit key file {path} is empty")
        _key_cache[path] = text.encode("ascii")
    return _key_cache[path]


def audit_key() -> bytes:
    """The key for reading the chain; `AuditKeyMissing` when there is none."""
    key = readable_audit_key()
    if key is None:
        raise AuditKeyMissing(audit_key_file())
    return key


def writer_key(*, chain_is_empty: bool) -> bytes:
    """The key for extending the chain: a missing key file is created (mode 0600) only for an empty chain."""
    key = readable_audit_key()
    if key is not None:
        return key
    path = audit_key_file()
    if not chain_is_empty:
        raise AuditKeyMissing(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return audit_key()
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(secrets.token_hex(32) + "\n")
    return audit_key()
