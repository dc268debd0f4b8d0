"""Accounts: creation, deactivation, password resets, throttled login and browser sessions.

Every account function takes the acting user (`actor`) and checks it here: admins manage accounts,
a user may change only their own password. Work no browser user does (the command line, the demo
generator, the placeholder accounts of an import) acts as a `SystemActor`, which pages never make;
the audit log names the actor either way.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import cast

from sqlalchemy import case as sql_case, delete, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import CursorResult, Engine
from sqlmodel import Session, col, select

from db.access.audit import record
from db.access.audit_digest import password_digest
from db.access.audit_records import session_entry
from db.access.policies import AccountPolicy, SystemActor, authorize
from db.rules.config import IDLE_TIMEOUT_MINUTES, LOCKOUT_MINUTES, MAX_FAILED_LOGINS
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError, NotFound, ValidationFailed
from db.rules.records import LookAlikes
from db.rules.security import MIN_PASSWORD_LENGTH, hash_password, new_token, token_digest, verify_password
from db.store.engine import session_scope
from db.store.models import LoginSession, LoginThrottle, User, table_of, utcnow

USERNAME_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]{2,64}$")
SESSION_LIFETIME = timedelta(hours=12)
IDLE_TIMEOUT = timedelta(minutes=IDLE_TIMEOUT_MINUTES)
TOUCH_INTERVAL = timedelta(minutes=1)
#: The one message for every failed login, whatever the reason.
LOGIN_FAILED = "login failed"


#: The command line (`clinconsensus users …`).
CLI_ACTOR = SystemActor.command_line()
#: Work of the system itself (tools, tests that set up accounts).
SYSTEM_ACTOR = SystemActor("system")

Actor = User | SystemActor


def actor_name(actor: Actor) -> str:
    """How the audit log names who did it."""
    return actor.name if isinstance(actor, SystemActor) else actor.username


def _acting_admin(session: Session, actor: Actor) -> None:
    """Refuses anyone but an active admin (as the database says now, not as the caller remembers) or the system."""
    if isinstance(actor, SystemActor):
        return
    current = session.get(User, actor.id) if actor.id is not None else None
    admin_now = current is not None and current.is_active and current.role == Role.admin
    authorize(session, actor, AccountPolicy.manage(admin_now=admin_now))


def _acting_admin_or_self(session: Session, actor: Actor, user: User) -> None:
    """Admins and the system act on any account; anyone else (still active) on their own only."""
    if isinstance(actor, User) and actor.id == user.id:
        current = session.get(User, actor.id)
        if current is not None and current.is_active:
            return
    _acting_admin(session, actor)


def _user_snapshot(user: User) -> dict:
    # The password as a digest of its hash (never the hash), so `audit verify` notices a hash copied in.
    return {
        "username": user.username,
        "role": user.role,
        "group": user.group_no,
        "active": user.is_active,
        "password": password_digest(user.password_hash),
        "identity": user.oidc_identity,
        "display_name": user.display_name,
    }


def validate_username(username: str) -> None:
    """The one rule for account names, typed by an admin or named in imported labels."""
    if not USERNAME_PATTERN.match(username or ""):
        raise ValidationFailed("username: 2–64 letters, digits, '.', '_' or '-'", key="admin.users.error.username")


def validate_account(*, username: str, role: str, group_no: int | None) -> None:
    validate_username(username)
    if role not in {r.value for r in Role}:
        raise ValidationFailed(
            f"role: must be one of admin, annotator, checker (got {role!r})",
            key="errors.role_unknown",
            params={"role": role},
        )
    if role == Role.admin and group_no is not None:
        raise ValidationFailed("group: admins belong to no expert group", key="errors.admin_no_group")
    if role != Role.admin and group_no not in (1, 2):
        raise ValidationFailed(
            "group: annotators and checkers belong to expert group 1 or 2", key="admin.users.error.group"
        )


def validate_password(password: str) -> None:
    if len(password or "") < MIN_PASSWORD_LENGTH:
        raise ValidationFailed(f"password: at least {MIN_PASSWORD_LENGTH} characters", key="admin.users.error.password")


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
    actor: Actor,
) -> User:
    _acting_admin(session, actor)
    validate_account(username=username, role=role, group_no=group_no)
    validate_password(password)
    if get_user(session, username=username) is not None:
        raise ValidationFailed(f"username: {username!r} exists already", key="admin.users.error.exists")
    _refuse_lookalike(session, username)
    user = User(
        username=username,
        display_name=display_name or username,
        role=role,
        group_no=group_no,
        password_hash=hash_password(password),
    )
    session.add(user)
    session.flush()
    record(session, actor_name(actor), action="create", entity="user", entity_key=username, after=_user_snapshot(user))
    return user


def _refuse_lookalike(session: Session, username: str) -> None:
    """A new name that differs from an account's only in case (the same after NFKC and case folding) is refused."""
    names = LookAlikes(session.exec(select(col(User.username))))
    other = names.clash(username)
    if other is not None:
        said = names.said("username", username, other)
        raise ValidationFailed(
            str(said), key="import.field.lookalike", params={"field": "username", "name": username, "other": other}
        )


