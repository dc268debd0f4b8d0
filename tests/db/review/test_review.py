"""The checker's rules in db/review/, on SQLite and PostgreSQL: audit, check, adjudication, duties."""

from __future__ import annotations

import pandas as pd
import pytest
from sqlmodel import select

from db import review
from db.access.audit import verify_chain
from db.rules.enums import NO_GROUP, RubricStatus, Stage
from db.rules.errors import NotFound, PermissionDenied, StaleEdit, ValidationFailed
from db.rules.gold import LABEL_COLUMNS, gold_labels
from db.store.engine import session_scope
from db.store.models import AuditLog, JudgeDecision, Label, RubricVersion
from tests.support.factories import make_case, make_label, make_response, make_rubric, make_user

N = 4


def build_world(engine):
    """Two annotators and two checkers per group, one case of N criteria, two responses labeled by both groups."""
    with session_scope(engine) as s:
        people = {}
        for g in (1, 2):
            people[f"ann{g}"] = make_user(s, f"ann{g}", "annotator", g)
            people[f"ann{g}b"] = make_user(s, f"ann{g}b", "annotator", g)
            people[f"chk{g}"] = make_user(s, f"chk{g}", "checker", g)
            people[f"chk{g}b"] = make_user(s, f"chk{g}b", "checker", g)
        case = make_case(s, "CC-0001", n=N)
        first = make_response(s, case, "model-a", "第一个回答")
        second = make_response(s, case, "model-b", "第二个回答")
        # Group 1 says all met; group 2 disagrees on c01 and c02 of the first response, c01 of the second.
        for response, differing in ((first, {"c01", "c02"}), (second, {"c01"})):
            for i in range(1, N + 1):
                cid = f"c{i:02d}"
                make_label(s, response, cid, True, people["ann1"], note="组一理由")
                make_label(s, response, cid, cid not in differing, people["ann2"], note="组二理由")
        ids = {name: user.id for name, user in people.items()}
        return ids, case.id, first.id, second.id


def confirm_all(engine, ids, *response_ids):
    """chk1 and chk2 confirm their group's labels: the groups' checks are done, adjudication may start."""
    for name in ("chk1", "chk2"):
        checker = user(engine, ids[name])
        for response_id in response_ids:
            with session_scope(engine) as s:
                rows = review.check_view(s, checker, response_id).rows
                decisions = [review.CheckInput(row.criterion_id, row.annotation.met) for row in rows]
                review.save_checks(s, checker, response_id=response_id, decisions=decisions)


def user(engine, user_id):
    from db.store.models import User

    with session_scope(engine, read_only=True) as s:
        return s.get(User, user_id)


# Rubric audit ---------------------------------------------------------------------------------


def submitted_rubric(engine, author_name="author1"):
    with session_scope(engine) as s:
        author = make_user(s, author_name, "annotator", 1)
        case = make_case(s, f"CC-{author_name}", n=0)
        rubric = make_rubric(s, case, n=N, status=RubricStatus.submitted, author=author)
        return author.id, rubric.id


