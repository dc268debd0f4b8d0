"""Schema, engine settings, accounts and the audit chain, on SQLite and PostgreSQL."""

from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlmodel import Session

from db.access import users
from db.access.audit import record, verify_chain
from db.migrations.upgrade import upgrade
from db.rules.config import MAX_FAILED_LOGINS
from db.rules.errors import ValidationFailed
from db.store.engine import make_engine, session_scope
from db.store.migrate import current_revision, head_revision
from db.store.models import LoginThrottle, utcnow
from tests.support.factories import DEFAULT_PASSWORD, make_user


def test_migrated_database_is_at_head(engine):
    assert current_revision(engine) == head_revision()
    upgrade(engine)  # a second run changes nothing and does not fail
    assert current_revision(engine) == head_revision()


def test_the_head_revision_named_in_the_code_is_alembics_head():
    from db.store.migrate import HEAD_REVISION

    assert head_revision() == HEAD_REVISION


def test_a_database_at_head_is_opened_without_loading_alembic(tmp_path):
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'at-head.db'}"
    from db.store.engine import make_engine

    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    probe = (
        "import sys; from db.store.engine import make_engine; from db.migrations.upgrade import upgrade; "
        f"upgrade(make_engine({url!r})); print('alembic' in sys.modules)"
    )
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    result = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_fresh_sqlite_file_is_migrated_with_wal_and_foreign_keys(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    upgrade(engine)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
    engine.dispose()


def test_add_user_validates_and_hashes(session: Session):
    user = users.add_user(
        session, username="dr_li", role="annotator", group_no=1, password="s3cret-pass", actor=users.SYSTEM_ACTOR
    )
    assert user.password_hash and user.password_hash.startswith("$argon2")
    assert "s3cret-pass" not in user.password_hash
    with pytest.raises(ValidationFailed):
        users.add_user(
            session, username="dr_li", role="annotator", group_no=1, password="s3cret-pass", actor=users.SYSTEM_ACTOR
        )
    with pytest.raises(ValidationFailed):
        users.add_user(
            session, username="x y", role="annotator", group_no=1, password="s3cret-pass", actor=users.SYSTEM_ACTOR
        )
    with pytest.raises(ValidationFailed):
        users.add_user(
            session, username="dr_wang", role="annotator", group_no=3, password="s3cret-pass", actor=users.SYSTEM_ACTOR
        )
    with pytest.raises(ValidationFailed):
        users.add_user(
            session, username="dr_wang", role="annotator", group_no=1, password="short", actor=users.SYSTEM_ACTOR
        )


def test_login_throttles_after_repeated_failures(engine):
    with session_scope(engine) as session:
        make_user(session, "dr_zhao")
    assert users.authenticate(engine, username="dr_zhao", password=DEFAULT_PASSWORD) is not None
    for _ in range(MAX_FAILED_LOGINS - 1):
        assert users.authenticate(engine, username="dr_zhao", password="wrong-password") is None
    with pytest.raises(users.LoginThrottled):
        users.authenticate(engine, username="dr_zhao", password="wrong-password")
    # locked: even the right password fails now
    with pytest.raises(users.LoginThrottled):
        users.authenticate(engine, username="dr_zhao", password=DEFAULT_PASSWORD)
    with session_scope(engine) as session:
        session.get(LoginThrottle, "dr_zhao").locked_until = utcnow() - timedelta(seconds=1)
    assert users.authenticate(engine, username="dr_zhao", password=DEFAULT_PASSWORD) is not None


def test_unknown_and_inactive_users_cannot_log_in(engine):
    with session_scope(engine) as session:
        make_user(session, "dr_sun", active=False)
        placeholder = users.add_placeholder_user(
            session, username="imported", role="annotator", group_no=2, actor=users.SYSTEM_ACTOR
        )
        assert placeholder.password_hash is None
    assert users.authenticate(engine, username="nobody", password=DEFAULT_PASSWORD) is None
    assert users.authenticate(engine, username="dr_sun", password=DEFAULT_PASSWORD) is None
    assert users.authenticate(engine, username="imported", password="") is None


def test_session_tokens_resolve_and_revoke(session: Session):
    user = make_user(session, "dr_qian")
    token = users.open_session(session, user=user)
    session.flush()
    assert users.user_for_token(session, token=token).id == user.id
    assert users.user_for_token(session, token=token + "x") is None
    users.set_active(session, username="dr_qian", active=False, actor=users.SYSTEM_ACTOR)
    session.flush()
    assert users.user_for_token(session, token=token) is None


def test_audit_chain_verifies_and_detects_tampering(session: Session):
    for i in range(5):
        record(
            session,
            "alice",
            action="update",
            entity="label",
            entity_key=f"k{i}",
            before={"met": False},
            after={"met": True, "note": "依据充分"},
        )
    session.commit()
    report = verify_chain(session)
    assert report.ok and report.entries == 5
    third = session.exec(text("SELECT id FROM audit_log ORDER BY id LIMIT 1 OFFSET 2")).scalar()
    session.exec(text("UPDATE audit_log SET actor = 'mallory' WHERE id = :id").bindparams(id=third))
    session.commit()
    report = verify_chain(session)
    assert not report.ok and report.first_bad_id == third


def test_models_and_migrations_describe_the_same_schema(engine):
    """Alembic autogenerate finds nothing to do on a migrated database: no model change lacks a revision."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlmodel import SQLModel

    import db.store.models  # noqa: F401

    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    assert differences == []
