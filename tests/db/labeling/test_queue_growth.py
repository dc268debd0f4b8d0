"""An annotator's queue costs what it holds: each item's response and case are read by key, never all of them.

As joins, PostgreSQL hashed every response and case as soon as a queue was a few per cent of the responses: the
busiest annotator's queue (9,174 items at either size) took 20 ms at the paper's scale and 47 ms at 4× it
(benchmarks/bench_growth.py). PostgreSQL plans from statistics, so the study here is built with the proportions
that led it there (a quarter of 4,000 responses in one queue, texts of a real answer's length) and analysed.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import event, select
from sqlmodel import Session, col

from db.labeling import annotation
from db.rules.enums import AssignmentKind
from db.store.engine import make_engine
from db.store.models import Assignment, Case, Response, User
from tests.support.factories import make_user

pytestmark = pytest.mark.postgres

CASES = 400
MODELS = 10
ANSWER = "患者主诉胸痛三小时，伴大汗。" * 80  # about the length of a model's answer


def _study(engine) -> tuple[int, list[tuple[int, str, int, str]]]:
    """The annotator's id, and their queue as (response id, code, case pk, case id) in case and code order."""
    with Session(engine, expire_on_commit=False) as session:
        annotator = make_user(session, "ann1", "annotator", 1)
        cases = [
            Case(case_id=f"CC-{n:05d}", difficulty="medium", subject="心内科", clinical_context="", user_request="")
            for n in range(CASES, 0, -1)  # inserted against case id order, so the order is the query's own
        ]
        session.add_all(cases)
        session.flush()
        responses = [
            Response(
                case_pk=case.id, model=f"model-{m}", text=ANSWER, length=len(ANSWER), code=f"R{case.id:05d}{9 - m}"
            )
            for case in cases
            for m in range(MODELS)
        ]
        session.add_all(responses)
        session.flush()
        mine = [response for n, response in enumerate(responses) if n % 4 == 0]
        session.add_all(
            Assignment(kind=AssignmentKind.label, case_pk=r.case_pk, response_id=r.id, user_id=annotator.id, group_no=1)
            for r in mine
        )
        session.commit()
        case_ids = {case.id: case.case_id for case in cases}
        queue = sorted(((r.id, r.code, r.case_pk, case_ids[r.case_pk]) for r in mine), key=lambda i: (i[3], i[1]))
        return annotator.id, queue


def _scans(plan: dict) -> list[tuple[str, str, str, str]]:
    """(node type, table, index, index condition) of every node of a JSON plan that reads a table."""
    found = []
    if "Relation Name" in plan:
        found.append((plan["Node Type"], plan["Relation Name"], plan.get("Index Name", ""), plan.get("Index Cond", "")))
    for child in plan.get("Plans", []):
        found.extend(_scans(child))
    return found


def _plan(engine, statement, parameters) -> list[tuple[str, str, str, str]]:
    with engine.connect() as connection:
        (row,) = connection.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters).all()
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return _scans(document[0]["Plan"])


def test_the_queue_reads_each_items_response_and_case_by_key(postgres_url):
    engine = make_engine(postgres_url)
    annotator_id, expected = _study(engine)
    with engine.connect() as connection:
        connection.exec_driver_sql("ANALYZE")
        connection.commit()

    statements: list[tuple[str, object]] = []

    def keep(connection, cursor, statement, parameters, context, executemany):
        if "assignment" in statement and "response" in statement:
            statements.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", keep)
    with Session(engine) as session:
        queue = annotation.labeling_queue(session, session.get(User, annotator_id))
    event.remove(engine, "before_cursor_execute", keep)

    assert [(i.response_id, i.code, i.case_pk, i.case_id) for i in queue.items] == expected
    ((statement, parameters),) = statements
    scans = _plan(engine, statement, parameters)
    reads = {table: (node, condition) for node, table, _, condition in scans if table in {"response", "case"}}
    assert reads.keys() == {"response", "case"}, scans
    assert reads["response"][1] == "(id = assignment.response_id)", scans
    assert reads["case"][1] == "(id = assignment.case_pk)", scans
    assert all(node in {"Index Scan", "Index Only Scan"} for node, _ in reads.values()), scans

    # The premise: on these statistics the same rows as a join are answered by reading every response.
    joined = (
        select(col(Response.id), col(Response.code), col(Case.id), col(Case.case_id))
        .join(Assignment, col(Assignment.response_id) == col(Response.id))
        .join(Case, col(Case.id) == col(Response.case_pk))
        .where(col(Assignment.user_id) == annotator_id, col(Assignment.kind) == AssignmentKind.label)
        .order_by(Case.case_id, Response.code)
    )
    compiled = joined.compile(engine)
    join_scans = _plan(engine, str(compiled), compiled.params)
    assert any(table == "response" and not condition for _, table, _, condition in join_scans), join_scans
    engine.dispose()
