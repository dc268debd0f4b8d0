"""A sign-in through the identity provider opens a local session like a password sign-in, and then obeys
the same idle timeout, lifetime and revocation (db.access.users.open_provider_session): the provider's cookie
opens one session per provider sign-in, so once that session ends it signs nobody in again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlmodel import Session, select

from db.access import users
from db.store.engine import session_scope
from db.store.models import LoginSession, utcnow
from tests.support.factories import make_user

IDENTITY = "https://idp.hospital.example alice-sub"


def linked(engine) -> None:
    with session_scope(engine) as session:
        make_user(session, "dr_oidc", "annotator", 1)
        make_user(session, "boss", "admin")
        users.link_identity(session, username="dr_oidc", identity=IDENTITY, actor=users.SYSTEM_ACTOR)


def open_from_provider(engine, issued_at) -> str | None:
    with session_scope(engine) as session:
        return users.open_provider_session(session, identity=IDENTITY, issued_at=issued_at)


def signed_in_as(engine, token: str | None) -> str | None:
    with session_scope(engine, read_only=True) as session:
        user = users.user_for_token(session, token=token) if token else None
        return user.username if user else None


def boss(session: Session):
    return users.get_user(session, username="boss")


def test_a_fresh_provider_sign_in_opens_one_session_and_only_one(engine):
    linked(engine)
    issued = utcnow() - timedelta(seconds=5)
    token = open_from_provider(engine, issued)
    assert signed_in_as(engine, token) == "dr_oidc"
    assert open_from_provider(engine, issued) is None, "the same provider sign-in opens no second session"
    assert open_from_provider(engine, issued - timedelta(seconds=30)) is None, "nor does an older one"
    with session_scope(engine, read_only=True) as session:
        assert len(session.exec(select(LoginSession)).all()) == 1
    newer = open_from_provider(engine, issued + timedelta(seconds=2))  # the user signed in at the provider again
    assert signed_in_as(engine, newer) == "dr_oidc"


def test_a_stale_or_future_provider_sign_in_opens_nothing(engine):
    linked(engine)
    assert open_from_provider(engine, utcnow() - users.PROVIDER_SIGN_IN_WINDOW - timedelta(seconds=5)) is None
    assert open_from_provider(engine, utcnow() + users.PROVIDER_CLOCK_SKEW + timedelta(minutes=1)) is None
    assert open_from_provider(engine, None) is None
    assert users.provider_issue_time("not a time") is None and users.provider_issue_time(True) is None
    assert users.provider_issue_time(1_700_000_000) == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


def test_the_idle_timeout_ends_a_provider_session_and_the_provider_does_not_reopen_it(engine):
    linked(engine)
    issued = utcnow()
    token = open_from_provider(engine, issued)
    with session_scope(engine) as session:
        row = session.exec(select(LoginSession)).one()
        row.last_seen_at = utcnow() - users.IDLE_TIMEOUT - timedelta(seconds=1)
    assert signed_in_as(engine, token) is None
    assert open_from_provider(engine, issued) is None


def test_the_lifetime_ends_a_provider_session(engine):
    linked(engine)
    issued = utcnow()
    token = open_from_provider(engine, issued)
    with session_scope(engine) as session:
        row = session.exec(select(LoginSession)).one()
        row.expires_at = utcnow() - timedelta(seconds=1)
    assert signed_in_as(engine, token) is None
    assert open_from_provider(engine, issued) is None


def test_deactivation_password_reset_and_unlinking_revoke_a_provider_session(engine):
    linked(engine)
    revocations = [
        lambda s: users.set_active(s, username="dr_oidc", active=False, actor=boss(s)),
        lambda s: users.reset_password(s, username="dr_oidc", password="a-new-password-1", actor=boss(s)),
        lambda s: users.link_identity(s, username="dr_oidc", identity=None, actor=boss(s)),
    ]
    for step, revoke in enumerate(revocations):
        with session_scope(engine) as session:  # a live account, linked, before each revocation
            if step:
                users.set_active(session, username="dr_oidc", active=True, actor=boss(session))
                users.link_identity(session, username="dr_oidc", identity=IDENTITY, actor=boss(session))
        issued = utcnow() + timedelta(seconds=step)
        token = open_from_provider(engine, issued)
        assert signed_in_as(engine, token) == "dr_oidc"
        with session_scope(engine) as session:
            revoke(session)
        assert signed_in_as(engine, token) is None, step
        with session_scope(engine) as session:  # even once the account is live and linked again
            users.set_active(session, username="dr_oidc", active=True, actor=boss(session))
            users.link_identity(session, username="dr_oidc", identity=IDENTITY, actor=boss(session))
        assert open_from_provider(engine, issued) is None, step


def test_an_unlinked_or_inactive_identity_opens_nothing(engine):
    linked(engine)
    with session_scope(engine) as session:
        assert (
            users.open_provider_session(session, identity="https://idp.hospital.example bob", issued_at=utcnow())
            is None
        )
        users.set_active(session, username="dr_oidc", active=False, actor=boss(session))
    assert open_from_provider(engine, utcnow()) is None
