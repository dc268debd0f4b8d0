"""The independence rules of the two groups, tried as the wrong user calling db/ directly (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import review
from db.access import independence
from db.rules.errors import PermissionDenied
from db.store.engine import session_scope
from db.store.models import AdjudicationOpening, Label, Response, User
from tests.support import recount
from tests.support.factories import make_case, make_label, make_response, make_user

N = 3


def people_of_both_groups(s) -> dict[str, User]:
    """An annotator per group, two checkers of group 1 and one of group 2."""
    return {
        "ann1": make_user(s, "ann1", "annotator", 1),
        "ann2": make_user(s, "ann2", "annotator", 2),
        "chk1": make_user(s, "chk1", "checker", 1),
        "chk1b": make_user(s, "chk1b", "checker", 1),
        "chk2": make_user(s, "chk2", "checker", 2),
    }


def world(engine):
    """Group 1 says all met, group 2 says c01 not met, on one response; nobody has checked yet."""
    with session_scope(engine) as s:
        people = people_of_both_groups(s)
        case = make_case(s, "CC-0001", n=N)
        response = make_response(s, case, "model-secret", "回答")
        for i in range(1, N + 1):
            cid = f"c{i:02d}"
            make_label(s, response, cid, True, people["ann1"])
            make_label(s, response, cid, cid != "c01", people["ann2"])
        return {name: user.id for name, user in people.items()}, response.id


def person(engine, user_id) -> User:
    with session_scope(engine, read_only=True) as s:
        return s.get(User, user_id)


def check_all(engine, checker: User, response_id: int) -> None:
    with session_scope(engine) as s:
        view = review.check_view(s, checker, response_id)
        review.save_checks(
            s,
            checker,
            response_id=response_id,
            decisions=[review.CheckInput(row.criterion_id, row.annotation.met) for row in view.rows],
        )


def test_the_reported_attack_is_refused_at_every_step(engine):
    """A group-1 checker tries to read group 2's labels before group 1 is checked, then copy them."""
    ids, response_id = world(engine)
    chk1 = person(engine, ids["chk1"])
    with session_scope(engine) as s:
        assert [item.response_id for item in review.adjudication_queue(s, chk1)] == []
        with pytest.raises(PermissionDenied, match="not finished checking"):
            review.adjudication_view(s, chk1, response_id)
        with pytest.raises(PermissionDenied, match="not finished checking"):
            review.adjudicate(s, chk1, response_id=response_id, criterion_id="c01", met=False, rationale="照抄")
    with session_scope(engine, read_only=True) as s:
        assert s.exec(select(AdjudicationOpening)).all() == []  # nothing was shown, nothing recorded
    # Once group 1's check is done (by another checker), chk1 may adjudicate ...
    check_all(engine, person(engine, ids["chk1b"]), response_id)
    check_all(engine, person(engine, ids["chk2"]), response_id)
    with session_scope(engine) as s:
        # ... once they have taken it into adjudication (its disagreement is counted for them only then) ...
        assert review.adjudication_queue(s, chk1) == []
        assert independence.ready_for_adjudication(s, chk1) == [response_id]
        assert independence.take_into_adjudication(s, chk1) == 1
        assert [item.response_id for item in review.adjudication_queue(s, chk1)] == [response_id]
        view = review.adjudication_view(s, chk1, response_id)
        assert [cell.criterion_id for cell in view.cells] == ["c01"]
    # ... and from then on group 1's labels on this response are closed to chk1: no copying group 2's answer.
    with session_scope(engine) as s:
        current = {row.criterion_id: row for row in review.check_view(s, chk1, response_id).rows}
        assert review.check_view(s, chk1, response_id).closed
        with pytest.raises(PermissionDenied, match="closed to you"):
            review.save_check(
                s,
                chk1,
                response_id=response_id,
                criterion_id="c01",
                met=False,
                note="改成和另一组一致",
                seen_lock_version=current["c01"].check.lock_version,
            )
    with session_scope(engine, read_only=True) as s:
        labels = {(row.criterion_id): row.check.met for row in review.check_view(s, chk1, response_id).rows}
        assert labels["c01"] is True  # unchanged


def test_opening_in_a_read_only_session_is_recorded_before_labels_are_returned(engine):
    ids, response_id = world(engine)
    check_all(engine, person(engine, ids["chk1b"]), response_id)
    check_all(engine, person(engine, ids["chk2"]), response_id)
    chk1 = person(engine, ids["chk1"])
    with session_scope(engine, read_only=True) as s:
        review.adjudication_view(s, chk1, response_id)
    with session_scope(engine, read_only=True) as s:
        assert independence.opened_by(s, chk1.id) == {response_id}
    with session_scope(engine) as s, pytest.raises(PermissionDenied, match="closed to you"):
        independence.require_group_labels_open(s, chk1, response_id)


