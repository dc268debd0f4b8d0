"""Checker drafts (db/review/drafts.py): kept and restored for their owner only, refused to the wrong user,
never restored over a label someone saved since; bad input changes nothing. Both databases."""

from __future__ import annotations

import pytest
from sqlmodel import func, select

from db import review
from db.review import drafts
from db.rules.enums import Stage
from db.rules.errors import NotFound, PermissionDenied, ValidationFailed
from db.store.models import Draft
from tests.support.factories import make_case, make_label, make_response, make_user


@pytest.fixture
def world(session):
    """R1: annotated by both groups, not checked yet. R2: both groups annotated and checked, disputed on c01."""
    ann1, ann2 = make_user(session, "ann-1", group_no=1), make_user(session, "ann-2", group_no=2)
    chk1 = make_user(session, "chk-1", role="checker", group_no=1)
    chk1b = make_user(session, "chk-1b", role="checker", group_no=1)
    chk2 = make_user(session, "chk-2", role="checker", group_no=2)
    case = make_case(session, "CC-0001", n=3)
    r1 = make_response(session, case, "model-a")
    r2 = make_response(session, case, "model-b")
    for i in range(1, 4):
        cid = f"c{i:02d}"
        make_label(session, r1, cid, True, ann1)
        make_label(session, r1, cid, i != 2, ann2)
        make_label(session, r2, cid, True, ann1)
        make_label(session, r2, cid, i != 1, ann2)
        make_label(session, r2, cid, True, chk1, stage=Stage.check)
        make_label(session, r2, cid, i != 1, chk2, stage=Stage.check)
    session.commit()
    return {"ann1": ann1, "chk1": chk1, "chk1b": chk1b, "chk2": chk2, "r1": r1.id, "r2": r2.id}


def _drafts(session) -> int:
    return session.exec(select(func.count()).select_from(Draft)).one()


def _seen(view: review.CheckView) -> dict:
    return {row.criterion_id: row.check.lock_version if row.check else None for row in view.rows}


def test_a_check_draft_comes_back_to_its_owner_only(session, world):
    chk1, chk1b = world["chk1"], world["chk1b"]
    view = review.check_view(session, chk1, world["r1"])
    drafts.keep_check_draft(
        session,
        chk1,
        world["r1"],
        decisions={"c01": False, "c02": True, "c03": None},
        notes={"c01": "回答未提及"},
        seen=_seen(view),
    )
    session.commit()
    restored = drafts.check_draft(session, chk1, review.check_view(session, chk1, world["r1"]))
    assert restored is not None
    assert restored.decisions == {"c01": False, "c02": True, "c03": None}
    assert restored.notes == {"c01": "回答未提及"} and restored.dropped == 0 and restored.at is not None
    assert restored.differs_from({"c01": True, "c02": True, "c03": True}, {})
    # Another checker of the same group reads only their own (none): my decisions do not reach them.
    assert drafts.check_draft(session, chk1b, review.check_view(session, chk1b, world["r1"])) is None
    drafts.keep_check_draft(session, chk1b, world["r1"], decisions={"c01": True}, seen={"c01": None})
    session.commit()
    mine = drafts.check_draft(session, chk1, review.check_view(session, chk1, world["r1"]))
    assert mine is not None and mine.decisions["c01"] is False
    # A checker of the other group cannot read group 1's check drafts through a view of their own group.
    view2 = review.check_view(session, world["chk2"], world["r1"])
    other = drafts.check_draft(session, world["chk2"], view2)
    assert other is None
    # ... nor through a group-1 view handed to them.
    assert drafts.check_draft(session, world["chk2"], view) is None
    # Discarded after the save: gone.
    assert drafts.discard_check_draft(session, chk1, world["r1"]) is True
    session.commit()
    assert drafts.check_draft(session, chk1, review.check_view(session, chk1, world["r1"])) is None