def add_placeholder_user(session: Session, *, username: str, role: str, group_no: int | None, actor: Actor) -> User:
    """An account named in imported labels: kept for attribution, inactive, cannot log in."""
    _acting_admin(session, actor)
    validate_username(username)
    user = User(username=username, display_name=username, role=role, group_no=group_no, is_active=False)
    session.add(user)
    session.flush()
    record(session, actor_name(actor), action="create", entity="user", entity_key=username, after=_user_snapshot(user))
    return user


def _require_user(session: Session, username: str) -> User:
    user = get_user(session, username=username)
    if user is None:
        raise NotFound(f"no user {username!r}", key="errors.user_unknown", params={"username": username})
    return user


def set_active(session: Session, *, username: str, active: bool, actor: Actor) -> User:
    _acting_admin(session, actor)
    user = _require_user(session, username)
    if active and not user.password_hash:
        raise ValidationFailed("set a password before activating this account", key="admin.users.error.no_password")
    before = _user_snapshot(user)
    user.is_active = active
    user.lock_version += 1
    session.add(user)
    if not active:
        revoke_sessions(session, user_id=user.id, actor=actor_name(actor))
    record(
        session,
        actor_name(actor),
        action="activate" if active else "deactivate",
        entity="user",
        entity_key=username,
        before=before,
        after=_user_snapshot(user),
    )
    return user


def reset_password(session: Session, *, username: str, password: str, actor: Actor) -> User:
    """A new password (an admin's reset, or a user changing their own); ends every session of the account."""
    user = get_user(session, username=username)
    if user is None:
        _acting_admin(session, actor)  # only admins learn whether a name exists
        raise NotFound(f"no user {username!r}", key="errors.user_unknown", params={"username": username})
    _acting_admin_or_self(session, actor, user)
    validate_password(password)
    user.password_hash = hash_password(password)
    user.lock_version += 1
    session.add(user)
    session.execute(delete(LoginThrottle).where(col(LoginThrottle.username_key) == throttle_key(username)))
    revoke_sessions(session, user_id=user.id, actor=actor_name(actor))
    record(
        session,
        actor_name(actor),
        action="reset_password",
        entity="user",
        entity_key=username,
        after={"password": password_digest(user.password_hash)},
    )
    return user


def update_account(session: Session, *, username: str, role: str, group_no: int | None, actor: Actor) -> User:
    _acting_admin(session, actor)
    validate_account(username=username, role=role, group_no=group_no)
    user = _require_user(session, username)
    before = _user_snapshot(user)
    user.role, user.group_no = role, group_no
    user.lock_version += 1
    session.add(user)
    record(
        session,
        actor_name(actor),
        action="update",
        entity="user",
        entity_key=username,
        before=before,
        after=_user_snapshot(user),
    )
    return user


