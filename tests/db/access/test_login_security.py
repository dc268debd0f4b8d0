"""Sign-in against someone who floods it: atomic failure counts, throttling of any name, unlock, idle timeout."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlmodel import select

from db.access import users
from db.rules.config import LOCKOUT_MINUTES, MAX_FAILED_LOGINS
from db.rules.errors import ValidationFailed
from db.store.engine import session_scope
from db.store.models import AuditLog, LoginSession, LoginThrottle, utcnow
from tests.support.factories import DEFAULT_PASSWORD, make_user


def _attempt(engine, username: str, password: str) -> str:
    try:
        return "ok" if users.authenticate(engine, username=username, password=password) else "failed"
    except users.LoginThrottled:
        return "throttled"


def test_parallel_wrong_passwords_lock_the_account_then_the_right_one_is_refused(engine):
    with session_scope(engine) as session:
        make_user(session, "dr_wu")
    with ThreadPoolExecutor(max_workers=11) as pool:
        outcomes = list(pool.map(lambda _: _attempt(engine, "dr_wu", "wrong-password"), range(11)))
    assert "ok" not in outcomes
    # Every failure was counted: the account is locked, so the right password is refused now.
    with pytest.raises(users.LoginThrottled) as refused:
        users.authenticate(engine, username="dr_wu", password=DEFAULT_PASSWORD)
    now = utcnow()
    assert now < refused.value.retry_at <= now + timedelta(minutes=LOCKOUT_MINUTES)
    assert f"{refused.value.retry_at:%H:%M}" in str(refused.value)
    with session_scope(engine, read_only=True) as session:
        locks = session.exec(select(AuditLog).where(AuditLog.action == "lock", AuditLog.entity_key == "dr_wu")).all()
        assert len(locks) >= 1


def test_unknown_names_are_throttled_the_same_way(engine):
    with session_scope(engine) as session:
        make_user(session, "dr_he")
    outcomes = {
        name: [_attempt(engine, name, "wrong-password") for _ in range(MAX_FAILED_LOGINS)]
        for name in ("dr_he", "nobody_here")
    }
    # Known and unknown names give the same answers in the same order: nothing tells them apart.
    assert outcomes["dr_he"] == outcomes["nobody_here"] == ["failed"] * (MAX_FAILED_LOGINS - 1) + ["throttled"]
    assert _attempt(engine, "NOBODY_here ", "x") == "throttled"  # the same name, typed differently
    assert _attempt(engine, "someone_else", "x") == "failed"  # other names are not affected


def test_admin_unlock_lifts_the_lock(engine):
    with session_scope(engine) as session:
        make_user(session, "dr_ma")
        make_user(session, "admin", "admin")
    for _ in range(MAX_FAILED_LOGINS):
        _attempt(engine, "dr_ma", "wrong-password")
    assert _attempt(engine, "dr_ma", DEFAULT_PASSWORD) == "throttled"
    with session_scope(engine, read_only=True) as session:
        assert "dr_ma" in users.locked_names(session, actor=users.get_user(session, username="admin"))
    with session_scope(engine) as session:
        assert users.unlock(session, username="dr_ma", actor=users.get_user(session, username="admin")) is True
    assert _attempt(engine, "dr_ma", DEFAULT_PASSWORD) == "ok"
    with session_scope(engine, read_only=True) as session:
        assert users.locked_names(session, actor=users.SYSTEM_ACTOR) == {}
        assert session.exec(select(AuditLog).where(AuditLog.action == "unlock")).one().actor == "admin"


def test_a_right_password_forgets_earlier_failures(engine):
    with session_scope(engine) as session:
        make_user(session, "dr_xu")
    for _ in range(MAX_FAILED_LOGINS - 1):
        _attempt(engine, "dr_xu", "wrong-password")
    assert _attempt(engine, "dr_xu", DEFAULT_PASSWORD) == "ok"
    with session_scope(engine, read_only=True) as session:
        assert session.get(LoginThrottle, "dr_xu") is None
    assert _attempt(engine, "dr_xu", "wrong-password") == "failed"


def test_password_check_holds_no_write_lock(sqlite_engine, monkeypatch):
    """While a password is verified, another connection can write at once (no busy wait, no lock)."""
    with session_scope(sqlite_engine) as session:
        make_user(session, "dr_lu")
    database = sqlite_engine.url.database
    writes = []
    real_verify = users.verify_password

    def verify_while_writing(password, password_hash):
        other = sqlite3.connect(database, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # fails at once with "database is locked" if a writer holds it
            other.execute("UPDATE user SET display_name = display_name WHERE username = 'dr_lu'")
            other.execute("COMMIT")
            writes.append("written")
        finally:
            other.close()
        return real_verify(password, password_hash)

    monkeypatch.setattr(users, "verify_password", verify_while_writing)
    assert _attempt(sqlite_engine, "dr_lu", "wrong-password") == "failed"
    assert _attempt(sqlite_engine, "ghost", "wrong-password") == "failed"
    assert _attempt(sqlite_engine, "dr_lu", DEFAULT_PASSWORD) == "ok"
    assert writes == ["written"] * 3


def test_idle_sessions_end_and_use_keeps_them(engine):
    with session_scope(engine) as session:
        user = make_user(session, "dr_gu")
        token = users.open_session(session, user=user)
    with session_scope(engine) as session:
        assert users.user_for_token(session, token=token).username == "dr_gu"
        assert not users.session_needs_touch(session, token=token)
        row = session.exec(select(LoginSession)).one()
        row.last_seen_at = utcnow() - users.IDLE_TIMEOUT + timedelta(minutes=2)
    with session_scope(engine) as session:
        assert users.session_needs_touch(session, token=token)
        users.touch_session(session, token=token)
    with session_scope(engine) as session:
        assert not users.session_needs_touch(session, token=token)
        row = session.exec(select(LoginSession)).one()
        row.last_seen_at = utcnow() - users.IDLE_TIMEOUT - timedelta(seconds=1)
    with session_scope(engine, read_only=True) as session:
        assert users.user_for_token(session, token=token) is None  # idle too long, though not expired


def test_users_unlock_on_the_command_line(sqlite_url, monkeypatch, capsys):
    from cli.main import main
    from db.store.engine import get_engine, make_engine

    engine = make_engine(sqlite_url)
    try:
        with session_scope(engine) as session:
            make_user(session, "dr_cao")
        for _ in range(MAX_FAILED_LOGINS):
            _attempt(engine, "dr_cao", "wrong-password")
        assert _attempt(engine, "dr_cao", DEFAULT_PASSWORD) == "throttled"
        monkeypatch.setenv("DATABASE_URL", sqlite_url)
        get_engine.cache_clear()
        try:
            assert main(["users", "unlock", "dr_cao"]) == 0
            assert main(["users", "unlock", "dr_cao"]) == 0
        finally:
            get_engine.cache_clear()
        out = capsys.readouterr().out.splitlines()
        assert out == ["login lock of dr_cao lifted", "dr_cao was not locked"]
        assert _attempt(engine, "dr_cao", DEFAULT_PASSWORD) == "ok"
    finally:
        engine.dispose()


def test_identity_links_are_unique_and_only_active_accounts_sign_in(engine):
    identity = users.oidc_identity("https://idp.hospital.example", "0042")
    with session_scope(engine) as session:
        make_user(session, "dr_lin")
        make_user(session, "dr_ye")
        users.link_identity(session, username="dr_lin", identity=identity, actor=users.SYSTEM_ACTOR)
    with session_scope(engine) as session:
        assert users.user_for_identity(session, identity=identity).username == "dr_lin"
        assert users.user_for_identity(session, identity="https://idp.hospital.example 0043") is None
        with pytest.raises(ValidationFailed, match="already linked to 'dr_lin'"):
            users.link_identity(session, username="dr_ye", identity=identity, actor=users.SYSTEM_ACTOR)
        with pytest.raises(ValidationFailed, match="issuer"):
            users.link_identity(session, username="dr_ye", identity="no-space", actor=users.SYSTEM_ACTOR)
    with session_scope(engine) as session:
        users.set_active(session, username="dr_lin", active=False, actor=users.SYSTEM_ACTOR)
    with session_scope(engine, read_only=True) as session:
        assert users.user_for_identity(session, identity=identity) is None  # deactivation bites at once
        entry = session.exec(select(AuditLog).where(AuditLog.action == "link_identity")).one()
        assert entry.after == {"identity": identity} and entry.entity_key == "dr_lin"
