"""Policies read the acting user from the database, not from the object a caller hands in: a page's `User`
that is stale (deactivated, demoted since) or edited (a role or a name written into it) is refused as the
database says; the command line is a `SystemActor` (whoever holds the database), taken explicitly; a `User` that is not
stored stands for no one."""

from __future__ import annotations

import pytest
from sqlalchemy import update
from sqlmodel import Session

from db.access.policies import SystemActor
from db.rules.enums import AssignmentKind
from db.rules.errors import PermissionDenied
from db.store.models import User
from db.work.assignments import list_assignments, my_queue
from db.work.calibration import draw_calibration_sample
from db.work.feedback import round_states
from db.work.leaderboard import freeze_snapshot, list_snapshots
from tests.support.factories import make_case, make_response, make_user


@pytest.fixture
def people(session: Session):
    make_user(session, "boss", "admin")
    make_user(session, "ann1", "annotator", 1)
    case = make_case(session, "CC-0001", n=2)
    make_response(session, case, "model-a", "回答")
    session.commit()
    return session


def _detached(session: Session, username: str) -> User:
    """The user as a page holds it: a copy read earlier, no longer tied to any session."""
    user = session.query(User).filter_by(username=username).one()
    copy = User(**user.model_dump())
    session.expunge_all()
    return copy


def test_an_annotator_object_edited_to_admin_is_refused_every_admin_reader(people):
    forged = _detached(people, "ann1")
    forged.role = "admin"
    forged.group_no = None
    for call in (
        lambda: list_assignments(people, actor=forged, kind=AssignmentKind.label),
        lambda: list_snapshots(people, actor=forged),
        lambda: freeze_snapshot(people, actor=forged, name="q1", payload={"models": []}),
        lambda: draw_calibration_sample(people, actor=forged, model="model-a", n=1, seed=1),
        lambda: round_states(people, actor=forged),
    ):
        with pytest.raises(PermissionDenied):
            call()
        people.rollback()


def test_a_deactivated_or_demoted_account_is_refused_with_its_old_object(people):
    stale_admin, stale_annotator = _detached(people, "boss"), _detached(people, "ann1")
    assert list_snapshots(people, actor=stale_admin) == ([], [])
    assert my_queue(people, stale_annotator, AssignmentKind.label) == []
    people.execute(update(User).where(User.username == "boss").values(role="annotator", group_no=1))
    people.execute(update(User).where(User.username == "ann1").values(is_active=False))
    people.commit()
    with pytest.raises(PermissionDenied):
        list_snapshots(people, actor=stale_admin)
    with pytest.raises(PermissionDenied):
        my_queue(people, stale_annotator, AssignmentKind.label)


def test_an_object_naming_another_account_by_id_is_refused(people):
    forged = _detached(people, "ann1")
    boss_id = people.query(User).filter_by(username="boss").one().id
    forged.id, forged.role = boss_id, "admin"  # the admin's id with the annotator's name
    with pytest.raises(PermissionDenied):
        list_assignments(people, actor=forged, kind=AssignmentKind.label)


def test_the_command_line_is_taken_as_a_system_actor_explicitly(people):
    assert list_snapshots(people, actor=SystemActor.command_line()) == ([], [])
    assert list_assignments(people, actor=SystemActor.command_line(), kind=AssignmentKind.label) == []


def test_an_admin_object_that_is_not_stored_stands_for_no_one(people):
    """Only a `SystemActor` is taken without an account: a made-up admin `User` (no id) is refused."""
    made_up = User(username="cli", role="admin", is_active=True)
    for call in (
        lambda: list_snapshots(people, actor=made_up),
        lambda: list_assignments(people, actor=made_up, kind=AssignmentKind.label),
        lambda: freeze_snapshot(people, actor=made_up, name="q1", payload={"models": []}),
        lambda: draw_calibration_sample(people, actor=made_up, model="model-a", n=1, seed=1),
    ):
        with pytest.raises(PermissionDenied):
            call()
        people.rollback()


def test_readers_that_name_models_take_an_actor_and_are_for_admins(people):
    from db.work.calibration import response_models, sampled_models
    from db.work.disagreements import drawn_counts
    from db.work.generation import generated_models

    admin, annotator = _detached(people, "boss"), _detached(people, "ann1")
    readers = (
        lambda actor: response_models(people, actor=actor),
        lambda actor: sampled_models(people, actor=actor),
        lambda actor: drawn_counts(people, actor=actor),
        lambda actor: generated_models(people, actor=actor),
    )
    assert [reader(admin) for reader in readers] == [["model-a"], {}, {}, []]
    for reader in readers:
        with pytest.raises(PermissionDenied):
            reader(annotator)


def test_every_workflow_reads_its_actor_from_the_database(people):
    """Labeling, check, rubric authoring, progress, judge runs and the audit log: each refuses the object of an
    account the database has deactivated since, though the object still says it is active."""
    from db.access.audit_search import search_audit
    from db.labeling.annotation import labeling_queue
    from db.review.label_check import check_queue
    from db.rubrics.authoring import returned_to_author
    from db.work.judge_runs import list_runs
    from db.work.progress import model_names, my_progress, progress

    make_user(people, "chk1", "checker", 1)
    people.commit()
    objects = {name: _detached(people, name) for name in ("boss", "ann1", "chk1")}
    annotator_id = objects["ann1"].id
    calls = {
        "boss": (
            lambda u: progress(people, actor=u),
            lambda u: model_names(people, actor=u),
            lambda u: list_runs(people, u),
            lambda u: search_audit(people, u),
        ),
        "ann1": (
            lambda u: labeling_queue(people, u),
            lambda u: my_progress(people, u),
            lambda u: returned_to_author(people, u),
        ),
        "chk1": (lambda u: check_queue(people, u, annotator_id=annotator_id),),
    }
    for name, readers in calls.items():  # allowed while the account is active
        for reader in readers:
            reader(objects[name])
    people.execute(update(User).values(is_active=False))
    people.commit()
    for name, readers in calls.items():
        assert objects[name].is_active  # the caller's object still says so
        for reader in readers:
            with pytest.raises(PermissionDenied):
                reader(objects[name])
            people.rollback()


def test_a_demoted_admin_object_is_refused_the_admin_workflows(people):
    from db.access.audit_search import search_audit
    from db.work.judge_runs import list_runs
    from db.work.progress import model_names, progress

    stale = _detached(people, "boss")
    people.execute(update(User).where(User.username == "boss").values(role="annotator", group_no=1))
    people.commit()
    for call in (
        lambda: progress(people, actor=stale),
        lambda: model_names(people, actor=stale),
        lambda: list_runs(people, stale),
        lambda: search_audit(people, stale),
    ):
        with pytest.raises(PermissionDenied):
            call()
        people.rollback()