class LoginThrottled(ClinConsensusError):
    """Too many failed sign-ins with this username: refused until `retry_at` (UTC), whatever the password."""

    def __init__(self, retry_at: datetime) -> None:
        super().__init__(f"too many attempts; try again after {retry_at:%H:%M} UTC")
        self.retry_at = retry_at


def throttle_key(username: str) -> str:
    """The throttle counts per name tried, folded so `Admin` and `admin ` share one count."""
    return (username or "").strip().lower()[:64]


def _locked_until(session: Session, key: str, now: datetime) -> datetime | None:
    until = session.exec(select(LoginThrottle.locked_until).where(LoginThrottle.username_key == key)).first()
    return until if until is not None and until > now else None


def _upsert(session: Session):
    dialect = session.get_bind().dialect.name
    return (postgresql_insert if dialect == "postgresql" else sqlite_insert)(LoginThrottle)


def _count_failure(session: Session, key: str, now: datetime) -> datetime | None:
    """Adds one failure in a single statement (parallel failures all count); locks at the limit.

    Returns the end of the lock when this failure reached the limit, or the name was locked already.
    """
    table = table_of(LoginThrottle)
    window_start = now - timedelta(minutes=LOCKOUT_MINUTES)
    statement = _upsert(session).values(username_key=key, failures=1, locked_until=None, updated_at=now)
    statement = statement.on_conflict_do_update(
        index_elements=[table.c.username_key],
        # failures older than the window are forgotten: a slow typist is not locked out over a day
        set_={
            "failures": sql_case((table.c.updated_at < window_start, 1), else_=table.c.failures + 1),
            "updated_at": now,
        },
    ).returning(table.c.failures, table.c.locked_until)
    failures, locked_until = session.execute(statement).one()
    if locked_until is not None and locked_until > now:
        return locked_until
    if failures < MAX_FAILED_LOGINS:
        return None
    until = now + timedelta(minutes=LOCKOUT_MINUTES)
    locked = cast(
        CursorResult,
        session.execute(
            update(table)
            .where(table.c.username_key == key, table.c.failures >= MAX_FAILED_LOGINS)
            .values(failures=0, locked_until=until)
        ),
    ).rowcount
    if locked:
        record(
            session,
            "system",
            action="lock",
            entity="login",
            entity_key=key,
            after={"locked_until": until.isoformat(timespec="seconds")},
        )
    return until


def authenticate(engine: Engine, *, username: str, password: str) -> User | None:
    """The user when the password is right and the account active; None for any other failure.

    Every failure counts against the name tried (known or not); at MAX_FAILED_LOGINS within the
    window the name is locked and LoginThrottled is raised until the lock ends. The password is
    verified outside any transaction, so attempts (~0.1 s of hashing each) never hold the
    database's write lock; the short transactions around it only read or count.
    """
    key = throttle_key(username)
    with session_scope(engine, read_only=True) as session:
        until = _locked_until(session, key, utcnow())
        user = get_user(session, username=username) if until is None else None
    if until is not None:
        raise LoginThrottled(until)
    matches = verify_password(password, user.password_hash if user is not None else None)
    if not matches or user is None or not user.is_active:
        with session_scope(engine) as session:
            until = _count_failure(session, key, utcnow())
        if until is not None:
            raise LoginThrottled(until)
        return None
    with session_scope(engine) as session:
        # Parallel wrong attempts may have locked the name while this password was checked.
        until = _locked_until(session, key, utcnow())
        if until is not None:
            raise LoginThrottled(until)
        session.execute(delete(LoginThrottle).where(col(LoginThrottle.username_key) == key))
    return user