def test_return_then_approve_a_rubric_with_comments_and_audit(engine):
    ids, *_ = build_world(engine)
    author_id, rubric_id = submitted_rubric(engine)
    checker = user(engine, ids["chk1"])
    with session_scope(engine) as s:
        queue = review.rubric_queue(s, checker)
        assert [item.rubric_version_id for item in queue] == [rubric_id]
        assert queue[0].n_criteria == N and not queue[0].own
        view = review.rubric_for_review(s, checker, rubric_id)
        first_criterion = view.criteria[0]
        with pytest.raises(ValidationFailed, match="comment"):
            review.return_rubric(s, checker, rubric_id, seen_lock_version=view.lock_version, comment="  ")
        returned = review.return_rubric(
            s,
            checker,
            rubric_id,
            seen_lock_version=view.lock_version,
            comment="请修改第一条",
            criterion_comments={first_criterion.id: "太笼统"},
        )
    assert returned.status == RubricStatus.returned
    assert returned.criteria[0].review_comment == "太笼统" and returned.criteria[1].review_comment is None
    with session_scope(engine, read_only=True) as s:
        assert review.rubric_queue(s, checker) == []
    # The author fixes and resubmits (the authoring side's job; here done directly).
    with session_scope(engine) as s:
        rubric = s.get(RubricVersion, rubric_id)
        rubric.status = RubricStatus.submitted
        rubric.lock_version += 1
        s.add(rubric)
    with session_scope(engine) as s:
        view = review.rubric_for_review(s, checker, rubric_id)
        approved = review.approve_rubric(s, checker, rubric_id, seen_lock_version=view.lock_version)
    assert approved.status == RubricStatus.approved and approved.reviewer == "chk1"
    with session_scope(engine, read_only=True) as s:
        entries = s.exec(select(AuditLog).where(AuditLog.entity == "rubric").order_by(AuditLog.id)).all()
        assert [e.action for e in entries] == ["return", "approve"]
        assert entries[0].before["status"] == "submitted" and entries[0].after["status"] == "returned"
        assert entries[0].after["criterion_comments"] == {"c01": "太笼统"}
        assert entries[0].actor == "chk1"
        assert verify_chain(s).ok


def test_author_cannot_approve_own_rubric_and_stale_approval_is_refused(engine):
    with session_scope(engine) as s:
        writer = make_user(s, "writer", "checker", 1)
        other = make_user(s, "other", "checker", 2)
        case = make_case(s, "CC-OWN", n=0)
        rubric_id = make_rubric(s, case, n=N, status=RubricStatus.submitted, author=writer).id
        writer_id, other_id = writer.id, other.id
    writer, other = user(engine, writer_id), user(engine, other_id)
    with session_scope(engine) as s:
        assert review.rubric_queue(s, writer)[0].own
        with pytest.raises(PermissionDenied):
            review.approve_rubric(s, writer, rubric_id, seen_lock_version=1)
    with session_scope(engine) as s:
        review.approve_rubric(s, other, rubric_id, seen_lock_version=1)
    # A second checker who opened it at revision 1 is told, and shown the newer state.
    with session_scope(engine) as s, pytest.raises(StaleEdit) as stale:
        review.return_rubric(s, other, rubric_id, seen_lock_version=1, comment="晚了")
    assert stale.value.current["status"] == RubricStatus.approved and stale.value.current["reviewer"] == "other"
    with session_scope(engine, read_only=True) as s:
        assert s.get(RubricVersion, rubric_id).status == RubricStatus.approved


def test_annotator_and_admin_cannot_audit(engine):
    ids, *_ = build_world(engine)
    _, rubric_id = submitted_rubric(engine)
    annotator = user(engine, ids["ann1"])
    with session_scope(engine) as s:
        with pytest.raises(PermissionDenied):
            review.rubric_queue(s, annotator)
        with pytest.raises(PermissionDenied):
            review.approve_rubric(s, annotator, rubric_id, seen_lock_version=1)


def test_labels_of_an_older_rubric_version_need_relabeling(engine):
    ids, case_pk, first, _ = build_world(engine)
    with session_scope(engine) as s:
        old_version = review.current_rubric_version_id(s, case_pk)
        for label in s.exec(select(Label).where(Label.response_id == first)).all():
            label.rubric_version_id = old_version
            s.add(label)
        assert review.labels_needing_relabel(s) == []
        from db.store.models import Case

        newer = make_rubric(s, s.get(Case, case_pk), n=N, status=RubricStatus.approved, version=2)
        # The other responses were labeled again on version 2: theirs count and need nothing.
        for label in s.exec(select(Label).where(Label.response_id != first)).all():
            label.rubric_version_id = newer.id
            s.add(label)
    with session_scope(engine, read_only=True) as s:
        stale = review.labels_needing_relabel(s)
        assert len(stale) == 2 * N and {item.response_id for item in stale} == {first}
        assert {item.labeled_version_id for item in stale} == {old_version}
        mine = review.labels_needing_relabel(s, user_id=ids["ann2"])
        assert len(mine) == N and all(item.group_no == 2 for item in mine)
        assert {item.user_id for item in review.labels_needing_relabel(s, group_no=1)} == {ids["ann1"]}