def test_an_annotator_cannot_write_checker_drafts(session, world):
    before = _drafts(session)
    with pytest.raises(PermissionDenied):
        drafts.keep_check_draft(session, world["ann1"], world["r1"], decisions={"c01": True}, seen={})
    with pytest.raises(PermissionDenied):
        drafts.keep_adjudication_draft(session, world["ann1"], world["r2"], decisions={"c01": True}, seen={})
    with pytest.raises(PermissionDenied):
        drafts.discard_check_draft(session, world["ann1"], world["r1"])
    session.rollback()
    assert _drafts(session) == before


def test_check_drafts_follow_the_check_rules(session, world):
    before = _drafts(session)
    # a response the checker's group never labelled
    lone = make_response(session, make_case(session, "CC-0002", n=3), "model-a")
    make_label(session, lone, "c01", True, make_user(session, "ann-3", group_no=2))
    session.commit()
    with pytest.raises(NotFound):
        drafts.keep_check_draft(session, world["chk1"], lone.id, decisions={"c01": True}, seen={})
    # bad input: unknown criterion, a decision that is not met / not met / undecided, a bad revision
    for decisions, seen in (({"c99": True}, {}), ({"c01": "yes"}, {}), ({"c01": True}, {"c01": "3"})):
        with pytest.raises(ValidationFailed):
            drafts.keep_check_draft(session, world["chk1"], world["r1"], decisions=decisions, seen=seen)
    session.rollback()
    assert _drafts(session) == before
    # once the checker opened the adjudication of a response, their group's labels on it are closed
    review.adjudication_view(session, world["chk1b"], world["r2"])
    session.commit()
    with pytest.raises(PermissionDenied):
        drafts.keep_check_draft(session, world["chk1b"], world["r2"], decisions={"c01": True}, seen={})


def test_a_cell_saved_by_someone_else_since_is_not_restored(session, world):
    chk1, chk1b = world["chk1"], world["chk1b"]
    view = review.check_view(session, chk1, world["r1"])
    drafts.keep_check_draft(
        session, chk1, world["r1"], decisions={"c01": True, "c02": False, "c03": True}, seen=_seen(view)
    )
    session.commit()
    # chk-1b checks c02 (confirms met) meanwhile
    review.save_checks(session, chk1b, response_id=world["r1"], decisions=[review.CheckInput("c02", True)])
    session.commit()
    restored = drafts.check_draft(session, chk1, review.check_view(session, chk1, world["r1"]))
    assert restored is not None and restored.dropped == 1
    assert restored.decisions == {"c01": True, "c03": True}  # c02 shows chk-1b's newer check instead


def test_an_adjudication_draft_needs_the_opened_adjudication_and_keeps_rationales(session, world):
    chk1b = world["chk1b"]
    with pytest.raises(PermissionDenied):  # not opened yet: nothing to decide
        drafts.keep_adjudication_draft(session, chk1b, world["r2"], decisions={"c01": False}, seen={"c01": None})
    session.rollback()
    view = review.adjudication_view(session, chk1b, world["r2"])
    session.commit()
    assert [cell.criterion_id for cell in view.cells] == ["c01"]
    drafts.keep_adjudication_draft(
        session,
        chk1b,
        world["r2"],
        decisions={"c01": False},
        notes={"c01": "以原文为准"},
        shared_note="共同理由",
        seen={"c01": None},
    )
    session.commit()
    restored = drafts.adjudication_draft(session, chk1b, review.adjudication_view(session, chk1b, world["r2"]))
    assert restored is not None
    assert (restored.decisions, restored.notes, restored.shared_note) == (
        {"c01": False},
        {"c01": "以原文为准"},
        "共同理由",
    )
    # a group-2 checker whose group's check is done and who opened it reads only their own draft (none)
    view2 = review.adjudication_view(session, world["chk2"], world["r2"])
    session.commit()
    assert drafts.adjudication_draft(session, world["chk2"], view2) is None
    with pytest.raises(PermissionDenied):
        drafts.adjudication_draft(session, world["ann1"], view)