def test_nobody_adjudicates_what_they_annotated(engine):
    """An account named as annotator in imported labels may be a checker: they may not judge their own labels."""
    ids, response_id = world(engine)
    with session_scope(engine) as s:
        chk2x = make_user(s, "chk2x", "checker", 2)
        # An import attributed group 2's annotation of c01 to this checker's account.
        label = s.exec(
            select(Label).where(Label.response_id == response_id, Label.criterion_id == "c01", Label.group_no == 2)
        ).one()
        label.user_id = chk2x.id
        s.add(label)
    check_all(engine, person(engine, ids["chk1b"]), response_id)
    check_all(engine, person(engine, ids["chk2"]), response_id)
    chk2x = person(engine, chk2x.id)
    with session_scope(engine) as s:
        assert independence.ready_for_adjudication(s, chk2x) == []
        assert independence.take_into_adjudication(s, chk2x) == 0
        assert review.adjudication_queue(s, chk2x) == []
        with pytest.raises(PermissionDenied, match="annotated this response"):
            review.adjudication_view(s, chk2x, response_id)


def test_a_checker_adjudicates_after_checking_their_own_group(engine):
    """Checking is the checker's job before adjudicating (docs/REFERENCE.md §1).

    It does not bar them; opening the adjudication does the rest.
    """
    ids, response_id = world(engine)
    chk1 = person(engine, ids["chk1"])
    check_all(engine, chk1, response_id)
    check_all(engine, person(engine, ids["chk2"]), response_id)
    with session_scope(engine) as s:
        independence.take_into_adjudication(s, chk1)
        assert [item.response_id for item in review.adjudication_queue(s, chk1)] == [response_id]
        review.adjudicate(s, chk1, response_id=response_id, criterion_id="c01", met=False, rationale="依据原文")
    with session_scope(engine) as s, pytest.raises(PermissionDenied, match="closed to you"):
        review.save_check(
            s, chk1, response_id=response_id, criterion_id="c02", met=False, note="改", seen_lock_version=1
        )


def test_annotators_and_admins_never_reach_adjudication(engine):
    ids, response_id = world(engine)
    with session_scope(engine) as s:
        admin = make_user(s, "boss", "admin")
    for user in (person(engine, ids["ann1"]), person(engine, admin.id)):
        with session_scope(engine) as s:
            with pytest.raises(PermissionDenied):
                review.adjudication_view(s, user, response_id)
            with pytest.raises(PermissionDenied):
                review.adjudication_queue(s, user)
            with pytest.raises(PermissionDenied):
                review.count_ready_for_adjudication(s, user)


def test_a_partly_checked_response_still_waits(engine):
    ids, response_id = world(engine)
    chk1b = person(engine, ids["chk1b"])
    with session_scope(engine) as s:
        review.save_check(s, chk1b, response_id=response_id, criterion_id="c01", met=True)
    check_all(engine, person(engine, ids["chk2"]), response_id)
    chk1 = person(engine, ids["chk1"])
    with session_scope(engine) as s:
        assert independence.check_pending(s, chk1, [response_id]) == {response_id}
        assert independence.ready_for_adjudication(s, chk1) == []
        with pytest.raises(PermissionDenied, match="not finished checking"):
            review.adjudication_view(s, chk1, response_id)
    # The other group's checker is not held up by group 1's pending check.
    with session_scope(engine, read_only=True) as s:
        assert independence.check_pending(s, person(engine, ids["chk2"]), [response_id]) == set()


def test_taking_in_closes_the_group_labels_and_only_then_counts_the_disagreement(engine):
    """Before a checker takes a checked response in, its disagreement counts nowhere they look; after, it
    counts, and their group's labels on it are closed to them (a checker's own figure; admins see all)."""
    from db.work import progress as progress_queries

    ids, response_id = world(engine)
    chk1 = person(engine, ids["chk1"])
    check_all(engine, chk1, response_id)
    check_all(engine, person(engine, ids["chk2"]), response_id)
    with session_scope(engine) as s:
        admin = make_user(s, "boss", "admin")
        assert progress_queries.unresolved_disagreement_count(s, admin) == 1
        assert progress_queries.unresolved_disagreement_count(s, chk1) == 0
        assert review.adjudication_queue(s, chk1) == []
        independence.require_group_labels_open(s, chk1, response_id)  # still open: no refusal
        assert independence.take_into_adjudication(s, chk1, limit=0) == 0
        assert independence.take_into_adjudication(s, chk1) == 1
        assert independence.take_into_adjudication(s, chk1) == 0  # taken once
    with session_scope(engine) as s:
        assert progress_queries.unresolved_disagreement_count(s, chk1) == 1
        assert independence.ready_for_adjudication(s, chk1) == []
        with pytest.raises(PermissionDenied, match="closed to you"):
            review.save_check(s, chk1, response_id=response_id, criterion_id="c02", met=False, note="改")
    # The other group's checker has taken nothing in: the same disagreement does not count for them.
    with session_scope(engine, read_only=True) as s:
        assert progress_queries.unresolved_disagreement_count(s, person(engine, ids["chk2"])) == 0