# Label check ----------------------------------------------------------------------------------


def test_checker_sees_only_own_group_and_no_model_names(engine):
    ids, _, first, _ = build_world(engine)
    checker = user(engine, ids["chk2"])
    with session_scope(engine, read_only=True) as s:
        annotators = review.check_annotators(s, checker)
        assert [a.username for a in annotators] == ["ann2"]
        assert annotators[0].n_responses == 2 and annotators[0].n_labels == 2 * N
        view = review.check_view(s, checker, first)
    assert view.group_no == 2
    assert {row.annotation.user for row in view.rows} == {"ann2"}
    assert [row.annotation.met for row in view.rows] == [False, False, True, True]
    assert "model-a" not in repr(view)
    with session_scope(engine, read_only=True) as s:
        queue = review.check_queue(s, checker, annotator_id=ids["ann2"])
        assert "model" not in repr(queue)
        # Group 1's annotator is not in group 2's check queue.
        assert review.check_queue(s, checker, annotator_id=ids["ann1"]) == []


def test_confirm_and_correct_labels_with_notes(engine):
    ids, _, first, _ = build_world(engine)
    checker = user(engine, ids["chk1"])
    with session_scope(engine) as s:
        confirmed = review.save_check(s, checker, response_id=first, criterion_id="c01", met=True)
        assert confirmed.stage == Stage.check and confirmed.group_no == 1 and confirmed.note is None
        with pytest.raises(ValidationFailed, match="note"):
            review.save_check(s, checker, response_id=first, criterion_id="c02", met=False)
        corrected = review.save_check(s, checker, response_id=first, criterion_id="c02", met=False, note="漏了禁忌证")
        assert corrected.met is False and corrected.lock_version == 1
    with session_scope(engine) as s:
        again = review.save_check(s, checker, response_id=first, criterion_id="c02", met=True, seen_lock_version=1)
        assert again.lock_version == 2 and again.met is True
        with pytest.raises(StaleEdit) as stale:
            review.save_check(
                s, checker, response_id=first, criterion_id="c02", met=False, note="x", seen_lock_version=1
            )
        assert stale.value.current.met is True and stale.value.current.lock_version == 2
    with session_scope(engine, read_only=True) as s:
        view = review.check_view(s, checker, first)
        assert view.rows[1].check.met is True and view.rows[1].check.user == "chk1"
        entries = s.exec(select(AuditLog).where(AuditLog.entity == "check").order_by(AuditLog.id)).all()
        assert [e.action for e in entries] == ["create", "create", "update"]
        assert entries[2].before["met"] is False and entries[2].after["met"] is True


def test_checker_cannot_check_own_labels_nor_other_group(engine):
    ids, case_pk, first, _ = build_world(engine)
    with session_scope(engine) as s:
        from db.store.models import Case, User

        case = s.get(Case, case_pk)
        own = make_response(s, case, "model-c")
        make_label(s, own, "c01", True, s.get(User, ids["chk1"]))
    checker = user(engine, ids["chk1"])
    with session_scope(engine) as s:
        with pytest.raises(PermissionDenied):
            review.save_check(s, checker, response_id=own.id, criterion_id="c01", met=True)
        with pytest.raises(PermissionDenied):
            review.check_queue(s, checker, annotator_id=ids["chk1"])
    other_group = user(engine, ids["chk2"])
    with session_scope(engine) as s:
        with pytest.raises(NotFound):
            review.check_view(s, other_group, own.id)
        with pytest.raises(NotFound):
            review.save_check(s, other_group, response_id=own.id, criterion_id="c01", met=True)
        assert s.exec(select(Label).where(Label.stage == Stage.check)).all() == []


