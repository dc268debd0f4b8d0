"""Feedback after a round, tried as the wrong user calling db/ directly (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from sqlalchemy import func
from sqlmodel import select

from db import counts
from db.rules.enums import Stage
from db.rules.errors import NotFound, PermissionDenied
from db.store.engine import session_scope
from db.store.models import AuditLog, FeedbackRound, User
from db.work import feedback
from tests.support.factories import make_label
from tests.support.feedback_world import RATIONALE, world


def rounds(engine, ids):
    with session_scope(engine, read_only=True) as s:
        return feedback.round_states(s, actor=s.get(User, ids["admin"]))


def audit_count(engine) -> int:
    with session_scope(engine, read_only=True) as s:
        return s.exec(select(func.count()).select_from(AuditLog)).one()


def test_rounds_are_assignment_runs_with_their_labeling_state(engine):
    ids = world(engine)
    first, second = rounds(engine, ids)
    assert (first.number, second.number) == (1, 2)
    assert first.round_at < second.round_at
    assert (first.assignments, first.done, first.responses, first.annotators) == (2, 2, 1, 2)
    assert (second.assignments, second.done) == (2, 1)  # ann1 finished B, ann2 labeled 1 of 3
    assert first.finished and not second.finished
    assert second.done_share == 0.5
    assert first.assigned_by == "admin"
    assert not first.is_open and not second.is_open


def test_feedback_is_off_until_an_admin_opens_the_round(engine):
    ids = world(engine)
    with session_scope(engine, read_only=True) as s:
        before = feedback.my_feedback(s, s.get(User, ids["ann1"]))
        assert feedback.open_round_count(s, s.get(User, ids["ann1"])) == 0
    assert (before.open_rounds, before.compared, before.differing, before.responses) == (0, 0, 0, [])


def test_opening_an_unfinished_round_is_refused_and_changes_nothing(engine):
    ids = world(engine)
    second = rounds(engine, ids)[1]
    entries = audit_count(engine)
    with session_scope(engine) as s, pytest.raises(feedback.RoundUnfinished, match="not finished") as refused:
        feedback.set_feedback_open(s, actor=s.get(User, ids["admin"]), round_at=second.round_at, is_open=True)
    assert (refused.value.done, refused.value.total) == (1, 2)
    assert (refused.value.key, refused.value.params) == ("errors.feedback_round_unfinished", {"done": 1, "total": 2})
    assert audit_count(engine) == entries
    with session_scope(engine, read_only=True) as s:
        assert s.exec(select(FeedbackRound)).all() == []
        assert feedback.my_feedback(s, s.get(User, ids["ann1"])).responses == []
    assert not rounds(engine, ids)[1].is_open


def test_an_unknown_round_is_not_found(engine):
    ids = world(engine)
    first = rounds(engine, ids)[0]
    from datetime import timedelta

    with session_scope(engine) as s, pytest.raises(NotFound):
        feedback.set_feedback_open(
            s, actor=s.get(User, ids["admin"]), round_at=first.round_at - timedelta(days=1), is_open=True
        )


def open_first(engine, ids):
    first = rounds(engine, ids)[0]
    with session_scope(engine) as s:
        return feedback.set_feedback_open(s, actor=s.get(User, ids["admin"]), round_at=first.round_at, is_open=True)


def test_an_opened_round_shows_the_annotator_where_gold_differed(engine):
    ids = world(engine)
    entries = audit_count(engine)
    state = open_first(engine, ids)
    assert state.is_open and state.changed_by == "admin"
    assert audit_count(engine) == entries + 1
    with session_scope(engine, read_only=True) as s:
        entry = s.exec(select(AuditLog).order_by(AuditLog.id.desc())).first()
        assert (entry.actor, entry.action, entry.entity) == ("admin", "open", "feedback")
        assert entry.before == {"open": False} and entry.after["open"] is True
        view = feedback.my_feedback(s, s.get(User, ids["ann1"]))
        assert feedback.open_round_count(s, s.get(User, ids["ann1"])) == 1
    # ann1 on A: (T, F, T) against gold (F, T, T): c01 and c02 differ; B is in a closed round.
    assert (view.open_rounds, view.compared, view.differing, view.awaiting_gold) == (1, 3, 2, 0)
    assert view.agreement == pytest.approx(1 / 3)
    (response,) = view.responses
    assert response.case.case_id == "CC-0001" and response.text == "回答甲"
    c01, c02 = response.decisions
    assert (c01.criterion_id, c01.my_met, c01.gold_met, c01.gold_source, c01.rationale) == (
        "c01",
        True,
        False,
        "adjudicated",
        RATIONALE,
    )
    assert c01.criterion_text == "CC-0001 的第 1 条评分标准"
    assert (c02.criterion_id, c02.my_met, c02.gold_met, c02.gold_source, c02.rationale) == (
        "c02",
        False,
        True,
        "agreement",
        None,
    )
    assert "model-secret" not in repr(view)


def test_the_other_group_sees_only_its_own_labels(engine):
    ids = world(engine)
    open_first(engine, ids)
    with session_scope(engine, read_only=True) as s:
        ann2 = feedback.my_feedback(s, s.get(User, ids["ann2"]))
        ann1b = feedback.my_feedback(s, s.get(User, ids["ann1b"]))
    # ann2 on A: (F, T, T), the same as gold everywhere: nothing to show, and nothing of ann1's.
    assert (ann2.open_rounds, ann2.compared, ann2.differing, ann2.responses) == (1, 3, 0, [])
    # ann1b is in group 1 but made no label: their group's round is open, yet they see nobody else's labels.
    assert (ann1b.open_rounds, ann1b.compared, ann1b.differing, ann1b.responses) == (1, 0, 0, [])


def test_checkers_and_annotators_may_not_read_rounds_or_open_them_and_checkers_have_no_feedback(engine):
    ids = world(engine)
    first = rounds(engine, ids)[0]
    entries = audit_count(engine)
    for name in ("chk1", "chk2", "ann1"):
        with session_scope(engine) as s:
            user = s.get(User, ids[name])
            with pytest.raises(PermissionDenied):
                feedback.set_feedback_open(s, actor=user, round_at=first.round_at, is_open=True)
            with pytest.raises(PermissionDenied):
                feedback.round_states(s, actor=user)
    for name in ("chk1", "chk2", "admin"):
        with session_scope(engine, read_only=True) as s:
            with pytest.raises(PermissionDenied):
                feedback.my_feedback(s, s.get(User, ids[name]))
            with pytest.raises(PermissionDenied):
                feedback.open_round_count(s, s.get(User, ids[name]))
    assert audit_count(engine) == entries
    assert not rounds(engine, ids)[0].is_open


def test_an_inactive_annotator_sees_nothing(engine):
    ids = world(engine)
    open_first(engine, ids)
    with session_scope(engine) as s:
        s.get(User, ids["ann1"]).is_active = False
    with session_scope(engine, read_only=True) as s, pytest.raises(PermissionDenied):
        feedback.my_feedback(s, s.get(User, ids["ann1"]))


def test_closing_hides_the_feedback_again_and_is_logged(engine):
    ids = world(engine)
    first = open_first(engine, ids)
    with session_scope(engine) as s:
        admin = s.get(User, ids["admin"])
        again = feedback.set_feedback_open(s, actor=admin, round_at=first.round_at, is_open=True)
    assert again.is_open
    entries = audit_count(engine)  # opening an open round wrote nothing
    with session_scope(engine) as s:
        closed = feedback.set_feedback_open(s, actor=s.get(User, ids["admin"]), round_at=first.round_at, is_open=False)
    assert not closed.is_open
    assert audit_count(engine) == entries + 1
    with session_scope(engine, read_only=True) as s:
        entry = s.exec(select(AuditLog).order_by(AuditLog.id.desc())).first()
        assert (entry.action, entry.entity, entry.before, entry.after["open"]) == (
            "close",
            "feedback",
            {"open": True},
            False,
        )
        view = feedback.my_feedback(s, s.get(User, ids["ann1"]))
    assert (view.open_rounds, view.responses) == (0, [])


def test_labels_on_an_older_rubric_version_do_not_count(engine):
    """After the round opened, CC-0001 got a new approved rubric: ann1's labels, made on version 1, no longer count."""
    from db.store.models import Case, Label, Response, RubricVersion
    from tests.support.factories import make_rubric

    ids = world(engine)
    open_first(engine, ids)
    with session_scope(engine) as s:
        case = s.exec(select(Case).where(Case.case_id == "CC-0001")).one()
        first = s.exec(select(RubricVersion).where(RubricVersion.case_pk == case.id)).one()
        for label in s.exec(select(Label).where(Label.user_id == ids["ann1"])).all():
            label.rubric_version_id = first.id
            s.add(label)
        newer = make_rubric(s, case, n=3, version=2)
        # Everyone else's labels on CC-0001 were made again on version 2 (a label counts on its own version only).
        for label in s.exec(select(Label).where(Label.user_id != ids["ann1"])).all():
            if s.get(Response, label.response_id).case_pk == case.id:
                label.rubric_version_id = newer.id
                s.add(label)
        counts.refresh(s, {label.response_id for label in s.exec(select(Label)).all()})  # as every writer of labels
    with session_scope(engine, read_only=True) as s:
        ann1 = feedback.my_feedback(s, s.get(User, ids["ann1"]))
        ann2 = feedback.my_feedback(s, s.get(User, ids["ann2"]))
    assert (ann1.open_rounds, ann1.compared, ann1.differing, ann1.awaiting_gold, ann1.responses) == (1, 0, 0, 0, [])
    # Without ann1's labels gold is c01 not met (adjudicated), c02 met (check and group 2), c03 met (group 2 only).
    assert (ann2.compared, ann2.differing, ann2.awaiting_gold) == (3, 0, 0)


