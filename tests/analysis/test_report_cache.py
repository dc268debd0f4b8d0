"""`clinconsensus report` keeps the finished report per data version (beside a SQLite file, in the cache folder for
PostgreSQL) and replays it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from sqlmodel import select

import analysis.report
from cli.main import main
from db.rules.enums import Stage
from db.store.engine import get_engine
from db.store.models import Case, User
from tests.analysis.test_report import populate_small_database
from tests.support.factories import make_label, make_response


@pytest.fixture
def small_database(engine, database_url, monkeypatch, session, tmp_path):
    populate_small_database(session)
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("CLINCONSENSUS_CACHE_DIR", str(tmp_path / "kept"))
    get_engine.cache_clear()
    yield database_url
    get_engine.cache_clear()


def _cache_folder(database_url: str) -> Path | None:
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite":
        # PostgreSQL: in the audit key's folder, one subfolder per database (named by a hash of its URL).
        from db.rules.config import get_settings

        caches = Path(str(get_settings().cache_dir)) / "report-cache"
        folders = sorted(caches.iterdir()) if caches.exists() else []
        assert len(folders) <= 1, folders
        return folders[0] if folders else caches / "none-kept"
    database = Path(str(url.database))
    return database.with_name(database.name + ".cache")


def _report(tmp_path: Path, capsys, name: str, *options: str) -> tuple[bytes, str]:
    path = tmp_path / name
    assert main(["report", *options, "--json", str(path)]) == 0
    return path.read_bytes(), capsys.readouterr().out


def test_rerun_on_unchanged_data_replays_the_same_bytes(small_database, tmp_path, capsys, monkeypatch):
    first, printed = _report(tmp_path, capsys, "first.json", "--k", "2")
    folder = _cache_folder(small_database)
    assert folder is not None and stat.S_IMODE(folder.stat().st_mode) == 0o700
    kept = sorted(folder.iterdir())
    assert [path.suffix for path in kept] == [".json", ".txt"]
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in kept)

    def no_computing(*args, **kwargs):
        raise AssertionError("computed again on unchanged data")

    monkeypatch.setattr(analysis.report, "run_report", no_computing)
    assert _report(tmp_path, capsys, "again.json", "--k", "2") == (first, printed)


def test_changed_data_or_options_compute_again(small_database, tmp_path, capsys, session):
    before, _ = _report(tmp_path, capsys, "before.json", "--k", "2")
    other_k, _ = _report(tmp_path, capsys, "k1.json", "--k", "1")
    assert other_k != before

    # A new model's response with labels of both groups: the data version moves, the report follows.
    case = session.exec(select(Case).order_by(Case.id)).first()
    assert case is not None
    response = make_response(session, case, "model-c", "abc")
    g1 = session.exec(select(User).where(User.username == "ann-1")).one()
    g2 = session.exec(select(User).where(User.username == "ann-2")).one()
    for i in range(1, 4):
        make_label(session, response, f"c{i:02d}", True, g1, stage=Stage.annotation)
        make_label(session, response, f"c{i:02d}", True, g2, stage=Stage.annotation)
    session.commit()

    after, printed = _report(tmp_path, capsys, "after.json", "--k", "2")
    assert after != before and b'"model-c"' in after and "model-c" in printed
    folder = _cache_folder(small_database)
    if folder is not None:
        assert len(list(folder.glob("report-*.txt"))) == 3


def test_a_run_writing_tables_keeps_nothing(small_database, tmp_path):
    assert main(["report", "--k", "2", "--out", str(tmp_path / "out")]) == 0
    folder = _cache_folder(small_database)
    assert folder is None or not folder.exists() or not any(folder.iterdir())
