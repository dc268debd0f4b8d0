"""Labeling work in progress: unjudged criteria, drafts per (user, response), time on task — on both databases."""

from __future__ import annotations

import statistics

import pytest
from sqlalchemy import update
from sqlmodel import func, select

from db import counts, labeling, labels as label_room
from db.label_rows.refusals import RubricChanged, UnjudgedCriteria
from db.labeling import drafts as label_drafts
from db.labeling.annotation import LabelInput
from db.rules.enums import RubricStatus
from db.rules.errors import PermissionDenied, ValidationFailed
from db.rules.notes import MAX_NOTE_CHARS
from db.store.models import Assignment, Draft, Label, LabelTiming
from tests.support.factories import make_case, make_label, make_response, make_rubric, make_user
from tests.support.page_save import as_sent

N = 30
IDS = [f"c{i:02d}" for i in range(1, N + 1)]


def assign(session, user, case, response):
    session.add(
        Assignment(kind="label", case_pk=case.id, user_id=user.id, group_no=user.group_no, response_id=response.id)
    )
    counts.refresh_assignments(session, [response.id])


@pytest.fixture
def world(session):
    g1 = make_user(session, "ann1", "annotator", 1)
    other = make_user(session, "ann1b", "annotator", 1)
    g2 = make_user(session, "ann2", "annotator", 2)
    admin = make_user(session, "boss", "admin", None)
    case = make_case(session, "CC-0001")
    first = make_response(session, case, "secret-model-x", "第一份回答")
    second = make_response(session, case, "secret-model-y", "第二份回答")
    for user in (g1, g2):
        assign(session, user, case, first)
        assign(session, user, case, second)
    session.commit()
    return dict(g1=g1, other=other, g2=g2, admin=admin, case=case, first=first, second=second)


def label_count(session, response_id) -> int:
    return session.exec(select(func.count()).select_from(Label).where(Label.response_id == response_id)).one()


def test_a_new_response_opens_with_every_criterion_unjudged(session, world):
    bench = label_drafts.open_response(session, world["g1"], world["first"].id)
    assert list(bench.decisions) == IDS
    assert set(bench.decisions.values()) == {None}
    assert bench.unjudged == N and not bench.unsaved and bench.active_ms == 0


def test_saving_with_unjudged_criteria_is_refused_and_names_how_many(session, world):
    g1, first = world["g1"], world["first"]
    bench = label_drafts.open_response(session, g1, first.id)
    with pytest.raises(UnjudgedCriteria) as refused:
        label_drafts.save(
            session,
            g1,
            first.id,
            rubric_version_id=bench.view.rubric_version_id,
            decisions=bench.decisions,
            expected_versions=bench.view.expected_versions,
        )
    assert refused.value.count == N and "30" in str(refused.value)
    partly = dict(bench.decisions, c01=True, c02=False, c03=True)
    with pytest.raises(UnjudgedCriteria) as refused:
        label_drafts.save(
            session,
            g1,
            first.id,
            rubric_version_id=bench.view.rubric_version_id,
            decisions=partly,
            expected_versions=bench.view.expected_versions,
        )
    assert refused.value.count == N - 3
    session.rollback()
    assert label_count(session, first.id) == 0


def test_each_decision_is_kept_and_a_reopened_response_shows_its_draft_as_unsaved(session, world):
    g1, first = world["g1"], world["first"]
    bench = label_drafts.open_response(session, g1, first.id)
    working = dict(bench.decisions)
    for i, cid in enumerate(IDS[:15]):
        working[cid] = True
        label_drafts.keep_draft(
            session,
            g1,
            first.id,
            rubric_version_id=bench.view.rubric_version_id,
            decisions=working,
            notes={"c02": "  提到了  "},
            active_ms=1000 * (i + 1),
        )
        session.commit()
    # a "crash": a new session reads what the last decision left
    session.expire_all()
    reopened = label_drafts.open_response(session, g1, first.id)
    assert reopened.unsaved and reopened.unjudged == 15
    assert [cid for cid, v in reopened.decisions.items() if v is True] == IDS[:15]
    assert reopened.notes == {"c02": "提到了"} and reopened.active_ms == 15_000
    assert reopened.draft_at is not None
    # drafts are private: another annotator of the same group sees nothing of it
    assert not label_drafts.open_response(session, world["g2"], first.id).unsaved
    # and nothing was saved as a label
    assert label_count(session, first.id) == 0


def test_save_stores_exactly_the_decisions_drops_the_draft_and_records_time(session, world):
    g1, first = world["g1"], world["first"]
    bench = label_drafts.open_response(session, g1, first.id)
    working = {cid: i < 15 for i, cid in enumerate(IDS)}
    label_drafts.keep_draft(
        session, g1, first.id, rubric_version_id=bench.view.rubric_version_id, decisions=working, active_ms=42_000
    )
    session.commit()
    outcome = label_drafts.save(
        session,
        g1,
        first.id,
        rubric_version_id=bench.view.rubric_version_id,
        decisions=working,
        expected_versions=bench.view.expected_versions,
        active_ms=45_000,
    )
    session.commit()
    assert outcome.created == N
    saved = {cid: label.met for cid, label in labeling.labels_for(session, g1, first.id, 1).items()}
    assert saved == working
    assert session.exec(select(Draft).where(Draft.user_id == g1.id)).all() == []
    timing = session.exec(select(LabelTiming)).one()
    assert (timing.user_id, timing.response_id, timing.active_ms, timing.n_criteria) == (g1.id, first.id, 45_000, N)
    # reopened: the saved labels, nothing unsaved
    reopened = label_drafts.open_response(session, g1, first.id)
    assert reopened.decisions == working and not reopened.unsaved and reopened.unjudged == 0
    # the same decisions again change nothing and are not new work
    again = label_drafts.save(
        session,
        g1,
        first.id,
        rubric_version_id=reopened.view.rubric_version_id,
        decisions=working,
        expected_versions=reopened.view.expected_versions,
        active_ms=1,
    )
    session.commit()
    assert again.changed == 0
    assert session.exec(select(func.count()).select_from(LabelTiming)).one() == 1