def test_an_incomplete_group_is_not_ready(engine):
    """A response whose group labeled only part of the current rubric cannot be taken in: the group's later labels
    would need a check the closed response no longer takes."""
    ids, response_id = world(engine)
    with session_scope(engine) as s:
        label = s.exec(
            select(Label).where(Label.response_id == response_id, Label.criterion_id == "c03", Label.group_no == 1)
        ).one()
        s.delete(label)
    chk1 = person(engine, ids["chk1"])
    with session_scope(engine) as s:
        for criterion_id in ("c01", "c02"):
            review.save_check(s, chk1, response_id=response_id, criterion_id=criterion_id, met=True)
    with session_scope(engine) as s:
        assert independence.check_pending(s, chk1, [response_id]) == set()
        assert independence.ready_for_adjudication(s, chk1) == []


def test_the_kept_ready_list_equals_a_count_from_every_label(engine):
    """The adjudication page reads which responses are ready from db.counts; counted from every label instead, each
    checker's list is the same at every step: labels done and checked, partly checked, incomplete, on an older
    rubric, annotated by the checker, taken in."""
    from tests.support.factories import make_rubric

    with session_scope(engine) as s:
        people = people_of_both_groups(s)
        responses = {}
        for case_no, models in ((1, ("m-a", "m-b", "m-c")), (2, ("m-a", "m-b"))):
            case = make_case(s, f"CC-000{case_no}", n=N)
            for model in models:
                response = make_response(s, case, model, "回答")
                responses[(case_no, model)] = response.id
                for i in range(1, N + 1):
                    cid = f"c{i:02d}"
                    missing = (case_no, model, cid) in {(1, "m-c", "c03"), (2, "m-b", "c01")}
                    if not missing:  # 1/m-c stays incomplete; chk1b makes the group-1 label on 2/m-b c01
                        make_label(s, response, cid, True, people["ann1"])
                    make_label(s, response, cid, i % 2 == 0, people["ann2"])
        # chk1b annotated a response of group 1 too: never ready for them, ready for chk1 once checked.
        make_label(s, s.get(Response, responses[(2, "m-b")]), "c01", True, people["chk1b"], group_no=1)
        ids = {name: user.id for name, user in people.items()}

    def assert_same() -> None:
        with session_scope(engine, read_only=True) as s:
            assert recount.kept_ready(s) == recount.recount_ready(s)
            for name in ("chk1", "chk1b", "chk2"):
                checker = s.get(User, ids[name])
                kept = independence.ready_for_adjudication(s, checker)
                assert kept == recount.recount_ready_for(s, checker), name
                # The page's number, counted without the list, is the list's length.
                assert independence.count_ready_for_adjudication(s, checker) == len(kept), name

    assert_same()
    for key in ((1, "m-a"), (1, "m-b"), (1, "m-c"), (2, "m-b")):
        with session_scope(engine) as s:
            chk1 = s.get(User, ids["chk1"])
            view = review.check_view(s, chk1, responses[key])
            decisions = [review.CheckInput(r.criterion_id, r.annotation.met, "核对") for r in view.rows if r.annotation]
            review.save_checks(s, chk1, response_id=responses[key], decisions=decisions)
        assert_same()
    with session_scope(engine) as s:  # group 2 checks half a response
        review.save_check(
            s, person(engine, ids["chk2"]), response_id=responses[(2, "m-a")], criterion_id="c01", met=False
        )
    assert_same()
    check_all(engine, person(engine, ids["chk2"]), responses[(1, "m-a")])
    with session_scope(engine, read_only=True) as s:
        ready_for_chk1 = independence.ready_for_adjudication(s, person(engine, ids["chk1"]))
    assert ready_for_chk1 == [responses[(1, "m-a")], responses[(1, "m-b")], responses[(2, "m-b")]]
    with session_scope(engine) as s:
        assert independence.take_into_adjudication(s, person(engine, ids["chk1"]), limit=1) == 1
    assert_same()
    with session_scope(engine) as s:  # case 2 gets a new approved rubric: its labels no longer count
        from db.store.models import Case

        make_rubric(s, s.exec(select(Case).where(Case.case_id == "CC-0002")).one(), n=N, version=2)
    assert_same()
    with session_scope(engine, read_only=True) as s:
        assert independence.ready_for_adjudication(s, person(engine, ids["chk1"])) == [responses[(1, "m-b")]]