def test_a_response_is_compared_only_once_its_gold_is_final(engine):
    """Without group 2's check, A has gold on every decision but is provisional: ann1's labels wait, the
    kept figures and the listing agree on it; group 2's check makes A final and the comparison appears."""
    from db.store.models import Label, Response

    ids = world(engine)
    open_first(engine, ids)
    with session_scope(engine) as s:
        for label in s.exec(select(Label).where(Label.user_id == ids["chk2"], Label.stage == "check")).all():
            s.delete(label)
        s.flush()
        counts.refresh(s, [ids["A"]])  # as every writer of labels
    with session_scope(engine, read_only=True) as s:
        waiting = feedback.my_feedback(s, s.get(User, ids["ann1"]))
    assert (waiting.compared, waiting.differing, waiting.awaiting_gold, waiting.responses) == (0, 0, 3, [])
    assert (waiting.provisional_responses, waiting.open_responses, waiting.agreement) == (1, 0, None)
    with session_scope(engine) as s:
        chk2, a = s.get(User, ids["chk2"]), s.get(Response, ids["A"])
        for cid, met in (("c01", False), ("c02", True), ("c03", True)):
            make_label(s, a, cid, met, chk2, stage=Stage.check, group_no=2)
    with session_scope(engine, read_only=True) as s:
        final = feedback.my_feedback(s, s.get(User, ids["ann1"]))
    assert (final.compared, final.differing, final.awaiting_gold, final.total_responses) == (3, 2, 0, 1)
    assert (final.provisional_responses, final.open_responses) == (0, 0)
    assert [d.criterion_id for d in final.responses[0].decisions] == ["c01", "c02"]
