"""The annotator's feedback reads their own tally rows, so its cost follows their labels, not the data squared.

Given `response_id IN (the group's responses in open rounds)` beside the current-rubric rule (another IN
list), SQLite probed the label tally once per pair of the two lists: the feedback page's first visit took
0.1 s at 250 cases, 1.4 s at 1,000 and 9.8 s at 2,500 (benchmarks/bench_growth.py). SQLite chooses its
plan from the query and the indexes alone (no statistics are gathered), so a small study shows the plan
of any size.
"""

from __future__ import annotations

from sqlalchemy import event

from db.store.engine import make_engine, session_scope
from db.store.models import User
from db.work import feedback
from tests.db.work.test_feedback_paging import study


def _plans_of(engine, read, wanted: str) -> tuple[object, list[list[str]]]:
    """What `read(session)` returns, and SQLite's query plan of each statement it ran that names `wanted`."""
    statements: list[tuple[str, tuple]] = []

    def keep(connection, cursor, statement, parameters, context, executemany):
        statements.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", keep)
    with session_scope(engine, read_only=True) as session:
        result = read(session)
    event.remove(engine, "before_cursor_execute", keep)
    with engine.connect() as connection:
        plans = [
            [row[3] for row in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, parameters)]
            for sql, parameters in statements
            if wanted in sql
        ]
    engine.dispose()
    return result, plans


def test_the_feedback_figures_read_the_annotators_own_tally_rows(sqlite_url):
    engine = make_engine(sqlite_url)
    ids = study(engine)
    view, plans = _plans_of(
        engine,
        lambda session: feedback.my_feedback(session, session.get(User, ids["ann1"]), page=0, page_size=5),
        "label_tally",
    )
    assert view.open_rounds == 1 and view.compared > 0
    (plan,) = plans
    reading_the_tally = [step for step in plan if "label_tally" in step]
    assert reading_the_tally and all("ix_label_tally_user" in step for step in reading_the_tally), plan


def test_the_open_round_count_probes_the_round_index_not_every_assignment(sqlite_url):
    """Whether the group has work in an open round: once read by going through all of the group's label
    assignments (4× the data, 4× the time on every visit of the feedback page), now an index probe per round."""
    engine = make_engine(sqlite_url)
    ids = study(engine)
    count, plans = _plans_of(
        engine, lambda session: feedback.open_round_count(session, session.get(User, ids["ann1"])), "feedback_round"
    )
    assert count == 1
    (plan,) = plans
    reading_assignments = [step for step in plan if "assignment" in step]
    assert reading_assignments and all("ix_assignment_round" in step for step in reading_assignments), plan
    assert not any(step.startswith("SCAN assignment") for step in plan), plan
