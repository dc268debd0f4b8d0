"""Every account function checks who acts, in db/ (docs/REFERENCE.md §1): admins manage accounts, a user
changes only their own password, the command line and the demo act as a system actor; the audit log
names who did it. Each function is called as an annotator and as a checker: refused, and nothing changes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlmodel import Session, select

from db.access import users
from db.rules.errors import PermissionDenied
from db.rules.security import verify_password
from db.store.engine import session_scope
from db.store.models import AuditLog, User, utcnow
from tests.support.factories import DEFAULT_PASSWORD, make_user

NEW_PASSWORD = "a-brand-new-password"
IDENTITY = "https://idp.hospital.example 0042"

#: Every account function, called on the account "target" (or a new name) by `actor`.
ACCOUNT_CALLS: dict[str, Callable[[Session, users.Actor], object]] = {
    "add_user(admin)": lambda s, actor: users.add_user(
        s, username="new_admin", role="admin", group_no=None, password=NEW_PASSWORD, actor=actor
    ),
    "add_user(annotator)": lambda s, actor: users.add_user(
        s, username="new_ann", role="annotator", group_no=1, password=NEW_PASSWORD, actor=actor
    ),
    "add_placeholder_user": lambda s, actor: users.add_placeholder_user(
        s, username="imported", role="annotator", group_no=2, actor=actor
    ),
    "set_active(False)": lambda s, actor: users.set_active(s, username="target", active=False, actor=actor),
    "set_active(True)": lambda s, actor: users.set_active(s, username="sleeper", active=True, actor=actor),
    "reset_password(other)": lambda s, actor: users.reset_password(
        s, username="target", password=NEW_PASSWORD, actor=actor
    ),
    "reset_password(unknown)": lambda s, actor: users.reset_password(
        s, username="nobody", password=NEW_PASSWORD, actor=actor
    ),
    "update_account": lambda s, actor: users.update_account(
        s, username="target", role="admin", group_no=None, actor=actor
    ),
    "update_account(self)": lambda s, actor: users.update_account(
        s, username=actor.username, role="admin", group_no=None, actor=actor
    ),
    "unlock": lambda s, actor: users.unlock(s, username="locked", actor=actor),
    "link_identity": lambda s, actor: users.link_identity(s, username="target", identity=IDENTITY, actor=actor),
    "link_identity(self)": lambda s, actor: users.link_identity(
        s, username=actor.username, identity=IDENTITY, actor=actor
    ),
    "list_users": lambda s, actor: users.list_users(s, actor=actor),
    "locked_names": lambda s, actor: users.locked_names(s, actor=actor),
}


def people(engine) -> None:
    with session_scope(engine) as session:
        make_user(session, "boss", "admin")
        make_user(session, "ann", "annotator", 1)
        make_user(session, "chk", "checker", 2)
        make_user(session, "target", "annotator", 2)
        make_user(session, "sleeper", "annotator", 1, active=False)
        target = users.get_user(session, username="target")
        users.open_session(session, user=target)
        session.execute(
            text("INSERT INTO login_throttle (username_key, failures, locked_until, updated_at) "
                 "VALUES ('locked', 5, :until, :now)"),
            {"until": utcnow() + timedelta(minutes=10), "now": utcnow()},
        )  # fmt: skip


def state(engine) -> dict:
    """Every row the account functions could touch, as plain values."""
    with engine.connect() as connection:
        return {
            table: sorted(map(tuple, connection.exec_driver_sql(f'SELECT * FROM "{table}"').all()))
            for table in ("user", "login_session", "login_throttle", "audit_log")
        }


@pytest.mark.parametrize("role", ["annotator", "checker"])
@pytest.mark.parametrize("call", list(ACCOUNT_CALLS))
def test_annotators_and_checkers_are_refused_and_nothing_changes(engine, role, call):
    people(engine)
    before = state(engine)
    with pytest.raises(PermissionDenied, match="only admins manage accounts"), session_scope(engine) as session:
        actor = users.get_user(session, username="ann" if role == "annotator" else "chk")
        ACCOUNT_CALLS[call](session, actor)
    assert state(engine) == before


@pytest.mark.parametrize("call", ["set_active(False)", "update_account", "add_user(admin)", "list_users"])
def test_an_admin_deactivated_or_demoted_since_signing_in_is_refused(engine, call):
    people(engine)
    with session_scope(engine) as session:
        stale_admin = users.get_user(session, username="boss")
    with session_scope(engine) as session:  # the page still holds the admin it read before the change
        session.get(User, stale_admin.id).role = "checker"
        session.get(User, stale_admin.id).group_no = 1
    before = state(engine)
    with pytest.raises(PermissionDenied), session_scope(engine) as session:
        ACCOUNT_CALLS[call](session, stale_admin)
    assert state(engine) == before


def test_admins_and_the_system_manage_accounts_and_the_audit_log_names_them(engine):
    people(engine)
    with session_scope(engine) as session:
        boss = users.get_user(session, username="boss")
        users.set_active(session, username="target", active=False, actor=boss)
        users.add_user(session, username="cli_made", role="admin", group_no=None, password=NEW_PASSWORD,
                       actor=users.CLI_ACTOR)  # fmt: skip
        assert users.unlock(session, username="locked", actor=boss) is True
    with session_scope(engine, read_only=True) as session:
        actors = {(row.action, row.entity_key): row.actor for row in session.exec(select(AuditLog)).all()}
        assert users.get_user(session, username="target").is_active is False
        assert users.get_user(session, username="cli_made").role == "admin"
    assert actors[("deactivate", "target")] == "boss"
    assert actors[("create", "cli_made")] == "@cli"
    assert actors[("unlock", "locked")] == "boss"


def test_a_user_changes_their_own_password_and_only_their_own(engine):
    people(engine)
    with session_scope(engine) as session:
        annotator = users.get_user(session, username="ann")
        users.reset_password(session, username="ann", password=NEW_PASSWORD, actor=annotator)
    with session_scope(engine, read_only=True) as session:
        annotator = users.get_user(session, username="ann")
        assert verify_password(NEW_PASSWORD, annotator.password_hash)
        assert not verify_password(DEFAULT_PASSWORD, annotator.password_hash)
        entry = session.exec(select(AuditLog).where(AuditLog.action == "reset_password")).one()
        assert (entry.actor, entry.entity_key) == ("ann", "ann")
    before = state(engine)
    with pytest.raises(PermissionDenied), session_scope(engine) as session:
        users.reset_password(session, username="target", password=NEW_PASSWORD, actor=annotator)
    assert state(engine) == before


def test_a_deactivated_user_cannot_change_even_their_own_password(engine):
    people(engine)
    with session_scope(engine) as session:
        sleeper = users.get_user(session, username="sleeper")
    before = state(engine)
    with pytest.raises(PermissionDenied), session_scope(engine) as session:
        users.reset_password(session, username="sleeper", password=NEW_PASSWORD, actor=sleeper)
    assert state(engine) == before
