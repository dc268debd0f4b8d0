"""Saves that tell the truth: a refused save says who saved in between, and an older draft never wins.

Two "tabs" are two snapshots of the same response (two `open_response` reads), each saving in its
own transaction, as two browser tabs do. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import counts, review
from db.label_rows.refusals import LabelsChanged, SavedSince
from db.labeling import drafts as label_drafts
from db.rules.enums import Stage
from db.rules.errors import StaleEdit
from db.store.engine import session_scope
from db.store.models import Assignment, Draft, Label, User
from tests.support.factories import make_case, make_label, make_response, make_user

N = 6
IDS = [f"c{i:02d}" for i in range(1, N + 1)]
TAB_ONE = {"c01": True, "c02": True, "c03": False, "c04": False, "c05": True, "c06": False}
TAB_TWO = {"c01": True, "c02": False, "c03": False, "c04": True, "c05": True, "c06": True}


@pytest.fixture
def world(engine):
    with session_scope(engine) as s:
        people = {
            "ann1": make_user(s, "ann1", "annotator", 1),
            "ann1b": make_user(s, "ann1b", "annotator", 1),
            "ann2": make_user(s, "ann2", "annotator", 2),
        }
        case = make_case(s, "CC-0001", n=N)
        response = make_response(s, case, "secret-model", "回答")
        for user in people.values():
            s.add(
                Assignment(
                    kind="label", case_pk=case.id, user_id=user.id, group_no=user.group_no, response_id=response.id
                )
            )
        counts.refresh_assignments(s, [response.id])
        ids = {name: int(user.id) for name, user in people.items()} | {"R": int(response.id)}
    return ids


def open_tab(engine, user_id: int, response_id: int) -> label_drafts.Workbench:
    with session_scope(engine, read_only=True) as s:
        return label_drafts.open_response(s, s.get(User, user_id), response_id)


def keep(engine, user_id: int, tab: label_drafts.Workbench, decisions, notes=None) -> None:
    with session_scope(engine) as s:
        label_drafts.keep_draft(
            s,
            s.get(User, user_id),
            tab.view.response_id,
            rubric_version_id=tab.view.rubric_version_id,
            decisions=decisions,
            notes=notes,
            expected_versions=tab.view.expected_versions,
        )


def save(engine, user_id: int, tab: label_drafts.Workbench, decisions, notes=None):
    with session_scope(engine) as s:
        return label_drafts.save(
            s,
            s.get(User, user_id),
            tab.view.response_id,
            rubric_version_id=tab.view.rubric_version_id,
            decisions=decisions,
            notes=notes,
            expected_versions=tab.view.expected_versions,
        )


def saved(engine, response_id: int, group_no: int = 1) -> dict[str, bool]:
    with session_scope(engine, read_only=True) as s:
        rows = s.exec(
            select(Label).where(
                Label.response_id == response_id, Label.group_no == group_no, Label.stage == Stage.annotation
            )
        ).all()
        return {label.criterion_id: label.met for label in rows}


def differing(a: dict, b: dict) -> list[str]:
    """The criteria on which two sets of decisions differ, read off directly."""
    return sorted(cid for cid in a if a[cid] != b[cid])


def test_same_annotator_in_two_tabs_is_told_it_was_them_and_nothing_is_overwritten(engine, world):
    tab1, tab2 = open_tab(engine, world["ann1"], world["R"]), open_tab(engine, world["ann1"], world["R"])
    save(engine, world["ann1"], tab1, TAB_ONE)
    with pytest.raises(LabelsChanged) as refused:
        save(engine, world["ann1"], tab2, TAB_TWO)
    error = refused.value
    assert error.by_self
    assert (error.key, error.params) == ("errors.labels_changed_by_you", {"n": len(differing(TAB_ONE, TAB_TWO))})
    assert error.conflicts == differing(TAB_ONE, TAB_TWO)
    assert "another tab" in str(error)
    assert {cid: view.met for cid, view in error.current.items()} == TAB_ONE
    assert saved(engine, world["R"]) == TAB_ONE


def test_another_member_of_the_group_is_named_as_such_never_by_name(engine, world):
    mine, theirs = open_tab(engine, world["ann1"], world["R"]), open_tab(engine, world["ann1b"], world["R"])
    save(engine, world["ann1b"], theirs, TAB_ONE)
    with pytest.raises(LabelsChanged) as refused:
        save(engine, world["ann1"], mine, TAB_TWO)
    assert not refused.value.by_self
    assert refused.value.key == "errors.labels_changed_by_member"
    assert "ann1b" not in str(refused.value) and "ann1b" not in repr(refused.value.params)
    assert saved(engine, world["R"]) == TAB_ONE


def test_changes_by_both_the_annotator_and_a_member_count_as_a_member(engine, world):
    stale = open_tab(engine, world["ann1"], world["R"])
    save(engine, world["ann1"], open_tab(engine, world["ann1"], world["R"]), TAB_ONE)
    save(engine, world["ann1b"], open_tab(engine, world["ann1b"], world["R"]), dict(TAB_ONE, c03=True))
    with pytest.raises(LabelsChanged) as refused:
        save(engine, world["ann1"], stale, TAB_TWO)
    assert not refused.value.by_self


def test_the_other_groups_labels_are_never_involved(engine, world):
    tab1, tab2 = open_tab(engine, world["ann1"], world["R"]), open_tab(engine, world["ann1"], world["R"])
    save(engine, world["ann2"], open_tab(engine, world["ann2"], world["R"]), TAB_TWO)  # group 2, same response
    save(engine, world["ann1"], tab1, TAB_ONE)
    with pytest.raises(LabelsChanged) as refused:
        save(engine, world["ann1"], tab2, TAB_TWO)
    assert refused.value.by_self and refused.value.conflicts == differing(TAB_ONE, TAB_TWO)
    assert saved(engine, world["R"], 2) == TAB_TWO and saved(engine, world["R"], 1) == TAB_ONE


def test_after_a_refusal_the_stale_decisions_cannot_be_saved_and_what_is_shown_saves_nothing(engine, world):
    tab1, tab2 = open_tab(engine, world["ann1"], world["R"]), open_tab(engine, world["ann1"], world["R"])
    keep(engine, world["ann1"], tab2, TAB_TWO)
    save(engine, world["ann1"], tab1, TAB_ONE)
    for _ in range(2):  # the same stale save, twice: refused each time
        with pytest.raises(LabelsChanged):
            save(engine, world["ann1"], tab2, TAB_TWO)
    # Reloaded after the refusal: the saved labels are shown, with the lock versions they were read with.
    reloaded = open_tab(engine, world["ann1"], world["R"])
    assert reloaded.decisions == TAB_ONE and not reloaded.unsaved
    outcome = save(engine, world["ann1"], reloaded, reloaded.decisions)  # Ctrl+Enter again, nothing re-decided
    assert outcome.changed == 0
    assert saved(engine, world["R"]) == TAB_ONE


def test_a_draft_older_than_the_saved_labels_lists_exactly_the_differing_criteria(engine, world):
    tab1, tab2 = open_tab(engine, world["ann1"], world["R"]), open_tab(engine, world["ann1"], world["R"])
    save(engine, world["ann1"], tab1, TAB_ONE)
    # Tab 2 goes on deciding after tab 1 saved: c02 left undecided, a note added on c05 (same decision).
    draft = dict(TAB_TWO, c02=None)
    keep(engine, world["ann1"], tab2, draft, notes={"c05": "提到了复诊"})
    fresh = open_tab(engine, world["ann1"], world["R"])
    expected = sorted({cid for cid in IDS if draft[cid] is not None and draft[cid] != TAB_ONE[cid]} | {"c05"})
    assert [d.criterion_id for d in fresh.differences] == expected == ["c04", "c05", "c06"]
    by_id = {d.criterion_id: d for d in fresh.differences}
    assert (by_id["c04"].saved, by_id["c04"].draft) == (False, True)
    assert (by_id["c05"].saved, by_id["c05"].draft, by_id["c05"].draft_note) == (True, True, "提到了复诊")
    # Never "restored": the saved labels are what the page opens with.
    assert fresh.decisions == TAB_ONE and not fresh.unsaved and fresh.saved_by_self


def test_an_older_draft_after_a_members_save_says_so(engine, world):
    mine = open_tab(engine, world["ann1"], world["R"])
    keep(engine, world["ann1"], mine, TAB_TWO)
    save(engine, world["ann1b"], open_tab(engine, world["ann1b"], world["R"]), TAB_ONE)
    fresh = open_tab(engine, world["ann1"], world["R"])
    assert not fresh.saved_by_self
    assert [d.criterion_id for d in fresh.differences] == differing(TAB_ONE, TAB_TWO)


def test_a_draft_kept_on_the_saved_labels_is_restored_as_before(engine, world):
    save(engine, world["ann1"], open_tab(engine, world["ann1"], world["R"]), TAB_ONE)
    tab = open_tab(engine, world["ann1"], world["R"])
    keep(engine, world["ann1"], tab, dict(TAB_ONE, c03=True))
    again = open_tab(engine, world["ann1"], world["R"])
    assert again.unsaved and again.differences == []
    assert again.decisions == dict(TAB_ONE, c03=True)


def test_a_draft_equal_to_the_newer_labels_opens_clean(engine, world):
    tab1, tab2 = open_tab(engine, world["ann1"], world["R"]), open_tab(engine, world["ann1"], world["R"])
    keep(engine, world["ann1"], tab2, TAB_ONE)
    save(engine, world["ann1"], tab1, TAB_ONE)
    with session_scope(engine) as s:  # the save dropped the draft; tab 2 keeps it again afterwards
        assert s.exec(select(Draft)).all() == []
    keep(engine, world["ann1"], tab2, TAB_ONE)
    fresh = open_tab(engine, world["ann1"], world["R"])
    assert fresh.differences == [] and not fresh.unsaved and fresh.decisions == TAB_ONE


# The checker's locked save ------------------------------------------------------------------------


@pytest.fixture
def checked(engine):
    with session_scope(engine) as s:
        annotator = make_user(s, "ann1", "annotator", 1)
        checkers = [make_user(s, "chk1", "checker", 1), make_user(s, "chk1b", "checker", 1)]
        response = make_response(s, make_case(s, "CC-0009", n=2), "secret-model", "回答")
        for cid in ("c01", "c02"):
            make_label(s, response, cid, True, annotator)
        return [int(c.id) for c in checkers], int(response.id)


def check(engine, checker_id: int, response_id: int, met: bool, seen: int | None):
    with session_scope(engine) as s:
        return review.save_check(
            s,
            s.get(User, checker_id),
            response_id=response_id,
            criterion_id="c01",
            met=met,
            note=None if met else "未提及",
            seen_lock_version=seen,
        )


def test_a_checker_in_two_tabs_is_told_it_was_them(engine, checked):
    (chk1, _), response_id = checked
    check(engine, chk1, response_id, True, None)  # tab 1
    with pytest.raises(SavedSince) as refused:  # tab 2 saw no check either
        check(engine, chk1, response_id, False, None)
    assert refused.value.by_self and isinstance(refused.value, StaleEdit)
    assert (refused.value.key, refused.value.params) == ("errors.saved_since_by_you", {"criterion": "c01"})
    with pytest.raises(SavedSince) as refused_update:  # an update from a revision since replaced
        check(engine, chk1, response_id, False, 0)
    assert refused_update.value.by_self


def test_another_checker_is_someone_else_never_a_name(engine, checked):
    (chk1, chk1b), response_id = checked
    first = check(engine, chk1b, response_id, True, None)
    check(engine, chk1b, response_id, False, first.lock_version)
    with pytest.raises(SavedSince) as refused:
        check(engine, chk1, response_id, True, first.lock_version)
    assert not refused.value.by_self
    assert refused.value.key == "errors.saved_since_by_other" and "chk1b" not in str(refused.value)
