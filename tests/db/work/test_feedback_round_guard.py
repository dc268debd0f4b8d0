"""Opening a round's feedback while another round still labels responses of the same case is refused."""

from __future__ import annotations

import pytest
from sqlalchemy import func
from sqlmodel import select

from db.store.engine import session_scope
from db.store.models import AuditLog, Case, FeedbackRound, Response, User
from db.work import feedback
from db.work.assignments import assign_labeling
from tests.support.factories import make_label, make_response
from tests.support.feedback_world import world


def states(engine, ids):
    with session_scope(engine, read_only=True) as s:
        return feedback.round_states(s, actor=s.get(User, ids["admin"]))


def audit_count(engine) -> int:
    with session_scope(engine, read_only=True) as s:
        return s.exec(select(func.count()).select_from(AuditLog)).one()


def split_case(engine, ids) -> int:
    """A third round: a new response C of CC-0001 (round 1's case), labeled by ann1 only so far."""
    with session_scope(engine) as s:
        case = s.exec(select(Case).where(Case.case_id == "CC-0001")).one()
        ids["C"] = make_response(s, case, "model-secret-c", "回答丙").id
    with session_scope(engine) as s:
        assign_labeling(s, actor=s.get(User, ids["admin"]), annotators=["ann1", "ann2"], response_ids=[ids["C"]])
    with session_scope(engine) as s:
        c, ann1 = s.get(Response, ids["C"]), s.get(User, ids["ann1"])
        for cid in ("c01", "c02", "c03"):
            make_label(s, c, cid, True, ann1)
    return ids["C"]


def test_a_finished_round_sharing_a_case_with_an_unfinished_round_is_refused(engine):
    ids = world(engine)
    split_case(engine, ids)
    first, second, third = states(engine, ids)
    assert first.finished and not third.finished
    entries = audit_count(engine)
    with session_scope(engine) as s, pytest.raises(feedback.RoundSharesCase, match="still label") as refused:
        feedback.set_feedback_open(s, actor=s.get(User, ids["admin"]), round_at=first.round_at, is_open=True)
    assert (refused.value.key, refused.value.params) == ("errors.feedback_round_shares_case", {"cases": 1, "rounds": 1})
    assert audit_count(engine) == entries
    with session_scope(engine, read_only=True) as s:
        assert s.exec(select(FeedbackRound)).all() == []
        assert feedback.my_feedback(s, s.get(User, ids["ann1"])).open_rounds == 0
    assert not any(state.is_open for state in states(engine, ids))


def test_the_round_opens_once_the_other_round_sharing_its_case_finished(engine):
    ids = world(engine)
    split_case(engine, ids)
    with session_scope(engine) as s:
        c, ann2 = s.get(Response, ids["C"]), s.get(User, ids["ann2"])
        for cid in ("c01", "c02", "c03"):
            make_label(s, c, cid, True, ann2)
    first, _, third = states(engine, ids)
    assert third.finished
    with session_scope(engine) as s:
        state = feedback.set_feedback_open(s, actor=s.get(User, ids["admin"]), round_at=first.round_at, is_open=True)
    assert state.is_open


def test_an_unfinished_round_on_another_case_does_not_hold_a_round_back(engine):
    ids = world(engine)  # round 2 (CC-0002) is unfinished and shares no case with round 1
    first, second = states(engine, ids)
    assert not second.finished
    with session_scope(engine) as s:
        assert feedback.set_feedback_open(
            s, actor=s.get(User, ids["admin"]), round_at=first.round_at, is_open=True
        ).is_open
