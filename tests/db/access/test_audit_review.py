"""The audit log after checker work: each change recorded, and a tampered row is named by `audit verify`."""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import select

from cli.main import main
from db import review
from db.rules.enums import RubricStatus
from db.store.engine import get_engine, session_scope
from db.store.models import AuditLog, User
from tests.support.factories import log_factory_rows, make_case, make_label, make_response, make_rubric, make_user


def checker_work(engine) -> None:
    with session_scope(engine) as s:
        author = make_user(s, "author", "annotator", 1)
        a2 = make_user(s, "ann2", "annotator", 2)
        checker = make_user(s, "chk", "checker", 1)
        checker2 = make_user(s, "chk2", "checker", 2)
        adjudicator = make_user(s, "adj", "checker", 2)
        case = make_case(s, "CC-A", n=3)
        rubric = make_rubric(s, make_case(s, "CC-B", n=0), n=3, status=RubricStatus.submitted, author=author)
        response = make_response(s, case)
        for cid in ("c01", "c02"):
            make_label(s, response, cid, True, author)
            make_label(s, response, cid, False, a2)
            # group 2's check is done before anyone adjudicates (its checker is not the adjudicator)
            make_label(s, response, cid, False, checker2, stage="check")
        log_factory_rows(s)
        ids = checker.id, adjudicator.id, rubric.id, response.id
    checker_id, adjudicator_id, rubric_id, response_id = ids
    with session_scope(engine) as s:
        checker, adjudicator = s.get(User, checker_id), s.get(User, adjudicator_id)
        review.approve_rubric(s, checker, rubric_id, seen_lock_version=1)
        review.save_check(s, checker, response_id=response_id, criterion_id="c01", met=True, note="确认")
        review.save_check(s, checker, response_id=response_id, criterion_id="c02", met=True)
        review.adjudicate(s, adjudicator, response_id=response_id, criterion_id="c02", met=False, rationale="未提及")


def run_verify(monkeypatch, url, capsys) -> tuple[int, str]:
    monkeypatch.setenv("DATABASE_URL", url)
    get_engine.cache_clear()
    try:
        code = main(["audit", "verify"])
    except SystemExit as exit_:
        code = exit_.code
    finally:
        get_engine.cache_clear()
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_every_checker_change_is_recorded_with_before_and_after(engine):
    checker_work(engine)
    with session_scope(engine, read_only=True) as s:
        entries = s.exec(
            select(AuditLog).where(AuditLog.entity.in_(["rubric", "check", "adjudication"])).order_by(AuditLog.id)
        ).all()
    assert [(e.entity, e.action, e.actor) for e in entries] == [
        ("rubric", "approve", "chk"),
        ("check", "create", "chk"),
        ("check", "create", "chk"),
        ("adjudication", "create", "adj"),
    ]
    assert entries[0].before["status"] == "submitted" and entries[0].after["status"] == "approved"
    assert entries[0].entity_key == "CC-B v1"
    assert entries[3].entity_key == "CC-A/model-a/c02/adjudication/0"
    assert entries[3].after == {
        "met": False,
        "note": "未提及",
        "user": "adj",
        "lock_version": 1,
        "rubric_version_id": entries[3].after["rubric_version_id"],
    }


def test_audit_verify_names_the_tampered_row(engine, database_url, monkeypatch, capsys):
    checker_work(engine)
    code, output = run_verify(monkeypatch, database_url, capsys)
    assert code == 0 and "verified" in output
    with session_scope(engine, read_only=True) as s:
        target = s.exec(select(AuditLog).where(AuditLog.entity == "check")).first()
    # Someone with database access quietly rewrites the check's outcome.
    with engine.begin() as connection:
        connection.execute(
            sa.text("UPDATE audit_log SET actor = :actor WHERE id = :id"), {"actor": "someone-else", "id": target.id}
        )
    code, output = run_verify(monkeypatch, database_url, capsys)
    assert code != 0
    assert f"entry {target.id}" in output


def test_audit_verify_names_a_deleted_link(engine, database_url, monkeypatch, capsys):
    checker_work(engine)
    with session_scope(engine, read_only=True) as s:
        ids = [e.id for e in s.exec(select(AuditLog).order_by(AuditLog.id)).all()]
    removed = ids[len(ids) // 2]
    with engine.begin() as connection:
        connection.execute(sa.text("DELETE FROM audit_log WHERE id = :id"), {"id": removed})
    code, output = run_verify(monkeypatch, database_url, capsys)
    assert code != 0
    assert f"entry {ids[ids.index(removed) + 1]}" in output