def unlock(session: Session, *, username: str, actor: Actor) -> bool:
    """Lifts a login lock (and forgets the failures) of a username; True when there was one."""
    _acting_admin(session, actor)
    key = throttle_key(username)
    row = session.get(LoginThrottle, key)
    if row is None:
        return False
    was_locked = row.locked_until is not None and row.locked_until > utcnow()
    session.delete(row)
    record(
        session,
        actor_name(actor),
        action="unlock",
        entity="login",
        entity_key=key,
        before={
            "failures": row.failures,
            "locked_until": row.locked_until.isoformat(timespec="seconds") if row.locked_until else None,
        },
    )
    return was_locked


def locked_names(session: Session, *, actor: Actor) -> dict[str, datetime]:
    """Folded username → end of its current lock, for the users page (admins only)."""
    _acting_admin(session, actor)
    now = utcnow()
    rows = session.exec(
        select(col(LoginThrottle.username_key), col(LoginThrottle.locked_until)).where(
            col(LoginThrottle.locked_until) > now
        )
    ).all()
    return {name: until for name, until in rows if until is not None}  # the filter keeps set locks only


def oidc_identity(issuer: str, subject: str) -> str:
    """How an identity-provider account is named here: its issuer and its subject, which together are unique."""
    return f"{issuer.strip()} {subject.strip()}"


def link_identity(session: Session, *, username: str, identity: str | None, actor: Actor) -> User:
    """Links (or, with None, unlinks) an identity-provider account to a local account; admins only, audited.

    A change of the link ends the account's sessions: a sign-in through the old identity ends with it.
    """
    _acting_admin(session, actor)
    user = _require_user(session, username)
    identity = (identity or "").strip() or None
    if identity is not None:
        if len(identity) > 512 or " " not in identity:
            raise ValidationFailed(
                "identity: the provider's issuer URL and the subject, separated by a space",
                key="errors.identity_format",
            )
        other = session.exec(select(User).where(User.oidc_identity == identity)).first()
        if other is not None and other.id != user.id:
            raise ValidationFailed(
                f"identity: already linked to {other.username!r}",
                key="errors.identity_taken",
                params={"username": other.username},
            )
    before = {"identity": user.oidc_identity}
    if identity != user.oidc_identity:
        revoke_sessions(session, user_id=user.id, actor=actor_name(actor))
    user.oidc_identity = identity
    user.lock_version += 1
    session.add(user)
    record(
        session,
        actor_name(actor),
        action="link_identity",
        entity="user",
        entity_key=username,
        before=before,
        after={"identity": identity},
    )
    return user


def identity_is_linked(session: Session, *, identity: str) -> bool:
    """True when an admin linked this identity-provider account to an account here, active or not."""
    return session.exec(select(User.id).where(User.oidc_identity == identity)).first() is not None


def user_for_identity(session: Session, *, identity: str | None) -> User | None:
    """The active account an admin linked to this identity-provider account, if any."""
    if not identity:
        return None
    user = session.exec(select(User).where(User.oidc_identity == identity)).first()
    return user if user is not None and user.is_active else None


#: A sign-in at the identity provider opens a session here only this soon after the provider issued it.
PROVIDER_SIGN_IN_WINDOW = timedelta(minutes=10)
#: Clock difference tolerated between the provider and this server.
PROVIDER_CLOCK_SKEW = timedelta(minutes=1)


def provider_issue_time(issued_at: object) -> datetime | None:
    """The ID token's `iat` (seconds since the epoch) as a UTC time; None when missing or not a number."""
    if isinstance(issued_at, bool) or not isinstance(issued_at, int | float | str):
        return None
    try:
        return datetime.fromtimestamp(float(issued_at), UTC)
    except (ValueError, OverflowError, OSError):
        return None


