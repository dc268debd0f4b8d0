"""Accounts: creation, deactivation, password resets, throttled login and browser sessions."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlmodel import Session, select

from db.audit import record
from db.config import LOCKOUT_MINUTES, MAX_FAILED_LOGINS
from db.errors import NotFound, ValidationFailed
from db.models import LoginSession, Role, User, utcnow
from db.security import MIN_PASSWORD_LENGTH, hash_password, new_token, token_digest, verify_password

USERNAME_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]{2,64}$")
SESSION_LIFETIME = timedelta(hours=12)
#: The one message for every failed login, whatever the reason.
LOGIN_FAILED = "login failed"


def _user_snapshot(user: User) -> dict:
    return {"username": user.username, "role": user.role, "group": user.group_no, "active": user.is_active}


def validate_account(*, username: str, role: str, group_no: int | None) -> None:
    if not USERNAME_PATTERN.match(username or ""):
        raise ValidationFailed("username: 2–64 letters, digits, '.', '_' or '-'")
    if role not in {r.value for r in Role}:
        raise ValidationFailed(f"role: must be one of admin, annotator, checker (got {role!r})")
    if role == Role.admin and group_no is not None:
        raise ValidationFailed("group: admins belong to no expert group")
    if role != Role.admin and group_no not in (1, 2):
        raise ValidationFailed("group: annotators and checkers belong to expert group 1 or 2")


def validate_password(password: str) -> None:
    if len(password or "") < MIN_PASSWORD_LENGTH:
        raise ValidationFailed(f"password: at least {MIN_PASSWORD_LENGTH} characters")


def get_user(session: Session, *, username: str) -> User | None:
    return session.exec(select(User).where(User.username == username)).first()


def add_user(
    session: Session,
    *,
    username: str,
    role: str,
    group_no: int | None,
    password: str,
    display_name: str = "",
    actor: str = "system",
) -> User:
    validate_account(username=username, role=role, group_no=group_no)
    validate_password(password)
    if get_user(session, username=username) is not None:
        raise ValidationFailed(f"username: {username!r} exists already")
    user = User(
        username=username,
        display_name=display_name or username,
        role=role,
        group_no=group_no,
        password_hash=hash_password(password),
    )
    session.add(user)
    session.flush()
    record(session, actor, action="create", entity="user", entity_key=username, after=_user_snapshot(user))
    return user


def add_placeholder_user(
    session: Session, *, username: str, role: str, group_no: int | None, actor: str = "import"
) -> User:
    """An account named in imported labels: kept for attribution, inactive, cannot log in."""
    user = User(username=username, display_name=username, role=role, group_no=group_no, is_active=False)
    session.add(user)
    session.flush()
    record(session, actor, action="create", entity="user", entity_key=username, after=_user_snapshot(user))
    return user


def _require_user(session: Session, username: str) -> User:
    user = get_user(session, username=username)
    if user is None:
        raise NotFound(f"no user {username!r}")
    return user


def set_active(session: Session, *, username: str, active: bool, actor: str) -> User:
    user = _require_user(session, username)
    if active and not user.password_hash:
        raise ValidationFailed("set a password before activating this account")
    before = _user_snapshot(user)
    user.is_active = active
    user.lock_version += 1
    session.add(user)
    if not active:
        revoke_sessions(session, user_id=user.id)
    record(
        session,
        actor,
        action="activate" if active else "deactivate",
        entity="user",
        entity_key=username,
        before=before,
        after=_user_snapshot(user),
    )
    return user


def reset_password(session: Session, *, username: str, password: str, actor: str) -> User:
    validate_password(password)
    user = _require_user(session, username)
    user.password_hash = hash_password(password)
    user.failed_logins = 0
    user.locked_until = None
    user.lock_version += 1
    session.add(user)
    revoke_sessions(session, user_id=user.id)
    record(session, actor, action="reset_password", entity="user", entity_key=username)
    return user


def update_account(session: Session, *, username: str, role: str, group_no: int | None, actor: str) -> User:
    validate_account(username=username, role=role, group_no=group_no)
    user = _require_user(session, username)
    before = _user_snapshot(user)
    user.role, user.group_no = role, group_no
    user.lock_version += 1
    session.add(user)
    record(
        session, actor, action="update", entity="user", entity_key=username, before=before, after=_user_snapshot(user)
    )
    return user


def authenticate(session: Session, *, username: str, password: str) -> User | None:
    """The user when the password is right and the account active and unlocked, else None.

    Every failure costs one password verification, whether the account exists or not, and the
    caller shows the same message (`LOGIN_FAILED`) for all of them.
    """
    user = get_user(session, username=username)
    now = utcnow()
    if user is None:
        verify_password(password, None)
        return None
    locked = user.locked_until is not None and user.locked_until > now
    matches = verify_password(password, user.password_hash)
    if locked or not user.is_active:
        return None
    if not matches:
        user.failed_logins += 1
        if user.failed_logins >= MAX_FAILED_LOGINS:
            user.locked_until = now + timedelta(minutes=LOCKOUT_MINUTES)
            user.failed_logins = 0
            record(
                session,
                "system",
                action="lock",
                entity="user",
                entity_key=username,
                after={"locked_until": user.locked_until.isoformat()},
            )
        session.add(user)
        return None
    if user.failed_logins or user.locked_until:
        user.failed_logins = 0
        user.locked_until = None
        session.add(user)
    return user


def open_session(session: Session, *, user: User) -> str:
    """A new browser session for `user`; returns the token the browser keeps."""
    token = new_token()
    session.add(LoginSession(token_hash=token_digest(token), user_id=user.id, expires_at=utcnow() + SESSION_LIFETIME))
    return token


def user_for_token(session: Session, *, token: str) -> User | None:
    if not token:
        return None
    row = session.exec(select(LoginSession).where(LoginSession.token_hash == token_digest(token))).first()
    if row is None or row.expires_at <= utcnow():
        return None
    user = session.get(User, row.user_id)
    return user if user is not None and user.is_active else None


def close_session(session: Session, *, token: str) -> None:
    row = session.exec(select(LoginSession).where(LoginSession.token_hash == token_digest(token))).first()
    if row is not None:
        session.delete(row)


def revoke_sessions(session: Session, *, user_id: int) -> None:
    for row in session.exec(select(LoginSession).where(LoginSession.user_id == user_id)).all():
        session.delete(row)


def list_users(session: Session) -> list[User]:
    return list(session.exec(select(User).order_by(User.role, User.group_no, User.username)).all())
