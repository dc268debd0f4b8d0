"""A refusal tells nothing the caller may not read (issue: integrity, second pass), tried by calling db/ directly
as a checker on SQLite and PostgreSQL: a refused adjudication, or an adjudication view read in a transaction
that then rolls back, leaves the opening in place, so the checker's own group's labels on the response stay
closed to them after they could tell the groups' labels apart; a deactivated account reads no draft."""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import review
from db.labeling.draft_store import load_draft, save_draft
from db.rules.errors import ClinConsensusError, NotFound, PermissionDenied, ValidationFailed
from db.store.engine import session_scope
from db.store.models import AdjudicationOpening, User
from tests.db.review.test_review import build_world, confirm_all, user


def _opened(engine, user_id: int, response_id: int) -> bool:
    with session_scope(engine, read_only=True) as s:
        return bool(
            s.exec(
                select(AdjudicationOpening).where(
                    AdjudicationOpening.user_id == user_id, AdjudicationOpening.response_id == response_id
                )
            ).all()
        )


def _own_labels_closed(engine, checker: User, response_id: int) -> None:
    """chk1 may no longer change their group's check of the response: refused, as the policy says."""
    with pytest.raises(PermissionDenied), session_scope(engine) as s:
        review.save_check(s, checker, response_id=response_id, criterion_id="c01", met=True, seen_lock_version=1)


@pytest.mark.parametrize("criterion, refusal", [("c01", NotFound), ("c04", ValidationFailed)])
def test_a_refused_adjudication_keeps_the_opening(engine, criterion, refusal):
    """c01 is disputed (a made-up lock version: nothing to update), c04 agreed (no disagreement): either refusal
    tells the checker something of group 2's label, so the opening it made must stay."""
    ids, _, first, _ = build_world(engine)
    confirm_all(engine, ids, first)
    checker = user(engine, ids["chk1"])
    assert not _opened(engine, ids["chk1"], first)
    with pytest.raises(refusal) as refused, session_scope(engine) as s:
        review.adjudicate(
            s, checker, response_id=first, criterion_id=criterion, met=True, rationale="依据原文", seen_lock_version=99
        )
    # the refusal names the criterion only: no label value, no other group's note
    assert "组二理由" not in str(refused.value) and "met" not in refused.value.params
    assert _opened(engine, ids["chk1"], first)
    _own_labels_closed(engine, checker, first)


def test_an_adjudication_view_read_in_a_rolled_back_transaction_keeps_the_opening(engine):
    ids, _, first, _ = build_world(engine)
    confirm_all(engine, ids, first)
    checker = user(engine, ids["chk1"])

    class Abandoned(Exception):
        pass

    with pytest.raises(Abandoned), session_scope(engine) as s:
        view = review.adjudication_view(s, checker, first)
        assert {cell.criterion_id for cell in view.cells} == {"c01", "c02"}  # both groups' labels were shown
        raise Abandoned
    assert _opened(engine, ids["chk1"], first)
    _own_labels_closed(engine, checker, first)


def test_a_checker_who_may_not_adjudicate_opens_nothing(engine):
    """Refused before anything is read (their group's check is pending): no opening is recorded either."""
    ids, _, first, _ = build_world(engine)
    checker = user(engine, ids["chk1"])
    with pytest.raises(ClinConsensusError), session_scope(engine) as s:
        review.adjudicate(s, checker, response_id=first, criterion_id="c01", met=True, rationale="x")
    assert not _opened(engine, ids["chk1"], first)


def test_a_deactivated_account_reads_no_draft_of_its_own(engine):
    ids, *_ = build_world(engine)
    annotator = user(engine, ids["ann1"])
    with session_scope(engine) as s:
        save_draft(s, annotator, "label:1", {"decisions": {"c01": True}})
    with session_scope(engine, read_only=True) as s:
        assert load_draft(s, annotator, "label:1") == {"decisions": {"c01": True}}
    with session_scope(engine) as s:
        s.get(User, ids["ann1"]).is_active = False
    # the caller's object still says active: the database decides
    assert annotator.is_active
    with pytest.raises(PermissionDenied), session_scope(engine, read_only=True) as s:
        load_draft(s, annotator, "label:1")
    with pytest.raises(PermissionDenied), session_scope(engine) as s:
        save_draft(s, annotator, "label:1", {"decisions": {}})