def test_sample_is_seeded_and_sized(engine):
    assert review.sample_responses(list(range(100)), 10, seed=7, annotator_id=3) == review.sample_responses(
        list(range(99, -1, -1)), 10, seed=7, annotator_id=3
    )
    assert len(review.sample_responses(list(range(100)), 10, seed=7, annotator_id=3)) == 10
    assert len(review.sample_responses(list(range(5)), 1, seed=7, annotator_id=3)) == 1
    assert review.sample_responses(list(range(100)), 10, seed=7, annotator_id=3) != review.sample_responses(
        list(range(100)), 10, seed=8, annotator_id=3
    )
    with pytest.raises(ValidationFailed):
        review.sample_responses([1], 0, seed=1, annotator_id=1)
    ids, _, first, second = build_world(engine)
    checker = user(engine, ids["chk1"])
    with session_scope(engine, read_only=True) as s:
        sample = review.check_queue(s, checker, annotator_id=ids["ann1"], mode="sample", percent=50, seed=3)
        assert len(sample) == 1 and sample[0].response_id in {first, second}
        assert sample == review.check_queue(s, checker, annotator_id=ids["ann1"], mode="sample", percent=50, seed=3)


def test_judge_mode_orders_by_disagreement_with_the_judge(engine):
    ids, _, first, second = build_world(engine)
    with session_scope(engine) as s:
        for response_id, wrong in ((first, 1), (second, 3)):
            for i in range(1, N + 1):
                s.add(JudgeDecision(judge="judge-x", response_id=response_id, criterion_id=f"c{i:02d}", met=i > wrong))
    checker = user(engine, ids["chk1"])
    with session_scope(engine, read_only=True) as s:
        assert review.judge_names(s) == ["judge-x"]
        ranked = review.check_queue(s, checker, annotator_id=ids["ann1"], mode="judge", judge="judge-x")
        assert [item.response_id for item in ranked] == [second, first]
        assert ranked[0].judge_disagreement == pytest.approx(3 / N)
        with pytest.raises(ValidationFailed):
            review.check_queue(s, checker, annotator_id=ids["ann1"], mode="judge")


# Adjudication ---------------------------------------------------------------------------------


def labels_frame(s, response_id=None):
    statement = select(Label.response_id, Label.criterion_id, Label.stage, Label.group_no, Label.met)
    if response_id is not None:
        statement = statement.where(Label.response_id == response_id)
    return pd.DataFrame(s.exec(statement).all(), columns=LABEL_COLUMNS)


def test_queue_counts_and_lowest_agreement_first(engine):
    ids, _, first, second = build_world(engine)
    confirm_all(engine, ids, first, second)
    checker = user(engine, ids["chk1b"])
    with session_scope(engine) as s:
        assert review.adjudication_queue(s, checker) == []  # nothing counts for a checker before they take it in
        assert review.take_into_adjudication(s, checker) == 2
    with session_scope(engine, read_only=True) as s:
        assert review.unresolved_count(s) == 3
        queue = review.adjudication_queue(s, checker)
    assert [item.response_id for item in queue] == [first, second]
    assert queue[0].n_unresolved == 2 and queue[0].agreement == pytest.approx(0.5)
    assert queue[1].agreement == pytest.approx(0.75)
    # A check that brings group 2 in line removes the disagreement; a check the other way adds one.
    with session_scope(engine) as s:
        review.save_check(
            s,
            user(engine, ids["chk2"]),
            response_id=second,
            criterion_id="c01",
            met=True,
            note="应为满足",
            seen_lock_version=1,
        )
        review.save_check(
            s,
            user(engine, ids["chk1"]),
            response_id=second,
            criterion_id="c04",
            met=False,
            note="应为不满足",
            seen_lock_version=1,
        )
    with session_scope(engine, read_only=True) as s:
        assert review.unresolved_count(s) == 3
        view = review.adjudication_view(s, checker, second)
        assert [cell.criterion_id for cell in view.cells] == ["c04"]
        cell = view.cells[0]
        # group 2's final label is its check (a confirmation without note), group 1's the corrected check
        assert {cell.a.note, cell.b.note} == {"应为不满足", None}


