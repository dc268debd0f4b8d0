"""Every file the app writes that holds labels, password hashes or keys is its owner's only (0600).

The tests run under a permissive umask (022, the usual default) so that only the app's own care can
make the files private: the SQLite file and its WAL/SHM, the audit key file, backups, exports and
whatever the command line writes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from analysis.exports.gold import export_gold
from analysis.exports.judgements import export_judgements
from cli.main import main
from db.access import audit, audit_key as audit_key_module
from db.store.backup import backup
from db.store.engine import make_engine, session_scope
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_label, make_response, make_user

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(autouse=True)
def permissive_umask():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_a_new_sqlite_file_and_its_wal_and_shm_are_private(tmp_path):
    path = tmp_path / "new.db"
    engine = make_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE t (secret TEXT)"))
        connection.execute(text("INSERT INTO t VALUES ('argon2-hash')"))
    with engine.connect() as reader:  # an open connection keeps -wal and -shm beside the file
        reader.execute(text("SELECT * FROM t")).all()
        companions = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm")]
        assert all(companion.exists() for companion in companions)
        assert [mode(p) for p in (path, *companions)] == [0o600, 0o600, 0o600]
    engine.dispose()


def test_an_older_world_readable_database_is_made_private_when_opened(sqlite_url):
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    os.chmod(path, 0o644)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").write_bytes(b"")
        os.chmod(f"{path}{suffix}", 0o644)
    make_engine(sqlite_url).dispose()
    assert [mode(path), mode(f"{path}-wal"), mode(f"{path}-shm")] == [0o600, 0o600, 0o600]


def test_the_audit_key_file_is_private(tmp_path, monkeypatch):
    # created under the permissive umask above: the key file is private all the same
    monkeypatch.delenv(audit_key_module.KEY_ENV, raising=False)
    path = tmp_path / "keys" / "audit.key"
    monkeypatch.setenv(audit_key_module.KEY_FILE_ENV, str(path))
    audit.writer_key(chain_is_empty=True)
    assert mode(path) == 0o600


def test_a_backup_is_private_on_both_databases(engine, tmp_path):
    with session_scope(engine) as session:
        make_user(session, "boss", "admin")
    target = tmp_path / "copy.backup"
    backup(engine, target)
    assert target.stat().st_size > 0 and mode(target) == 0o600


def labelled_world(engine) -> None:
    with session_scope(engine) as session:
        annotator = make_user(session, "ann", "annotator", 1)
        case = make_case(session, "CC-0001", n=2)
        response = make_response(session, case, model="model-a", text="回答")
        for criterion_id in ("c01", "c02"):
            make_label(session, response, criterion_id, met=True, user=annotator)


def test_exports_holding_labels_are_private(engine, tmp_path):
    labelled_world(engine)
    gold = tmp_path / "gold.jsonl"
    export_gold(engine, gold)
    export_judgements(engine, tmp_path / "judgements-out", source="gold")
    written = [gold, Path(f"{gold}.manifest.json"), *(tmp_path / "judgements-out").rglob("*")]
    files = [path for path in written if path.is_file()]
    assert len(files) >= 5
    assert {str(path.relative_to(tmp_path)): mode(path) for path in files} == {
        str(path.relative_to(tmp_path)): 0o600 for path in files
    }


def test_everything_the_command_line_writes_is_private(sqlite_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    engine = make_engine(sqlite_url)
    labelled_world(engine)
    engine.dispose()
    report = tmp_path / "report.json"
    copy = tmp_path / "copy.db"
    assert main(["report", "--json", str(report), "--k", "1"]) == 0
    assert main(["backup", str(copy)]) == 0
    assert main(["export", "gold", str(tmp_path / "gold.jsonl")]) == 0
    written = [report, copy, tmp_path / "gold.jsonl"]
    assert [mode(path) for path in written] == [0o600] * len(written)
