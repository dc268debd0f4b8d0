"""A database with labels and assignments, taken back to revision 0008 (before the assignment state and
the tally's later columns), upgrades to the head with every kept figure as the head writes it."""

from __future__ import annotations

import os
from itertools import count

import pytest
from alembic import command
from sqlalchemy import text

from db import counts
from db.migrations.upgrade import upgrade
from db.store.engine import make_engine, sqlite_foreign_keys_off
from db.store.migrate import alembic_config, current_revision, head_revision
from tests.support.feedback_world import world

_names = count()
KEPT = {
    "label_tally": "SELECT response_id, group_no, stage, user_id, rubric_version_id, n, n_unchecked, n_gold_differs,"
    " n_no_gold FROM label_tally ORDER BY 1, 2, 3, 4, 5",
    "response_status": "SELECT * FROM response_status ORDER BY response_id",
    "assignment": "SELECT id, label_status, labeled, rubric_size FROM assignment ORDER BY id",
    "judge_totals": "SELECT judge, n_decisions FROM judge_totals ORDER BY judge",
    # A shard moved back to nothing keeps its row of zeros: those say nothing.
    "unresolved_totals": "SELECT shard, n_decisions, n_responses FROM unresolved_totals"
    " WHERE n_decisions != 0 OR n_responses != 0 ORDER BY shard",
}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url_of_each_kind(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'kept.db'}"
    pg_server = request.getfixturevalue("pg_server")
    name = f"cc_kept_{os.getpid()}_{next(_names)}"
    with pg_server.admin_engine.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    return pg_server.url(name)


def _kept(engine) -> dict[str, list[tuple]]:
    with engine.connect() as connection:
        return {name: [tuple(row) for row in connection.execute(text(query)).all()] for name, query in KEPT.items()}


def _judge_some(engine) -> None:
    """Decisions of two judges, written as a writer writes them: the rows, then the kept totals."""
    with engine.begin() as connection:
        responses = connection.execute(text("SELECT id FROM response ORDER BY id LIMIT 2")).scalars().all()
        rows = [
            {"judge": judge, "response_id": response_id, "criterion_id": f"c{i:02d}", "met": i % 2 == 0}
            for judge, n in (("judge-a", 3), ("judge-b", 3))
            for response_id in (responses if judge == "judge-a" else responses[:1])
            for i in range(1, n + 1)
        ]
        connection.execute(
            text(
                "INSERT INTO judge_decision (judge, response_id, criterion_id, met)"
                " VALUES (:judge, :response_id, :criterion_id, :met)"
            ),
            rows,
        )
        counts.add_judge_decisions(connection, {"judge-a": 6, "judge-b": 3})


def test_upgrading_from_0008_rebuilds_every_kept_figure(database_url_of_each_kind):
    engine = make_engine(database_url_of_each_kind)
    try:
        upgrade(engine)
        world(engine)
        _judge_some(engine)
        written = _kept(engine)
        assert written["judge_totals"] == [("judge-a", 6), ("judge-b", 3)]
        assert written["label_tally"] and written["assignment"]
        assert written["unresolved_totals"]  # the world leaves disagreements nobody adjudicated
        assert any(row[7] for row in written["label_tally"])  # some label differs from gold
        assert {row[1] for row in written["assignment"]} - {None}

        with engine.connect() as connection, sqlite_foreign_keys_off(connection):  # as every migration runs
            config = alembic_config()
            config.attributes["connection"] = connection
            command.downgrade(config, "0008_feedback_rounds")
            connection.commit()
        assert current_revision(engine) == "0008_feedback_rounds"

        upgrade(engine)
        assert current_revision(engine) == head_revision()
        assert _kept(engine) == written
    finally:
        engine.dispose()
