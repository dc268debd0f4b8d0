"""Hit labeling in the data layer: queue, blinded view, idempotent locked saves, refusals."""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import counts, labeling, labels as label_room
from db.access.audit import verify_chain
from db.label_rows.refusals import UnjudgedCriteria
from db.labeling.annotation import LabelInput
from db.rules.enums import RubricStatus
from db.rules.errors import PermissionDenied, StaleEdit, ValidationFailed
from db.store.models import Assignment, AuditLog, Label, RubricVersion
from tests.support.factories import make_case, make_label, make_response, make_rubric, make_user
from tests.support.page_save import as_sent

N = 30


def assign(session, user, case, response=None, kind="label"):
    session.add(
        Assignment(
            kind=kind,
            case_pk=case.id,
            user_id=user.id,
            group_no=user.group_no,
            response_id=response.id if response else None,
        )
    )
    counts.refresh_assignments(session, [response.id] if response else [])


def decisions(met_ids=(), notes=None, n=N):
    notes = notes or {}
    return [LabelInput(f"c{i:02d}", f"c{i:02d}" in met_ids, notes.get(f"c{i:02d}")) for i in range(1, n + 1)]


@pytest.fixture
def world(session):
    g1 = make_user(session, "ann1", "annotator", 1)
    g2 = make_user(session, "ann2", "annotator", 2)
    case = make_case(session, "CC-0001")
    first = make_response(session, case, "secret-model-x", "第一份回答")
    second = make_response(session, case, "secret-model-y", "第二份回答")
    assign(session, g1, case, first)
    assign(session, g1, case, second)
    assign(session, g2, case, first)
    assign(session, g2, case, second)
    session.commit()
    return g1, g2, case, first, second


def test_view_is_blinded_and_carries_the_approved_rubric(session, world):
    g1, _, case, first, _ = world
    view = labeling.response_for_labeling(session, g1, first.id)
    assert view.code == first.code and view.text == "第一份回答"
    assert not hasattr(view, "model") and "secret-model" not in repr(view)
    assert len(view.criteria) == N and view.labels == {}
    assert view.case.case_id == "CC-0001"


def test_save_creates_then_is_idempotent_then_updates(session, world):
    g1, _, _, first, _ = world
    view = labeling.response_for_labeling(session, g1, first.id)
    outcome = label_room.save(
        session,
        g1,
        "annotation",
        first.id,
        **as_sent(decisions({"c01", "c02"}, {"c02": "  提到了  "})),
        rubric_version_id=view.rubric_version_id,
        expected_versions=view.expected_versions,
    )
    session.commit()
    assert (outcome.created, outcome.updated, outcome.unchanged) == (N, 0, 0)
    labels = labeling.labels_for(session, g1, first.id, 1)
    assert labels["c01"].met and labels["c02"].note == "提到了" and not labels["c03"].met
    # the same save again (a double click, a retry with the old page state) changes nothing
    again = label_room.save(
        session,
        g1,
        "annotation",
        first.id,
        **as_sent(decisions({"c01", "c02"}, {"c02": "提到了"})),
        rubric_version_id=view.rubric_version_id,
        expected_versions=view.expected_versions,
    )
    session.commit()
    assert (again.created, again.updated, again.unchanged) == (0, 0, N)

    fresh = labeling.response_for_labeling(session, g1, first.id)
    changed = label_room.save(
        session,
        g1,
        "annotation",
        first.id,
        **as_sent(decisions({"c01"})),
        rubric_version_id=fresh.rubric_version_id,
        expected_versions=fresh.expected_versions,
    )
    session.commit()
    assert (changed.created, changed.updated) == (0, 1)
    assert labeling.labels_for(session, g1, first.id, 1)["c02"].lock_version == 2
    entries = session.exec(select(AuditLog).where(AuditLog.entity == "label").order_by(AuditLog.id)).all()
    assert len(entries) == 2
    assert entries[1].before == {
        "c02": {"met": True, "note": "提到了", "rubric_version_id": view.rubric_version_id, "user_id": g1.id}
    }
    assert entries[1].after["labels"] == {"c02": {"met": False, "note": None}}
    assert "secret-model" not in entries[1].entity_key
    assert verify_chain(session).ok


