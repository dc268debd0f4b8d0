"""Sending flagged criteria back to the rubric's author (db/review/criterion_return.py), on SQLite and PostgreSQL:
the new returned version, the author's revision and the checker's approval, relabel flags, audit, wrong users."""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import review, rubrics
from db.access.audit import verify_chain
from db.review.criterion_return import send_back_criteria, send_back_target
from db.rules.enums import RubricStatus
from db.rules.errors import NotFound, PermissionDenied, StaleEdit, ValidationFailed
from db.store.engine import session_scope
from db.store.models import Assignment, AuditLog, Criterion, Label, RubricVersion, User
from tests.support.factories import make_case, make_label, make_response, make_user

N = 4


def world(engine):
    with session_scope(engine) as s:
        people = {
            "admin": make_user(s, "admin", "admin"),
            "author": make_user(s, "author", "annotator", 1),
            "ann2": make_user(s, "ann2", "annotator", 2),
            "chk": make_user(s, "chk", "checker", 2),
        }
        case = make_case(s, "CC-0001", n=N)  # imported: the approved rubric has no author
        response = make_response(s, case, "model-a", "回答")
        version_id = review.current_rubric_version_id(s, case.id)
        for i in range(1, N + 1):
            label = make_label(s, response, f"c{i:02d}", True, people["ann2"])
            label.rubric_version_id = version_id
            s.add(label)
        return {name: user.id for name, user in people.items()}, case.id, version_id


def user(engine, user_id) -> User:
    with session_scope(engine, read_only=True) as s:
        return s.get(User, user_id)


def test_send_back_creates_a_returned_version_the_author_revises(engine):
    ids, case_pk, version_id = world(engine)
    admin = user(engine, ids["admin"])
    with session_scope(engine) as s:
        target = send_back_target(s, admin, "CC-0001")
        assert (target.rubric_version_id, target.version, target.author, target.open_revision) == (
            version_id,
            1,
            None,
            None,
        )
        with pytest.raises(ValidationFailed, match="no author"):
            send_back_criteria(s, admin, "CC-0001", {"c02": "两组理解不一致"}, seen_version_id=version_id)
    with session_scope(engine) as s:
        result = send_back_criteria(
            s,
            admin,
            "CC-0001",
            {"c02": "两组理解不一致（κ = 0.10）", "c03": "  ", "c04": "所有模型都满足，无区分度"},
            seen_version_id=version_id,
            comment="请改写被标记的评分标准",
            author="author",
        )
    assert (result.version, result.author, result.criteria) == (2, "author", ["c02", "c04"])
    with session_scope(engine, read_only=True) as s:
        returned = s.get(RubricVersion, result.rubric_version_id)
        assert returned.status == RubricStatus.returned and returned.reviewer_id == ids["admin"]
        assert returned.review_comment == "请改写被标记的评分标准" and returned.author_id == ids["author"]
        criteria = s.exec(select(Criterion).where(Criterion.rubric_version_id == returned.id)).all()
        assert {c.criterion_id: c.review_comment for c in criteria} == {
            "c01": None,
            "c02": "两组理解不一致（κ = 0.10）",
            "c03": None,
            "c04": "所有模型都满足，无区分度",
        }
        # the approved version stays current: labeling goes on against it, nothing needs relabeling yet
        assert review.current_rubric_version_id(s, case_pk) == version_id
        assert review.labels_needing_relabel(s) == []
        assert s.exec(select(Assignment).where(Assignment.user_id == ids["author"])).one().case_pk == case_pk
        entries = s.exec(select(AuditLog).order_by(AuditLog.id)).all()
        assert [(e.action, e.entity, e.entity_key) for e in entries[-2:]] == [
            ("assign", "assignment", "rubric:CC-0001"),
            ("return", "rubric", "CC-0001 v2"),
        ]
        assert entries[-1].after["criterion_comments"]["c02"].startswith("两组") and entries[-1].actor == "admin"
        assert verify_chain(s).ok

    # The author sees the comments and revises; a checker approves; the old labels need relabeling.
    author = user(engine, ids["author"])
    with session_scope(engine) as s:
        view = rubrics.authoring_view(s, author, case_pk)
        assert view.returned is not None and view.returned.review_comment == "请改写被标记的评分标准"
        assert {c.criterion_id: c.review_comment for c in view.returned.criteria}["c02"].startswith("两组")
        inputs = [
            rubrics.CriterionInput(c.criterion_id, c.text + ("（已改写）" if c.criterion_id == "c02" else ""), c.tags)
            for c in view.latest.criteria
        ]
        draft = rubrics.save_rubric_draft(
            s,
            author,
            case_pk,
            inputs,
            base_version_id=view.latest.id,
            expected_lock=view.latest.lock_version,
            expected_size=N,
        )
        rubrics.submit_rubric(s, author, draft.id, expected_lock=draft.lock_version, expected_size=N)
    checker = user(engine, ids["chk"])
    with session_scope(engine) as s:
        audit = review.rubric_for_review(s, checker, draft.id)
        assert audit.earlier_criterion_comments["c02"].startswith("两组")  # the checker sees why it came back
        review.approve_rubric(s, checker, draft.id, seen_lock_version=audit.lock_version)
    with session_scope(engine, read_only=True) as s:
        assert review.current_rubric_version_id(s, case_pk) == draft.id
        stale = review.labels_needing_relabel(s)
        assert {item.criterion_id for item in stale} >= {"c02"} and {item.labeled_version_id for item in stale} == {
            version_id
        }
        assert verify_chain(s).ok