def test_adjudication_shows_a_b_stably_and_decides_gold(engine):
    ids, _, first, _ = build_world(engine)
    confirm_all(engine, ids, first)
    checker = user(engine, ids["chk2b"])
    with session_scope(engine, read_only=True) as s:
        view = review.adjudication_view(s, checker, first)
        again = review.adjudication_view(s, checker, first)
    assert [c.criterion_id for c in view.cells] == ["c01", "c02"] and view.n_open == 2
    assert view == again
    assert "model-a" not in repr(view) and "group" not in repr(view.cells[0]).lower().replace("groupby", "")
    for cell in view.cells:
        assert {cell.a.met, cell.b.met} == {True, False}
    # Over many cells and checkers both orders occur (no group always shown first).
    orders = {review.a_is_group1(u, r, f"c{i:02d}") for u in range(5) for r in range(5) for i in range(1, 6)}
    assert orders == {True, False}
    with session_scope(engine) as s:
        with pytest.raises(ValidationFailed, match="rationale"):
            review.adjudicate(s, checker, response_id=first, criterion_id="c01", met=True, rationale=" ")
        with pytest.raises(ValidationFailed, match="disagree"):
            review.adjudicate(s, checker, response_id=first, criterion_id="c03", met=True, rationale="一致")
        decision = review.adjudicate(
            s, checker, response_id=first, criterion_id="c01", met=False, rationale="回答未提及"
        )
    assert decision.stage == Stage.adjudication and decision.group_no == NO_GROUP and decision.note == "回答未提及"
    with session_scope(engine, read_only=True) as s:
        assert review.unresolved_count(s) == 2
        gold = gold_labels(labels_frame(s, first)).set_index("criterion_id")
        assert gold.at["c01", "source"] == "adjudicated" and not gold.at["c01", "met"]
        assert "c02" not in gold.index
        view = review.adjudication_view(s, checker, first)
        assert view.n_open == 1 and view.cells[0].decision.note == "回答未提及"
        entry = s.exec(select(AuditLog).where(AuditLog.entity == "adjudication")).one()
        assert entry.actor == "chk2b" and entry.after["met"] is False and entry.after["note"] == "回答未提及"
    # A second checker who saw no decision is refused and shown it.
    other = user(engine, ids["chk1b"])
    with session_scope(engine) as s, pytest.raises(StaleEdit) as stale:
        review.adjudicate(s, other, response_id=first, criterion_id="c01", met=True, rationale="我认为满足")
    assert stale.value.current.met is False and stale.value.current.user == "chk2b"


def test_no_adjudicating_a_response_one_labeled(engine):
    ids, _, first, _ = build_world(engine)
    with session_scope(engine) as s:
        review.save_check(s, user(engine, ids["chk1"]), response_id=first, criterion_id="c04", met=True)
    checker = user(engine, ids["chk1"])
    with session_scope(engine) as s:
        with pytest.raises(PermissionDenied):
            review.adjudication_view(s, checker, first)
        with pytest.raises(PermissionDenied):
            review.adjudicate(s, checker, response_id=first, criterion_id="c01", met=True, rationale="理由")
        assert first not in [item.response_id for item in review.adjudication_queue(s, checker)]
    annotator = user(engine, ids["ann1"])
    with session_scope(engine) as s, pytest.raises(PermissionDenied):
        review.adjudicate(s, annotator, response_id=first, criterion_id="c01", met=True, rationale="理由")
    with session_scope(engine, read_only=True) as s:
        assert s.exec(select(Label).where(Label.stage == Stage.adjudication)).all() == []