def test_a_draft_against_an_older_rubric_is_not_shown_and_stale_labels_open_unjudged(session, world):
    g1, case, first = world["g1"], world["case"], world["first"]
    bench = label_drafts.open_response(session, g1, first.id)
    for cid in IDS:
        make_label(session, first, cid, True, g1)
    session.exec(update(Label).values(rubric_version_id=bench.view.rubric_version_id))
    label_drafts.keep_draft(
        session, g1, first.id, rubric_version_id=bench.view.rubric_version_id, decisions=dict.fromkeys(IDS, False)
    )
    session.commit()
    make_rubric(session, case, status=RubricStatus.approved, version=2)
    session.commit()
    reopened = label_drafts.open_response(session, g1, first.id)
    assert reopened.view.rubric_version == 2
    assert not reopened.unsaved and reopened.unjudged == N  # old labels are stale: judged again
    with pytest.raises(RubricChanged):
        label_drafts.keep_draft(
            session, g1, first.id, rubric_version_id=bench.view.rubric_version_id, decisions={"c01": True}
        )


def test_drafts_check_who_is_asking_and_what_is_sent(session, world):
    g1, other, first = world["g1"], world["other"], world["first"]
    version = label_drafts.open_response(session, g1, first.id).view.rubric_version_id
    with pytest.raises(PermissionDenied):  # same group, not assigned
        label_drafts.keep_draft(session, other, first.id, rubric_version_id=version, decisions={"c01": True})
    with pytest.raises(PermissionDenied):
        label_drafts.open_response(session, world["admin"], first.id)
    with pytest.raises(ValidationFailed):
        label_drafts.keep_draft(session, g1, first.id, rubric_version_id=version, decisions={"zz": True})
    with pytest.raises(ValidationFailed):
        label_drafts.keep_draft(session, g1, first.id, rubric_version_id=version, decisions={"c01": "yes"})
    with pytest.raises(ValidationFailed):
        label_drafts.keep_draft(
            session,
            g1,
            first.id,
            rubric_version_id=version,
            decisions={"c01": True},
            notes={"c01": "x" * (MAX_NOTE_CHARS + 1)},
        )
    session.rollback()
    assert session.exec(select(func.count()).select_from(Draft)).one() == 0


def test_discard_goes_back_to_the_saved_labels(session, world):
    g1, first = world["g1"], world["first"]
    version = label_drafts.open_response(session, g1, first.id).view.rubric_version_id
    label_drafts.keep_draft(session, g1, first.id, rubric_version_id=version, decisions={"c01": True})
    assert label_drafts.discard(session, g1, first.id)
    assert not label_drafts.open_response(session, g1, first.id).unsaved


def test_time_on_task_medians_and_fast_saves_match_an_independent_count(session, world):
    g1, g2, admin = world["g1"], world["g2"], world["admin"]
    times = [(g1, [(world["first"], 90_000), (world["second"], 20_000)]), (g2, [(world["first"], 61_000)])]
    for user, items in times:
        for response, active in items:
            view = labeling.response_for_labeling(session, user, response.id)
            label_drafts.save(
                session,
                user,
                response.id,
                rubric_version_id=view.rubric_version_id,
                decisions=dict.fromkeys(IDS, True),
                expected_versions=view.expected_versions,
                active_ms=active,
            )
    session.commit()
    summary = {row.username: row for row in label_drafts.time_on_task(session, actor=admin)}
    assert summary["ann1"].saves == 2 and summary["ann1"].median_seconds == statistics.median([90, 20])
    assert summary["ann1"].median_ms_per_criterion == pytest.approx(statistics.median([3000, 20_000 / 30]))
    assert summary["ann1"].fast_saves == 1  # 20 s for 30 criteria is under a second each
    assert summary["ann2"].fast_saves == 0 and summary["ann2"].median_seconds == 61
    with pytest.raises(PermissionDenied):
        label_drafts.time_on_task(session, actor=g1)


def test_saving_through_labeling_still_requires_every_criterion(session, world):
    # The older entry point keeps refusing incomplete decisions too (one rule: one decision per criterion).
    g1, first = world["g1"], world["first"]
    view = labeling.response_for_labeling(session, g1, first.id)
    with pytest.raises(ValidationFailed):
        label_room.save(
            session,
            g1,
            "annotation",
            first.id,
            **as_sent([LabelInput("c01", True)]),
            rubric_version_id=view.rubric_version_id,
            expected_versions={},
        )
