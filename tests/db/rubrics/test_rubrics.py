"""Rubric authoring in the data layer: drafts, versions, locking, submission rules, roles, audit."""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import counts, rubrics
from db.access.audit import verify_chain
from db.rubrics.authoring import CriterionInput, default_criterion_ids
from db.rules.enums import RubricStatus
from db.rules.errors import PermissionDenied, StaleEdit, ValidationFailed
from db.store.models import Assignment, AuditLog, RubricVersion
from tests.support.factories import make_case, make_user

N = 30


def assign(session, user, case, kind="rubric", response=None):
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


def clean_criteria(n=N, prefix="标准"):
    return [
        CriterionInput(
            cid, f"{prefix}{i}：回答明确说明第{i}项临床要点的具体内容", ["missing_emergency_trigger"] if i == 1 else []
        )
        for i, cid in enumerate(default_criterion_ids(n), start=1)
    ]


@pytest.fixture
def authoring(session):
    author = make_user(session, "anna", "annotator", 1)
    case = make_case(session, "CC-0100", n=0)
    assign(session, author, case)
    session.commit()
    return author, case


def test_first_save_creates_version_one_and_later_saves_update_it(session, authoring):
    author, case = authoring
    saved = rubrics.save_rubric_draft(
        session, author, case.id, clean_criteria(), base_version_id=None, expected_lock=None
    )
    session.commit()
    assert (saved.version, saved.status, saved.lock_version) == (1, RubricStatus.draft, 1)
    assert [c.criterion_id for c in saved.criteria] == default_criterion_ids(N)
    assert saved.criteria[0].tags == ["missing_emergency_trigger"]

    edited = clean_criteria()
    edited[4] = CriterionInput("c05", "改写后的第五条标准，内容足够具体", [])
    again = rubrics.save_rubric_draft(session, author, case.id, edited, base_version_id=saved.id, expected_lock=1)
    session.commit()
    assert (again.id, again.version, again.lock_version) == (saved.id, 1, 2)
    assert again.criteria[4].text == "改写后的第五条标准，内容足够具体"
    # an identical save changes nothing
    same = rubrics.save_rubric_draft(session, author, case.id, edited, base_version_id=saved.id, expected_lock=2)
    assert same.lock_version == 2
    entries = session.exec(select(AuditLog).where(AuditLog.entity == "rubric").order_by(AuditLog.id)).all()
    assert [e.action for e in entries] == ["create", "update"]
    assert entries[1].before["criteria"][4]["text"] != entries[1].after["criteria"][4]["text"]
    assert verify_chain(session).ok


def test_second_writer_with_old_lock_is_refused_and_shown_the_newer_version(session, authoring):
    author, case = authoring
    colleague = make_user(session, "bella", "annotator", 1)
    assign(session, colleague, case)
    first = rubrics.save_rubric_draft(
        session, author, case.id, clean_criteria(), base_version_id=None, expected_lock=None
    )
    session.commit()
    rubrics.save_rubric_draft(
        session, colleague, case.id, clean_criteria(prefix="同事"), base_version_id=first.id, expected_lock=1
    )
    session.commit()
    with pytest.raises(StaleEdit) as error:
        rubrics.save_rubric_draft(
            session, author, case.id, clean_criteria(prefix="作者"), base_version_id=first.id, expected_lock=1
        )
    session.rollback()
    assert error.value.current.lock_version == 2
    assert error.value.current.criteria[0].text.startswith("同事")
    # a page that believed no version existed is refused too
    with pytest.raises(StaleEdit):
        rubrics.save_rubric_draft(session, author, case.id, clean_criteria(), base_version_id=None, expected_lock=None)


def test_submit_is_blocked_by_errors_and_allowed_when_clean(session, authoring):
    author, case = authoring
    broken = clean_criteria()
    broken[3] = CriterionInput("c04", "", [])
    broken[7] = CriterionInput("c08", broken[2].text, [])
    draft = rubrics.save_rubric_draft(session, author, case.id, broken, base_version_id=None, expected_lock=None)
    session.commit()
    with pytest.raises(ValidationFailed, match="criterion 4"):
        rubrics.submit_rubric(session, author, draft.id, expected_lock=draft.lock_version)
    session.rollback()
    assert session.get(RubricVersion, draft.id).status == RubricStatus.draft

    fixed = rubrics.save_rubric_draft(
        session, author, case.id, clean_criteria(), base_version_id=draft.id, expected_lock=draft.lock_version
    )
    submitted = rubrics.submit_rubric(session, author, fixed.id, expected_lock=fixed.lock_version)
    session.commit()
    assert submitted.status == RubricStatus.submitted and submitted.submitted_at is not None
    # a submitted rubric waits for the checker
    with pytest.raises(ValidationFailed, match="submitted"):
        rubrics.save_rubric_draft(
            session, author, case.id, clean_criteria(), base_version_id=fixed.id, expected_lock=submitted.lock_version
        )


