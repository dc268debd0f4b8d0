"""Password hashing (passlib, argon2 only), session tokens, and files private to their owner."""

from __future__ import annotations

import functools
import hashlib
import os
import secrets
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from passlib.context import CryptContext


@functools.cache
def password_context() -> CryptContext:
    """argon2 through passlib, made on first use: importing passlib and argon2 costs every command that
    never hashes a password (`report`, `status`, `--help`) a twentieth of a second."""
    from passlib.context import CryptContext

    return CryptContext(schemes=["argon2"], deprecated="auto")


@functools.cache
def _dummy_hash() -> str:
    """Verified against when the username is unknown, so a failed login costs the same either way.

    Made on first use, not at import: one argon2 hash costs about a third of a second, which every
    command (`status`, `--help`) would otherwise pay.
    """
    return password_context().hash(secrets.token_urlsafe(16))


MIN_PASSWORD_LENGTH = 8


def hash_password(password: str) -> str:
    return password_context().hash(password)


def verify_password(password: str, password_hash: str | None) -> bool:
    """True when `password` matches; an account without a hash matches nothing (same cost)."""
    if not password_hash:
        password_context().verify(password, _dummy_hash())
        return False
    try:
        return password_context().verify(password, password_hash)
    except (ValueError, TypeError):
        return False


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


#: Files holding labels, password hashes or keys are readable and writable by their owner only.
PRIVATE_FILE_MODE = 0o600
#: The process's file-creation mask while it runs: what it creates is private unless made otherwise.
PRIVATE_UMASK = 0o077
#: The files beside a SQLite database that hold its pages while it is open.
SQLITE_COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")


def keep_files_private() -> None:
    """From now on, every file this process creates is its owner's only (0600; folders 0700)."""
    os.umask(PRIVATE_UMASK)


def make_private(path: str | os.PathLike) -> None:
    """Creates `path` empty with mode 0600 when it does not exist, else takes its group and world access away.

    Done before any data is written, so no reader ever finds the file open to others.
    """
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        if stat.S_IMODE(os.stat(path).st_mode) & ~PRIVATE_FILE_MODE:
            os.chmod(path, PRIVATE_FILE_MODE)
        return
    os.close(descriptor)


def make_sqlite_files_private(database: str | os.PathLike) -> None:
    """The SQLite file (created 0600 when new) and the companions already beside it, private.

    SQLite gives the -wal and -shm files it creates later the database file's own mode.
    """
    make_private(database)
    for suffix in SQLITE_COMPANION_SUFFIXES:
        companion = f"{os.fspath(database)}{suffix}"
        if os.path.exists(companion):
            make_private(companion)