def test_send_back_refusals(engine):
    ids, case_pk, version_id = world(engine)
    admin = user(engine, ids["admin"])
    with session_scope(engine) as s:
        with pytest.raises(ValidationFailed, match="c99"):
            send_back_criteria(s, admin, "CC-0001", {"c99": "x"}, seen_version_id=version_id, author="author")
        with pytest.raises(ValidationFailed, match="at least one criterion"):
            send_back_criteria(s, admin, "CC-0001", {"c01": " "}, seen_version_id=version_id, author="author")
        with pytest.raises(StaleEdit):
            send_back_criteria(s, admin, "CC-0001", {"c01": "x"}, seen_version_id=version_id + 999, author="author")
        with pytest.raises(ValidationFailed, match="not an active annotator"):
            send_back_criteria(s, admin, "CC-0001", {"c01": "x"}, seen_version_id=version_id, author="chk")
        with pytest.raises(NotFound):
            send_back_criteria(s, admin, "CC-9999", {"c01": "x"}, seen_version_id=version_id, author="author")
    with session_scope(engine) as s:
        send_back_criteria(s, admin, "CC-0001", {"c01": "含义不清"}, seen_version_id=version_id, author="author")
    with session_scope(engine) as s:
        assert send_back_target(s, admin, "CC-0001").open_revision == RubricStatus.returned
        with pytest.raises(ValidationFailed, match="already returned"):
            send_back_criteria(s, admin, "CC-0001", {"c01": "再说一次"}, seen_version_id=version_id, author="author")
    with session_scope(engine, read_only=True) as s:
        assert len(s.exec(select(RubricVersion)).all()) == 2
        assert len(s.exec(select(Label)).all()) == N


@pytest.mark.parametrize("who", ["author", "ann2", "chk"])
def test_only_admins_send_criteria_back(engine, who):
    ids, _, version_id = world(engine)
    wrong = user(engine, ids[who])
    with session_scope(engine) as s:
        with pytest.raises(PermissionDenied):
            send_back_target(s, wrong, "CC-0001")
        with pytest.raises(PermissionDenied):
            send_back_criteria(s, wrong, "CC-0001", {"c01": "x"}, seen_version_id=version_id, author="author")
    with session_scope(engine, read_only=True) as s:
        assert len(s.exec(select(RubricVersion)).all()) == 1
        assert s.exec(select(AuditLog).where(AuditLog.action == "return")).all() == []
