"""Drafts on the author's side and the provenance of submitted criteria (db/rubrics, docs/REFERENCE.md §4.3).

Called as the data layer is called by pages, and as the wrong user: only the assigned author receives a
draft; only checkers and admins read origins; labelers receive criteria, never their origin.
"""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import review, rubrics
from db.rubrics.authoring import CriterionInput, default_criterion_ids
from db.rubrics.provenance import provenance_rows, version_provenance
from db.rules.drafting import edit_distance
from db.rules.errors import PermissionDenied, ValidationFailed
from db.store.models import AuditLog, CriterionProvenance
from db.work.drafting import Drafted, store_drafts
from tests.db.rubrics.test_rubrics import assign
from tests.support.factories import make_case, make_user

N = 30
DRAFTED = [f"第{i}条：回答应说明本病例第{i}项具体处理要点" for i in range(1, N + 1)]


def put_draft(session, case, generator="gen-a", texts=DRAFTED):
    store_drafts(
        session,
        None,
        generator,
        "test",
        [
            Drafted(
                f"key-{case.id}-{generator}", case.id, case.case_id, True, [{"criterion": t, "tags": []} for t in texts]
            )
        ],
    )
    session.commit()


@pytest.fixture
def drafted(session):
    author = make_user(session, "anna", "annotator", 1)
    other = make_user(session, "otto", "annotator", 2)
    checker = make_user(session, "chen", "checker", 2)
    admin = make_user(session, "root", "admin")
    case = make_case(session, "CC-0100", n=0, subject_labels=["心内科"])
    assign(session, author, case)
    session.commit()
    put_draft(session, case)
    return author, other, checker, admin, case


def test_only_the_assigned_author_receives_the_draft(session, drafted):
    author, other, checker, admin, case = drafted
    offered = rubrics.offered_draft(session, author, case.id)
    assert offered is not None and offered.generator == "gen-a" and offered.texts() == DRAFTED
    for wrong in (other, checker, admin):
        with pytest.raises(PermissionDenied) as refused:
            rubrics.offered_draft(session, wrong, case.id)
        assert "gen-a" not in str(refused.value) and DRAFTED[0] not in str(refused.value)


def test_submission_records_each_origin_and_the_auditor_reads_them(session, drafted):
    author, other, checker, admin, case = drafted
    offered = rubrics.offered_draft(session, author, case.id)
    texts = list(DRAFTED)
    texts[0] = DRAFTED[0] + "及剂量"  # edited (3 characters added)
    texts[1] = DRAFTED[1].replace("具体", "")  # edited (2 removed)
    texts[2], texts[3] = texts[3], texts[2]  # reordered: still drafted
    texts[4] = "询问患者既往是否有消化道出血病史"  # written; draft 5 deleted
    ids = default_criterion_ids(N)
    version = rubrics.save_rubric_draft(
        session,
        author,
        case.id,
        [CriterionInput(cid, text) for cid, text in zip(ids, texts, strict=True)],
        base_version_id=None,
        expected_lock=None,
        from_draft=offered.id,
    )
    rubrics.submit_rubric(session, author, version.id, expected_lock=version.lock_version)
    session.commit()
    rows = session.exec(select(CriterionProvenance).order_by(CriterionProvenance.id)).all()
    by_id = {row.criterion_id: row for row in rows}
    assert by_id["c01"].origin == "edited" and by_id["c01"].edit_distance == edit_distance(texts[0], DRAFTED[0]) == 3
    assert by_id["c02"].origin == "edited" and by_id["c02"].edit_distance == 2
    assert by_id["c03"].origin == by_id["c04"].origin == "drafted"
    assert by_id["c05"].origin == "written" and by_id["c05"].generator is None
    deleted = [row for row in rows if row.origin == "deleted"]
    assert [row.drafted_text for row in deleted] == [DRAFTED[4]] and deleted[0].criterion_id is None
    assert sum(row.origin == "drafted" for row in rows) == N - 3

    view = review.rubric_for_review(session, checker, version.id)
    assert view.origins["c01"].origin == "edited" and view.origins["c01"].generator == "gen-a"
    assert [row.drafted_text for row in view.deleted_drafts] == [DRAFTED[4]]
    assert len(version_provenance(session, admin, version.id)) == N + 1
    for wrong in (author, other):
        with pytest.raises(PermissionDenied):
            version_provenance(session, wrong, version.id)

    entry = session.exec(select(AuditLog).where(AuditLog.action == "submit")).one()
    assert sum(row["origin"] == "edited" for row in entry.after["provenance"]) == 2

    summary = provenance_rows(session)
    assert len(summary) == N + 1 and {row.author for row in summary} == {"anna"}
    assert {row.generator for row in summary} == {"gen-a"} and summary[0].subject_labels == ["心内科"]


def test_a_revision_after_a_return_keeps_the_draft(session, drafted):
    author, other, checker, admin, case = drafted
    offered = rubrics.offered_draft(session, author, case.id)
    ids = default_criterion_ids(N)
    inputs = [CriterionInput(cid, text) for cid, text in zip(ids, DRAFTED, strict=True)]
    v1 = rubrics.save_rubric_draft(
        session, author, case.id, inputs, base_version_id=None, expected_lock=None, from_draft=offered.id
    )
    v1 = rubrics.submit_rubric(session, author, v1.id, expected_lock=v1.lock_version)
    review.return_rubric(session, checker, v1.id, seen_lock_version=v1.lock_version, comment="请细化第一条")
    session.commit()
    inputs[0] = CriterionInput("c01", "全新写的一条：说明需要立即拨打急救电话的情形")
    v2 = rubrics.save_rubric_draft(
        session, author, case.id, inputs, base_version_id=v1.id, expected_lock=v1.lock_version + 1
    )
    v2 = rubrics.submit_rubric(session, author, v2.id, expected_lock=v2.lock_version)
    session.commit()
    assert rubrics.offered_draft(session, author, case.id).id == offered.id
    origins = {row.criterion_id: row.origin for row in version_provenance(session, checker, v2.id)}
    assert origins["c01"] == "written" and list(origins.values()).count("drafted") == N - 1
    summary = provenance_rows(session)
    assert len(summary) == N + 1, "only the newest submitted version of the case counts"


def test_a_draft_of_another_case_is_refused_and_nothing_changes(session, drafted):
    author, other, checker, admin, case = drafted
    elsewhere = make_case(session, "CC-0200", n=0)
    session.commit()
    put_draft(session, elsewhere, generator="gen-b")
    foreign = rubrics.offered_draft(session, author, case.id)
    assert foreign is not None
    from db.store.models import RubricDraft

    other_draft = session.exec(select(RubricDraft).where(RubricDraft.case_pk == elsewhere.id)).one()
    with pytest.raises(ValidationFailed, match="not a draft of this case"):
        rubrics.save_rubric_draft(
            session,
            author,
            case.id,
            [CriterionInput(cid, "x" * 10) for cid in default_criterion_ids(N)],
            base_version_id=None,
            expected_lock=None,
            from_draft=other_draft.id,
        )
    session.rollback()
    assert rubrics.latest_version(session, case.id) is None