def test_returned_rubric_keeps_comments_and_the_next_edit_makes_a_new_version(session, authoring):
    author, case = authoring
    draft = rubrics.save_rubric_draft(
        session, author, case.id, clean_criteria(), base_version_id=None, expected_lock=None
    )
    submitted = rubrics.submit_rubric(session, author, draft.id, expected_lock=draft.lock_version)
    # what the checker's return does to the tables
    version = session.get(RubricVersion, submitted.id)
    version.status, version.review_comment, version.lock_version = (
        RubricStatus.returned,
        "第3条过于笼统",
        version.lock_version + 1,
    )
    from db.store.models import Criterion

    third = session.exec(
        select(Criterion).where(Criterion.rubric_version_id == version.id, Criterion.criterion_id == "c03")
    ).one()
    third.review_comment = "请写明具体药物"
    session.commit()

    view = rubrics.authoring_view(session, author, case.id)
    assert view.returned.id == version.id and view.returned.review_comment == "第3条过于笼统"
    assert view.returned.criteria[2].review_comment == "请写明具体药物"

    edited = clean_criteria()
    edited[2] = CriterionInput("c03", "说明应停用阿司匹林并改用氯吡格雷", [])
    second = rubrics.save_rubric_draft(
        session, author, case.id, edited, base_version_id=version.id, expected_lock=version.lock_version
    )
    session.commit()
    assert second.version == 2 and second.status == RubricStatus.draft and second.id != version.id
    old = rubrics.read_version(session, author, version.id)
    assert old.status == RubricStatus.returned and old.criteria[2].text.startswith("标准3")
    view = rubrics.authoring_view(session, author, case.id)
    assert view.latest.id == second.id and view.returned.id == version.id
    assert [h.version for h in view.history] == [2, 1]


def test_bad_input_is_refused_and_names_the_criterion(session, authoring):
    author, case = authoring
    short = clean_criteria()[:29]
    with pytest.raises(ValidationFailed, match="29 criteria"):
        rubrics.save_rubric_draft(session, author, case.id, short, base_version_id=None, expected_lock=None)
    tagged = clean_criteria()
    tagged[5] = CriterionInput("c06", "某条标准内容", ["not_a_tag"])
    with pytest.raises(ValidationFailed, match="criterion 6 \\(c06\\): unknown tag"):
        rubrics.save_rubric_draft(session, author, case.id, tagged, base_version_id=None, expected_lock=None)
    doubled = clean_criteria()
    doubled[1] = CriterionInput("c01", "内容", [])
    with pytest.raises(ValidationFailed, match="used twice"):
        rubrics.save_rubric_draft(session, author, case.id, doubled, base_version_id=None, expected_lock=None)
    session.rollback()
    assert session.exec(select(RubricVersion)).all() == []


@pytest.mark.parametrize("who", ["other_annotator", "checker", "admin", "inactive"])
def test_only_the_assigned_active_annotator_may_author(session, authoring, who):
    author, case = authoring
    draft = rubrics.save_rubric_draft(
        session, author, case.id, clean_criteria(), base_version_id=None, expected_lock=None
    )
    session.commit()
    if who == "other_annotator":
        intruder = make_user(session, "olga", "annotator", 2)
    elif who == "checker":
        intruder = make_user(session, "chen", "checker", 1)
        assign(session, intruder, case)
    elif who == "admin":
        intruder = make_user(session, "root", "admin")
    else:
        intruder = author
        intruder.is_active = False
    with pytest.raises(PermissionDenied):
        rubrics.authoring_view(session, intruder, case.id)
    with pytest.raises(PermissionDenied):
        rubrics.read_version(session, intruder, draft.id)
    with pytest.raises(PermissionDenied):
        rubrics.save_rubric_draft(
            session, intruder, case.id, clean_criteria(), base_version_id=draft.id, expected_lock=1
        )
    with pytest.raises(PermissionDenied):
        rubrics.submit_rubric(session, intruder, draft.id, expected_lock=1)
