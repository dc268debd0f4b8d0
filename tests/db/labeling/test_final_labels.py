"""Feedback freezes the round: once an admin opens a round's feedback, its annotation labels are final.

Tried by calling db/ directly, as the annotators of both groups, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import labeling, labels as label_room, review
from db.access.policies import LabelsFinal
from db.labeling import drafts as label_drafts, freeze as feedback_freeze
from db.rules.enums import Stage
from db.store.engine import session_scope
from db.store.models import Draft, Label, User
from db.work import feedback
from db.work.assignments import assign_labeling
from tests.support.factories import make_case, make_response, make_user
from tests.support.page_save import as_sent

N = 3
IDS = [f"c{i:02d}" for i in range(1, N + 1)]


def _save(engine, user_id: int, response_id: int, decisions: dict[str, bool]) -> labeling.SaveOutcome:
    with session_scope(engine) as s:
        user = s.get(User, user_id)
        bench = label_drafts.open_response(s, user, response_id)
        return label_drafts.save(
            s,
            user,
            response_id,
            rubric_version_id=bench.view.rubric_version_id,
            decisions=decisions,
            expected_versions=bench.view.expected_versions,
        )


def _labels(engine, response_id: int, group_no: int, stage: str = Stage.annotation) -> dict[str, bool]:
    with session_scope(engine, read_only=True) as s:
        rows = s.exec(
            select(Label).where(Label.response_id == response_id, Label.group_no == group_no, Label.stage == stage)
        ).all()
        return {label.criterion_id: label.met for label in rows}


@pytest.fixture
def world(engine):
    """Round 1 hands response A to ann1 (group 1) and ann2 (group 2); round 2 hands B to the same two.

    Both groups label A completely (round 1 finished); B is labeled by group 1 only.
    """
    with session_scope(engine) as s:
        people = {
            "admin": make_user(s, "admin", "admin"),
            "ann1": make_user(s, "ann1", "annotator", 1),
            "ann2": make_user(s, "ann2", "annotator", 2),
            "chk1": make_user(s, "chk1", "checker", 1),
        }
        a = make_response(s, make_case(s, "CC-0001", n=N), "model-a", "回答甲")
        b = make_response(s, make_case(s, "CC-0002", n=N), "model-b", "回答乙")
        ids = {name: int(user.id) for name, user in people.items()} | {"A": int(a.id), "B": int(b.id)}
    for response in ("A", "B"):
        with session_scope(engine) as s:
            assign_labeling(
                s, actor=s.get(User, ids["admin"]), annotators=["ann1", "ann2"], response_ids=[ids[response]]
            )
    _save(engine, ids["ann1"], ids["A"], {"c01": True, "c02": False, "c03": True})
    _save(engine, ids["ann2"], ids["A"], {"c01": False, "c02": False, "c03": True})
    _save(engine, ids["ann1"], ids["B"], {"c01": True, "c02": True, "c03": True})
    return ids


def _round_of_a(engine, ids):
    with session_scope(engine, read_only=True) as s:
        return feedback.round_states(s, actor=s.get(User, ids["admin"]))[0]


def _set_open(engine, ids, is_open: bool) -> None:
    with session_scope(engine) as s:
        feedback.set_feedback_open(
            s, actor=s.get(User, ids["admin"]), round_at=_round_of_a(engine, ids).round_at, is_open=is_open
        )


def _keep(engine, user_id: int, response_id: int, decisions: dict[str, bool | None]) -> None:
    with session_scope(engine) as s:
        user = s.get(User, user_id)
        view = labeling.response_for_labeling(s, user, response_id)
        label_drafts.keep_draft(
            s,
            user,
            response_id,
            rubric_version_id=view.rubric_version_id,
            decisions=decisions,
            expected_versions=view.expected_versions,
        )


def test_before_the_feedback_opens_an_annotator_may_still_change_their_labels(engine, world):
    outcome = _save(engine, world["ann1"], world["A"], {"c01": False, "c02": False, "c03": True})
    assert (outcome.created, outcome.updated) == (0, 1)
    assert _labels(engine, world["A"], 1) == {"c01": False, "c02": False, "c03": True}
    with session_scope(engine, read_only=True) as s:
        assert not feedback_freeze.labels_final(s, world["A"], 1)
        assert not labeling.response_for_labeling(s, s.get(User, world["ann1"]), world["A"]).final


def test_once_the_feedback_opened_the_save_is_refused_for_both_groups_and_nothing_changes(engine, world):
    before = {g: _labels(engine, world["A"], g) for g in (1, 2)}
    _set_open(engine, world, True)
    for name, group in (("ann1", 1), ("ann2", 2)):
        with pytest.raises(LabelsFinal) as refused:
            _save(engine, world[name], world["A"], {cid: not before[group][cid] for cid in IDS})
        assert (refused.value.key, refused.value.params) == ("errors.labels_final", {})
        assert _labels(engine, world["A"], group) == before[group]
    with session_scope(engine, read_only=True) as s:
        assert feedback_freeze.labels_final(s, world["A"], 1) and feedback_freeze.labels_final(s, world["A"], 2)
        assert labeling.response_for_labeling(s, s.get(User, world["ann1"]), world["A"]).final


def test_the_save_straight_through_labeling_is_refused_too(engine, world):
    _set_open(engine, world, True)
    with session_scope(engine) as s, pytest.raises(LabelsFinal):
        user = s.get(User, world["ann1"])
        view = labeling.response_for_labeling(s, user, world["A"])
        label_room.save(
            s,
            user,
            "annotation",
            world["A"],
            **as_sent([labeling.LabelInput(cid, True) for cid in IDS]),
            rubric_version_id=view.rubric_version_id,
            expected_versions=view.expected_versions,
        )
    assert _labels(engine, world["A"], 1) == {"c01": True, "c02": False, "c03": True}


def test_closing_the_feedback_again_does_not_reopen_the_labels(engine, world):
    _set_open(engine, world, True)
    _set_open(engine, world, False)
    assert not _round_of_a(engine, world).is_open
    with pytest.raises(LabelsFinal):
        _save(engine, world["ann1"], world["A"], {"c01": False, "c02": True, "c03": False})
    with pytest.raises(LabelsFinal):
        _keep(engine, world["ann1"], world["A"], {"c01": False})
    assert _labels(engine, world["A"], 1) == {"c01": True, "c02": False, "c03": True}


def test_no_draft_is_kept_or_restored_on_final_labels(engine, world):
    _keep(engine, world["ann1"], world["A"], {"c01": False, "c02": True, "c03": False})  # before: kept
    _set_open(engine, world, True)
    with pytest.raises(LabelsFinal) as refused:
        _keep(engine, world["ann1"], world["A"], {"c01": True, "c02": True, "c03": True})
    assert refused.value.key == "errors.labels_final"
    with session_scope(engine, read_only=True) as s:
        (draft,) = s.exec(select(Draft).where(Draft.user_id == world["ann1"])).all()
        assert draft.payload["decisions"] == {"c01": False, "c02": True, "c03": False}  # not the refused one
        bench = label_drafts.open_response(s, s.get(User, world["ann1"]), world["A"])
    # The response opens with its saved labels, read-only; the draft from before is not offered.
    assert bench.view.final and not bench.unsaved and bench.differences == []
    assert bench.decisions == {"c01": True, "c02": False, "c03": True}


def test_a_response_of_a_round_whose_feedback_never_opened_stays_open(engine, world):
    _set_open(engine, world, True)
    outcome = _save(engine, world["ann1"], world["B"], {"c01": False, "c02": True, "c03": True})
    assert outcome.updated == 1
    _keep(engine, world["ann2"], world["B"], {"c01": True})
    with session_scope(engine, read_only=True) as s:
        assert not feedback_freeze.labels_final(s, world["B"], 1) and not feedback_freeze.labels_final(s, world["B"], 2)


def test_a_checker_still_checks_the_groups_labels_after_the_feedback_opened(engine, world):
    _set_open(engine, world, True)
    with session_scope(engine) as s:
        checker = s.get(User, world["chk1"])
        review.save_check(s, checker, response_id=world["A"], criterion_id="c02", met=True, note="应为符合")
        review.save_check(s, checker, response_id=world["A"], criterion_id="c01", met=True)
    assert _labels(engine, world["A"], 1, Stage.check) == {"c01": True, "c02": True}
    assert _labels(engine, world["A"], 1) == {"c01": True, "c02": False, "c03": True}  # the annotation stays