def test_concurrent_change_is_refused_and_nothing_is_saved(session, world):
    g1, _, case, first, _ = world
    colleague = make_user(session, "ann1b", "annotator", 1)
    assign(session, colleague, case, first)
    session.commit()
    mine = labeling.response_for_labeling(session, g1, first.id)
    theirs = labeling.response_for_labeling(session, colleague, first.id)
    label_room.save(
        session,
        colleague,
        "annotation",
        first.id,
        **as_sent(decisions({"c05"})),
        rubric_version_id=theirs.rubric_version_id,
        expected_versions=theirs.expected_versions,
    )
    session.commit()
    with pytest.raises(StaleEdit) as error:
        label_room.save(
            session,
            g1,
            "annotation",
            first.id,
            **as_sent(decisions({"c06"})),
            rubric_version_id=mine.rubric_version_id,
            expected_versions=mine.expected_versions,
        )
    session.rollback()
    assert error.value.current["c05"].met
    assert not labeling.labels_for(session, g1, first.id, 1)["c06"].met


def test_save_is_refused_when_the_rubric_changed_and_old_labels_are_flagged(session, world):
    g1, _, case, first, second = world
    view = labeling.response_for_labeling(session, g1, first.id)
    label_room.save(
        session,
        g1,
        "annotation",
        first.id,
        **as_sent(decisions({"c01"})),
        rubric_version_id=view.rubric_version_id,
        expected_versions={},
    )
    session.commit()
    opened = labeling.response_for_labeling(session, g1, second.id)
    make_rubric(session, case, n=N, status=RubricStatus.approved, version=2)  # a newer approved version
    session.commit()

    with pytest.raises(StaleEdit, match="rubric"):
        label_room.save(
            session,
            g1,
            "annotation",
            second.id,
            **as_sent(decisions()),
            rubric_version_id=opened.rubric_version_id,
            expected_versions={},
        )
    session.rollback()
    assert session.exec(select(Label).where(Label.response_id == second.id)).all() == []

    queue = labeling.labeling_queue(session, g1)
    assert [(i.code, i.status) for i in sorted(queue.items, key=lambda i: i.response_id)] == [
        (first.code, labeling.STALE),
        (second.code, labeling.TODO),
    ]
    relabel = labeling.response_for_labeling(session, g1, first.id)
    assert relabel.rubric_version == 2 and all(label.stale for label in relabel.labels.values())
    label_room.save(
        session,
        g1,
        "annotation",
        first.id,
        **as_sent(decisions({"c01"})),
        rubric_version_id=relabel.rubric_version_id,
        expected_versions=relabel.expected_versions,
    )
    session.commit()
    assert {i.response_id: i.status for i in labeling.labeling_queue(session, g1).items}[first.id] == labeling.DONE


def test_queue_progress_and_next(session, world):
    g1, g2, case, first, second = world
    waiting = make_case(session, "CC-0002", n=N, status=RubricStatus.submitted)
    pending = make_response(session, waiting, "secret-model-x")
    assign(session, g1, waiting, pending)
    session.commit()
    make_label(session, first, "c01", True, g1)
    session.commit()
    queue = labeling.labeling_queue(session, g1)
    assert [i.status for i in queue.items] == [
        labeling.PARTIAL if i.response_id == first.id else labeling.TODO for i in queue.items[:2]
    ] + [labeling.WAITING]
    assert (queue.done, queue.total) == (0, 3)
    assert queue.next_after(queue.items[0].response_id).response_id == queue.items[1].response_id
    assert queue.next_after(queue.items[1].response_id).response_id == queue.items[0].response_id
    # group 2 sees both responses, with none of group 1's labels
    queue2 = labeling.labeling_queue(session, g2)
    assert {i.response_id for i in queue2.items} == {first.id, second.id}
    assert {i.status for i in queue2.items} == {labeling.TODO}


def test_bad_decisions_are_refused(session, world):
    g1, _, _, first, _ = world
    view = labeling.response_for_labeling(session, g1, first.id)
    with pytest.raises(UnjudgedCriteria) as unjudged:
        label_room.save(
            session,
            g1,
            "annotation",
            first.id,
            **as_sent(decisions()[:29]),
            rubric_version_id=view.rubric_version_id,
            expected_versions={},
        )
    assert unjudged.value.count == 1
    with pytest.raises(ValidationFailed, match="unknown criteria \\['c31'\\]"):
        label_room.save(
            session,
            g1,
            "annotation",
            first.id,
            **as_sent(decisions(n=N + 1)),
            rubric_version_id=view.rubric_version_id,
            expected_versions={},
        )
    with pytest.raises(ValidationFailed, match="note of c03"):
        label_room.save(
            session,
            g1,
            "annotation",
            first.id,
            **as_sent(decisions(notes={"c03": "长" * 2001})),
            rubric_version_id=view.rubric_version_id,
            expected_versions={},
        )


def test_no_approved_rubric_means_no_labeling(session, world):
    g1, _, _, first, _ = world
    version = session.exec(select(RubricVersion)).one()
    version.status = RubricStatus.returned
    session.commit()
    with pytest.raises(ValidationFailed, match="no approved rubric"):
        labeling.response_for_labeling(session, g1, first.id)


