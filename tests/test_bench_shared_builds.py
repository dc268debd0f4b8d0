"""The benchmarks' shared builds: a benchmark is handed a copy it may change, never the build itself."""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa

from benchmarks.full_scale import SHARED_CASES, built_databases, shared_databases


def _labels(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.exec_driver_sql("SELECT count(*) FROM label").scalar_one()
    finally:
        engine.dispose()


def _delete_labels(url: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("DELETE FROM label")
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_benchmark_gets_copies_of_the_shared_builds_and_changes_only_them() -> None:
    with shared_databases(cases=3) as shared:
        assert list(shared) == ["SQLite", "PostgreSQL"]
        built = {name: _labels(url) for name, url in shared.items()}
        assert all(count > 0 for count in built.values())
        with built_databases(cases=3) as copies:
            assert [url.split(":")[0] for url in copies] == ["sqlite", "postgresql+psycopg"]
            assert not set(copies) & set(shared.values())
            assert [_labels(url) for url in copies] == list(built.values())
            for url in copies:
                _delete_labels(url)
                assert _labels(url) == 0
        assert {name: _labels(url) for name, url in shared.items()} == built
        copy_names = [sa.engine.make_url(url).database for url in copies]
    # The copies are gone with the run that had them, the shared builds and their names with theirs.
    assert not os.path.exists(copy_names[0] or "")
    assert SHARED_CASES not in os.environ


def test_another_number_of_cases_is_not_served_from_the_shared_build() -> None:
    with shared_databases(cases=3, postgres=False) as shared, built_databases(cases=4, postgres=False) as own:
        assert own != [shared["SQLite"]]
        engine = sa.create_engine(own[0])
        try:
            with engine.connect() as connection:
                cases = connection.exec_driver_sql('SELECT count(*) FROM "case"').scalar_one()
        finally:
            engine.dispose()
        assert cases == 4
