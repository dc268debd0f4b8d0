"""Password hashing (passlib, argon2 only) and session tokens."""

from __future__ import annotations

import hashlib
import secrets

from passlib.context import CryptContext

password_context = CryptContext(schemes=["argon2"], deprecated="auto")

# Verified against when the username is unknown, so a failed login costs the same either way.
_DUMMY_HASH = password_context.hash(secrets.token_urlsafe(16))

MIN_PASSWORD_LENGTH = 8


def hash_password(password: str) -> str:
    return password_context.hash(password)


def verify_password(password: str, password_hash: str | None) -> bool:
    """True when `password` matches; an account without a hash matches nothing (same cost)."""
    if not password_hash:
        password_context.verify(password, _DUMMY_HASH)
        return False
    try:
        return password_context.verify(password, password_hash)
    except (ValueError, TypeError):
        return False


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
