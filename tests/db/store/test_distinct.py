"""The distinct values of an indexed column through its index (db.store.distinct), against a plain DISTINCT; the
audit log's filters and the judge names read that way, and only an admin may read the log's filters."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select
from sqlmodel import col

from db.access import audit
from db.access.audit_search import audit_facets
from db.rules.errors import PermissionDenied
from db.store.distinct import distinct_values
from db.store.engine import session_scope
from db.store.judges import judge_names, response_models
from db.store.models import AuditLog, JudgeDecision, Response, table_of
from tests.support.factories import make_case, make_response, make_user


def test_distinct_values_equal_a_plain_distinct_in_order(engine):
    with session_scope(engine) as s:
        make_user(s, "admin", "admin")
        # Actors and entities repeated and interleaved, a name that sorts between others, Chinese included.
        for i in range(40):
            actor = ("zz-last", "anno1a", "admin", "审核员", "anno1b")[i % 5]
            entity = ("label", "case", "user", "rubric_version")[i % 4]
            audit.record(s, actor, action="update", entity=entity, entity_key=f"k{i}", after={"i": i})
    with session_scope(engine, read_only=True) as s:
        for column in (table_of(AuditLog).c.actor, table_of(AuditLog).c.entity):
            plain = list(s.execute(select(column).distinct().order_by(column)).scalars())
            assert distinct_values(s, column) == plain
            assert {"zz-last", "审核员", "anno1a"} <= set(plain) or {"label", "rubric_version"} <= set(plain)


def test_no_rows_give_no_values_and_the_audit_filters_are_for_admins(engine):
    with session_scope(engine) as s:
        admin = make_user(s, "admin", "admin")
        checker = make_user(s, "check1", "checker", group_no=1)
        assert distinct_values(s, table_of(JudgeDecision).c.judge) == []
        assert judge_names(s) == []
        audit.record(s, "admin", action="create", entity="case", entity_key="CC-1")
        audit.record(s, "anno1a", action="update", entity="label", entity_key="r1")
        plain = [
            list(s.execute(select(column).distinct().order_by(column)).scalars())
            for column in (col(AuditLog.entity), col(AuditLog.actor))
        ]
        assert audit_facets(s, admin) == tuple(plain)
        assert {"case", "label"} <= set(plain[0]) and {"admin", "anno1a"} <= set(plain[1])
        with pytest.raises(PermissionDenied):
            audit_facets(s, checker)


def test_judge_names_hop_through_many_decisions(engine):
    with session_scope(engine) as s:
        case = make_case(s, "CC-0001", n=3)
        response = make_response(s, case, "m-a", "回答")
        rows = [
            dict(judge=judge, response_id=response.id, criterion_id=f"c{c:02d}", raw_output="", parse_ok=True, met=True)
            for judge in ("judge-b", "judge-a", "gpt-judge", "judge-c")
            for c in range(1, 4)
        ]
        s.execute(insert(table_of(JudgeDecision)), rows)
    with session_scope(engine, read_only=True) as s:
        assert judge_names(s) == sorted({row["judge"] for row in rows})


def test_response_models_are_the_models_a_plain_distinct_finds(engine):
    with session_scope(engine) as s:
        assert response_models(s) == []
        # Models interleaved over cases, one that sorts between others, one of another vendor's spelling.
        for n in range(1, 6):
            case = make_case(s, f"CC-{n:04d}", n=1)
            for model in ("model-b", "model-a", "vendor/model:v2", "模型甲")[: 1 + n % 4]:
                make_response(s, case, model, "回答")
    with session_scope(engine, read_only=True) as s:
        plain = sorted(s.execute(select(table_of(Response).c.model).distinct()).scalars())
        assert response_models(s) == plain and len(plain) == 4
