"""A check save confirming every criterion writes a check label on each (DESIGN §4.1: a confirmation is a check
label even when it equals the annotation), on SQLite and PostgreSQL, through the save the check page calls."""

from __future__ import annotations

from sqlmodel import col, select

from db import labels, review
from db.access.audit import verify_chain
from db.rules.enums import Stage
from db.store.engine import session_scope
from db.store.models import AuditLog, Label, User
from tests.support.factories import make_case, make_label, make_response, make_user

N = 30


def test_a_check_save_confirming_all_30_criteria_writes_30_check_labels(engine):
    with session_scope(engine) as s:
        annotator = make_user(s, "ann1", "annotator", 1)
        checker_id = make_user(s, "chk1", "checker", 1).id
        case = make_case(s, "CC-0030", n=N)
        response = make_response(s, case, "model-a", "回答")
        response_id = response.id
        # every third criterion not met: the confirmations carry both values
        annotated = {f"c{i:02d}": i % 3 != 0 for i in range(1, N + 1)}
        for cid, met in annotated.items():
            make_label(s, response, cid, met, annotator)
    with session_scope(engine) as s:
        checker = s.get_one(User, checker_id)
        rows = review.check_view(s, checker, response_id).rows
        assert len(rows) == N
        confirmations = [review.CheckInput(row.criterion_id, row.annotation.met) for row in rows]
        written = labels.save(s, checker, "check", response_id, decisions=confirmations)
    assert written == N
    with session_scope(engine, read_only=True) as s:
        checks = s.exec(
            select(Label).where(Label.response_id == response_id, Label.stage == Stage.check, Label.group_no == 1)
        ).all()
        assert {label.criterion_id: label.met for label in checks} == annotated
        assert {(label.user_id, label.lock_version, label.note) for label in checks} == {(checker_id, 1, None)}
        entries = s.exec(select(AuditLog).where(AuditLog.entity == "check").order_by(col(AuditLog.id))).all()
        assert [entry.action for entry in entries] == ["create"] * N
        assert verify_chain(s).ok
    # the same confirmations again, with the lock versions the page now shows: nothing more is written
    with session_scope(engine) as s:
        checker = s.get_one(User, checker_id)
        rows = review.check_view(s, checker, response_id).rows
        again = [
            review.CheckInput(row.criterion_id, row.check.met, seen_lock_version=row.check.lock_version) for row in rows
        ]
        assert labels.save(s, checker, "check", response_id, decisions=again) == 0
