"""The benchmarks measure `report --json` the first time after a change: the reports kept for an unchanged
database are forgotten first, beside a SQLite file and, for PostgreSQL, in the folder the commands' settings name."""

from __future__ import annotations

from sqlmodel import Session

from benchmarks import whole_data
from db.store.engine import make_engine
from tests.analysis.test_report import populate_small_database


def test_the_kept_reports_are_forgotten_on_both_databases(database_url, tmp_path):
    engine = make_engine(database_url)
    with Session(engine, expire_on_commit=False) as session:
        populate_small_database(session)
    engine.dispose()
    report = tmp_path / "report.json"
    whole_data.clinconsensus(database_url, "report", "--k", "2", "--json", str(report))
    written = report.read_bytes()
    assert b'"models"' in written
    whole_data.clinconsensus(database_url, "report", "--k", "2", "--json", str(report))  # answered from what is kept
    assert report.read_bytes() == written
    assert whole_data.forget_kept_reports(database_url) == 2  # the kept report.json and its printed tables
    assert whole_data.forget_kept_reports(database_url) == 0
    whole_data.clinconsensus(database_url, "report", "--k", "2", "--json", str(report))  # computed again
    assert report.read_bytes() == written
    assert whole_data.forget_kept_reports(database_url) == 2
