"""The revisions read as a history: named in chain order, self-contained, and a database with rows made at
any earlier revision upgrades to the newest with its rows and every kept figure as the newest writes it."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
from datetime import UTC, datetime
from itertools import count
from pathlib import Path

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlmodel import Session

from db.access.audit import audit_head, verify_chain
from db.access.audit_key import audit_key
from db.access.audit_seal import seal_problem
from db.migrations.upgrade import upgrade
from db.store.engine import make_engine, sqlite_foreign_keys_off
from db.store.migrate import HEAD_REVISION, LEGACY_REVISIONS, alembic_config, current_revision, head_revision
from tests.support.feedback_world import world

VERSIONS = Path(__file__).resolve().parents[3] / "db" / "migrations" / "versions"
#: What a revision may import: Alembic, SQLAlchemy, SQLModel's column types and the standard library.
ALLOWED_TOP_LEVEL = {"alembic", "sqlalchemy", "sqlmodel"} | set(sys.stdlib_module_names)
#: alembic_version.version_num is VARCHAR(32).
MAX_REVISION_LENGTH = 32

_names = count()


def _chain() -> list[str]:
    """The revisions from the first to the head, following down_revision."""
    script = ScriptDirectory.from_config(alembic_config())
    return [revision.revision for revision in reversed(list(script.walk_revisions()))]


CHAIN = _chain()
#: Data in the log cannot go below the keyed chain: revision 0004 re-keys an unkeyed log it verifies first.
FIRST_WITH_KEYED_LOG = "0004_independence_and_sign_in"


def test_file_names_follow_the_chain_and_name_their_revision():
    files = sorted(path.stem for path in VERSIONS.glob("[0-9]*.py"))
    assert files == CHAIN
    assert [name[:4] for name in CHAIN] == [f"{i:04d}" for i in range(1, len(CHAIN) + 1)]
    assert CHAIN[-1] == HEAD_REVISION == head_revision()
    assert all(len(name) <= MAX_REVISION_LENGTH for name in CHAIN)


def test_no_revision_imports_the_product():
    for path in VERSIONS.glob("[0-9]*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                assert module.split(".")[0] in ALLOWED_TOP_LEVEL, f"{path.name} imports {module}"


def test_every_legacy_identifier_names_a_revision_of_the_chain_once():
    assert sorted(LEGACY_REVISIONS.values()) == CHAIN[: len(LEGACY_REVISIONS)]
    assert not set(LEGACY_REVISIONS) & set(CHAIN)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url_of_each_kind(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    pg_server = request.getfixturevalue("pg_server")
    name = f"cc_history_{os.getpid()}_{next(_names)}"
    with pg_server.admin_engine.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    return pg_server.url(name)


KEPT_TABLES = (
    "label_tally",
    "response_status",
    "label_totals",
    "adjudication_ready",
    "assignment_totals",
    "judge_totals",
)
#: Rows a downgrade keeps at every revision (the first schema's tables) and an upgrade must not lose.
KEPT_ROWS = {
    "user": 'SELECT username, role, group_no FROM "user" ORDER BY username',
    "case": 'SELECT case_id FROM "case" ORDER BY case_id',
    "response": "SELECT id, model, text FROM response ORDER BY id",
    "label": "SELECT id, response_id, criterion_id, stage, group_no, met, user_id FROM label ORDER BY id",
}


def _snapshot(engine) -> dict[str, list[tuple]]:
    tables = set(inspect(engine).get_table_names())
    with engine.connect() as connection:
        rows = {name: [tuple(row) for row in connection.execute(text(query))] for name, query in KEPT_ROWS.items()}
        for table in KEPT_TABLES:
            if table in tables:
                # A shard or total moved back to nothing keeps a row of zeros; those say nothing.
                found = [tuple(row) for row in connection.execute(text(f"SELECT * FROM {table}"))]
                rows[table] = sorted((row for row in found if any(v not in (0, None) for v in row[1:])), key=repr)
    return rows


def _to(engine, revision: str) -> None:
    with engine.connect() as connection, sqlite_foreign_keys_off(connection):
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
        connection.commit()


@pytest.mark.parametrize("revision", CHAIN[:-1])
def test_a_database_with_rows_at_each_earlier_revision_upgrades_to_the_newest(database_url_of_each_kind, revision):
    engine = make_engine(database_url_of_each_kind)
    try:
        upgrade(engine)
        world(engine)
        newest = _snapshot(engine)
        assert newest["label"] and newest["label_tally"] and newest["response_status"]
        if CHAIN.index(revision) < CHAIN.index(FIRST_WITH_KEYED_LOG):
            # Below the keyed chain a log holds unkeyed entries; this one's are keyed, so it starts empty.
            with engine.begin() as connection:
                connection.execute(text("DELETE FROM audit_log"))
        _to(engine, revision)
        assert current_revision(engine) == revision

        upgrade(engine)
        assert current_revision(engine) == head_revision()
        assert _snapshot(engine) == newest
        with Session(engine) as session:  # the log re-sealed by the frozen seal of revision 0014, if it went below
            head = audit_head(session)
            assert verify_chain(session).ok
            assert seal_problem(session, entries=head.count, last_hash=head.hash, key=audit_key()) is None
    finally:
        engine.dispose()


def test_a_database_stamped_with_a_legacy_identifier_is_restamped_and_upgraded(database_url_of_each_kind):
    engine = make_engine(database_url_of_each_kind)
    try:
        upgrade(engine)
        world(engine)
        newest = _snapshot(engine)
        _to(engine, "0020_label_totals")
        with engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = '0022'"))  # its name before
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        assert _snapshot(engine) == newest
    finally:
        engine.dispose()


def test_below_0030_the_row_totals_hold_the_cases_and_responses_the_tables_hold(database_url_of_each_kind):
    engine = make_engine(database_url_of_each_kind)
    try:
        upgrade(engine)
        world(engine)
        assert "row_totals" not in inspect(engine).get_table_names()
        _to(engine, "0029_feedback_final_gold")
        with engine.connect() as connection:
            kept = dict(connection.execute(text("SELECT table_name, n_rows FROM row_totals")).all())
            cases = connection.execute(text('SELECT COUNT(*) FROM "case"')).scalar_one()
            responses = connection.execute(text("SELECT COUNT(*) FROM response")).scalar_one()
        assert cases and responses
        assert kept == {"case": cases, "response": responses}
        upgrade(engine)
        assert "row_totals" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()


def _unkeyed(prev_hash: str, at: datetime, *fields) -> str:
    """The log's hash before revision 0004: SHA-256 of the sorted, compact JSON of the content."""
    content = [prev_hash, at.replace(tzinfo=None).isoformat(timespec="microseconds"), *fields]
    payload = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def test_an_unkeyed_log_of_revision_0003_is_keyed_and_sealed_by_the_upgrade(database_url_of_each_kind):
    engine = make_engine(database_url_of_each_kind)
    try:
        with engine.connect() as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, "0003_label_timing")
            connection.commit()
        prev = "0" * 64
        with engine.begin() as connection:
            for i in range(3):
                at = datetime(2025, 1, 2, 3, 4, 5, 600 + i, tzinfo=UTC)
                fields = ("admin", "update", "label", f"1:c0{i}", {"met": False}, {"met": True, "note": "复核"})
                digest = _unkeyed(prev, at, *fields)
                connection.execute(
                    text(
                        "INSERT INTO audit_log (at, actor, action, entity, entity_key, before, after, prev_hash, hash)"
                        " VALUES (:at, :actor, :action, :entity, :key, :before, :after, :prev, :hash)"
                    ),
                    {
                        "at": at.replace(tzinfo=None),
                        "actor": fields[0],
                        "action": fields[1],
                        "entity": fields[2],
                        "key": fields[3],
                        "before": json.dumps(fields[4]),
                        "after": json.dumps(fields[5], ensure_ascii=False),
                        "prev": prev,
                        "hash": digest,
                    },
                )
                prev = digest
        upgrade(engine)
        with Session(engine) as session:
            head = audit_head(session)
            assert head.count == 3 and head.hash != prev  # re-linked with the key
            assert verify_chain(session).ok
            assert seal_problem(session, entries=3, last_hash=head.hash, key=audit_key()) is None
    finally:
        engine.dispose()