def test_unresolved_count_matches_gold_over_the_whole_table(engine):
    """The count reads only candidate cells; it must equal db.rules.gold over every label."""
    import random

    rng = random.Random(5)
    with session_scope(engine) as s:
        people = {(role, g): make_user(s, f"{role}{g}", role, g) for role in ("annotator", "checker") for g in (1, 2)}
        case = make_case(s, "CC-RAND", n=6)
        for m in range(8):
            response = make_response(s, case, f"model-{m}")
            for i in range(1, 7):
                cid = f"c{i:02d}"
                for g in (1, 2):
                    if rng.random() < 0.85:
                        make_label(s, response, cid, rng.random() < 0.6, people[("annotator", g)])
                    if rng.random() < 0.3:
                        make_label(s, response, cid, rng.random() < 0.5, people[("checker", g)], stage=Stage.check)
                if rng.random() < 0.15:
                    make_label(s, response, cid, rng.random() < 0.5, people[("checker", 1)], stage=Stage.adjudication)
    with session_scope(engine, read_only=True) as s:
        from db.rules.gold import unresolved_disagreements

        expected = len(unresolved_disagreements(labels_frame(s)))
        assert expected > 3  # the data has open disagreements, including ones created by checks
        assert review.unresolved_count(s) == expected


def test_a_resubmitted_version_shows_what_the_last_return_asked(engine):
    ids, *_ = build_world(engine)
    author_id, rubric_id = submitted_rubric(engine)
    checker = user(engine, ids["chk1"])
    with session_scope(engine) as s:
        view = review.rubric_for_review(s, checker, rubric_id)
        review.return_rubric(
            s,
            checker,
            rubric_id,
            seen_lock_version=view.lock_version,
            comment="整体太简略",
            criterion_comments={view.criteria[1].id: "请补充剂量"},
        )
    with session_scope(engine) as s:
        from db.store.models import Case, User

        first = s.get(RubricVersion, rubric_id)
        second = make_rubric(
            s, s.get(Case, first.case_pk), n=N, status=RubricStatus.submitted, author=s.get(User, author_id), version=2
        )
        second_id = second.id
    with session_scope(engine, read_only=True) as s:
        view = review.rubric_for_review(s, checker, second_id)
    assert view.earlier_comment == "整体太简略"
    assert view.earlier_criterion_comments == {"c02": "请补充剂量"}
    assert set(view.earlier_criterion_texts) == {"c02"}
    assert all(c.review_comment is None for c in view.criteria)


def test_a_check_save_that_confirms_all_30_criteria_writes_30_check_labels(engine):
    """DESIGN §4.1: a confirmation is a check label even when it equals the annotation; a second save of the
    same decisions, read back with their lock versions, writes nothing."""
    with session_scope(engine) as s:
        annotator = make_user(s, "ann30", "annotator", 1)
        checker = make_user(s, "chk30", "checker", 1)
        case = make_case(s, "CC-0030", n=30)
        response = make_response(s, case, "model-a", "回答")
        for i in range(1, 31):
            make_label(s, response, f"c{i:02d}", i % 3 != 0, annotator)
        response_id, checker_id = response.id, checker.id
    checker = user(engine, checker_id)
    with session_scope(engine) as s:
        rows = review.check_view(s, checker, response_id).rows
        written = review.save_checks(
            s,
            checker,
            response_id=response_id,
            decisions=[review.CheckInput(r.criterion_id, r.annotation.met) for r in rows],
        )
    assert written == 30
    with session_scope(engine, read_only=True) as s:
        checks = s.exec(select(Label).where(Label.response_id == response_id, Label.stage == Stage.check)).all()
        annotations = {
            label.criterion_id: label.met
            for label in s.exec(select(Label).where(Label.response_id == response_id, Label.stage == Stage.annotation))
        }
        assert len(checks) == 30 and {c.criterion_id: c.met for c in checks} == annotations
        rows = review.check_view(s, checker, response_id).rows
    again = [review.CheckInput(r.criterion_id, r.check.met, None, r.check.lock_version) for r in rows]
    with session_scope(engine) as s:
        assert review.save_checks(s, checker, response_id=response_id, decisions=again) == 0