def open_provider_session(session: Session, *, identity: str | None, issued_at: datetime | None) -> str | None:
    """A local session for a fresh sign-in at the identity provider; None when there is none to open.

    The provider's sign-in is only the way in: the local session it opens obeys the idle timeout,
    the lifetime and revocation like a password sign-in. Each provider sign-in (told apart by when
    the provider issued it) opens at most one session, within PROVIDER_SIGN_IN_WINDOW, so when that
    session ends the provider's cookie signs nobody in again: the user signs in at the provider anew.
    """
    user = user_for_identity(session, identity=identity)
    now = utcnow()
    if user is None or issued_at is None or not now - PROVIDER_SIGN_IN_WINDOW <= issued_at <= now + PROVIDER_CLOCK_SKEW:
        return None
    # One statement claims the sign-in, so two runs racing with the same provider cookie open one session.
    claimed = cast(
        CursorResult,
        session.execute(
            update(User)
            .where(
                col(User.id) == user.id,
                (col(User.provider_sign_in_at).is_(None)) | (col(User.provider_sign_in_at) < issued_at),
            )
            .values(provider_sign_in_at=issued_at)
        ),
    ).rowcount
    return open_session(session, user=user) if claimed else None


def open_session(session: Session, *, user: User) -> str:
    """A new browser session for `user`; returns the token the browser keeps."""
    token = new_token()
    now = utcnow()
    row = LoginSession(
        token_hash=token_digest(token),
        user_id=user.id,
        created_at=now,
        last_seen_at=now,
        expires_at=now + SESSION_LIFETIME,
    )
    session.add(row)
    record(session, user.username, **session_entry("open", row, user.username))
    return token


def _live_session(session: Session, token: str) -> LoginSession | None:
    if not token or not isinstance(token, str):
        return None
    row = session.exec(select(LoginSession).where(LoginSession.token_hash == token_digest(token))).first()
    now = utcnow()
    if row is None or row.expires_at <= now or row.last_seen_at + IDLE_TIMEOUT <= now:
        return None
    return row


def user_for_token(session: Session, *, token: str) -> User | None:
    """The active user of a live browser session: not past its lifetime, not idle for IDLE_TIMEOUT."""
    row = _live_session(session, token)
    if row is None:
        return None
    user = session.get(User, row.user_id)
    return user if user is not None and user.is_active else None


def session_needs_touch(session: Session, *, token: str) -> bool:
    """True when the session's idle clock is more than a minute old (so a use should refresh it)."""
    row = _live_session(session, token)
    return row is not None and utcnow() - row.last_seen_at > TOUCH_INTERVAL


def touch_session(session: Session, *, token: str) -> None:
    """Restarts the idle clock of a live session (a write; called at most once a minute per browser)."""
    session.execute(
        update(LoginSession)
        .where(col(LoginSession.token_hash) == token_digest(token), col(LoginSession.expires_at) > utcnow())
        .values(last_seen_at=utcnow())
    )


def close_session(session: Session, *, token: str) -> None:
    row = session.exec(select(LoginSession).where(LoginSession.token_hash == token_digest(token))).first()
    if row is not None:
        username = _username(session, row.user_id)
        session.delete(row)
        record(session, username, **session_entry("close", row, username))


def revoke_sessions(session: Session, *, user_id: int, actor: str = "system") -> None:
    rows = session.exec(select(LoginSession).where(LoginSession.user_id == user_id)).all()
    username = _username(session, user_id) if rows else ""
    for row in rows:
        session.delete(row)
        record(session, actor, **session_entry("revoke", row, username))


def _username(session: Session, user_id: int) -> str:
    user = session.get(User, user_id)
    return user.username if user is not None else f"#{user_id}"


def list_users(session: Session, *, actor: Actor) -> list[User]:
    """Every account, for the users page and the command line (admins only)."""
    _acting_admin(session, actor)
    return list(session.exec(select(User).order_by(col(User.role), col(User.group_no), col(User.username))).all())


def may_role_upload(user: User) -> bool:
    """Files reach the server only from admins (the import page); larger ones go through the command line."""
    return user.is_active and user.role == Role.admin


def may_upload(session: Session, *, token: str) -> bool:
    """True when `token` is a live browser session of an active admin."""
    user = user_for_token(session, token=token)
    return user is not None and may_role_upload(user)