def test_other_group_labels_are_refused(session, world):
    g1, g2, _, first, _ = world
    make_label(session, first, "c01", True, g1)
    session.commit()
    with pytest.raises(PermissionDenied):
        labeling.labels_for(session, g2, first.id, 1)
    assert labeling.labels_for(session, g2, first.id, 2) == {}
    assert labeling.response_for_labeling(session, g2, first.id).labels == {}


@pytest.mark.parametrize("who", ["unassigned", "checker", "admin", "inactive"])
def test_wrong_users_are_refused(session, world, who):
    g1, _, case, first, _ = world
    if who == "unassigned":
        intruder = make_user(session, "ann3", "annotator", 1)
    elif who == "checker":
        intruder = make_user(session, "chk1", "checker", 1)
        assign(session, intruder, case, first)
    elif who == "admin":
        intruder = make_user(session, "boss", "admin")
    else:
        intruder = g1
        intruder.is_active = False
    session.flush()
    view_id = session.exec(select(RubricVersion.id)).one()
    for call in (
        lambda: labeling.response_for_labeling(session, intruder, first.id),
        lambda: labeling.labels_for(session, intruder, first.id, 1),
        lambda: label_room.save(
            session,
            intruder,
            "annotation",
            first.id,
            **as_sent(decisions()),
            rubric_version_id=view_id,
            expected_versions={},
        ),
        lambda: (
            labeling.labeling_queue(session, intruder)
            if who != "unassigned"
            else labeling.response_for_labeling(session, intruder, first.id)
        ),
    ):
        with pytest.raises(PermissionDenied):
            call()
    assert session.exec(select(Label)).all() == []


def test_queue_after_a_save_marks_only_that_response_done(session, world):
    g1, _, _, first, second = world
    queue = labeling.labeling_queue(session, g1)
    updated = queue.with_saved(first.id)
    statuses = {i.response_id: (i.status, i.labeled) for i in updated.items}
    assert statuses == {first.id: (labeling.DONE, N), second.id: (labeling.TODO, 0)}
    assert (updated.done, queue.done) == (1, 0)
    assert updated.next_after(second.id) is None


def test_two_simultaneous_saves_of_one_response_never_overwrite_each_other(engine, world):
    """Two tabs of one annotator save different decisions at once: the first lands, the second is refused.

    The first save stays uncommitted until the second has sent the statement that takes the response's lock
    (SQLite's BEGIN IMMEDIATE, PostgreSQL's SELECT … FOR UPDATE: an event, not a timed wait), so the second
    must wait for it and then see its labels; without that it would overwrite them or fail on the unique
    constraint.
    """
    import threading

    from sqlalchemy import event
    from sqlmodel import Session

    g1, _, _, first, _ = world
    with Session(engine) as reader:
        view = labeling.response_for_labeling(reader, g1, first.id)
    outcome: list[object] = []
    locking = threading.Event()  # the second tab sends the statement that waits for the first tab's lock

    def on_statement(conn, cursor, statement, parameters, context, executemany):
        taking_lock = "BEGIN IMMEDIATE" in statement or "FOR UPDATE" in statement
        if taking_lock and threading.current_thread().name == "second-tab":
            locking.set()

    def second_tab():
        with Session(engine) as session:
            try:
                label_room.save(
                    session,
                    session.get(type(g1), g1.id),
                    "annotation",
                    first.id,
                    **as_sent(decisions({"c02", "c03"})),
                    rubric_version_id=view.rubric_version_id,
                    expected_versions=view.expected_versions,
                )
                session.commit()
                outcome.append("saved")
            except Exception as error:  # the assertion below names what happened
                session.rollback()
                outcome.append(error)

    with Session(engine) as first_tab:
        label_room.save(
            first_tab,
            first_tab.get(type(g1), g1.id),
            "annotation",
            first.id,
            **as_sent(decisions({"c01"})),
            rubric_version_id=view.rubric_version_id,
            expected_versions=view.expected_versions,
        )
        event.listen(engine, "before_cursor_execute", on_statement)
        try:
            thread = threading.Thread(target=second_tab, name="second-tab")
            thread.start()
            assert locking.wait(timeout=60), "the second tab never asked for the response's lock"
            first_tab.commit()
        finally:
            event.remove(engine, "before_cursor_execute", on_statement)
    thread.join(timeout=60)
    assert len(outcome) == 1 and isinstance(outcome[0], StaleEdit), outcome
    with Session(engine) as session:
        labels = session.exec(select(Label).where(Label.response_id == first.id, Label.group_no == 1)).all()
        assert len(labels) == N and {label.criterion_id for label in labels if label.met} == {"c01"}
        assert all(label.lock_version == 1 for label in labels)
