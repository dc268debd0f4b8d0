"""Assignments on SQLite and PostgreSQL: balance, one per group, never the author, idempotence, audit, roles."""

from __future__ import annotations

from collections import Counter

import pytest
from sqlmodel import select

from db.access.audit import verify_chain
from db.labeling import draft_store as drafts
from db.rules.enums import AssignmentKind, RubricStatus, Stage
from db.rules.errors import PermissionDenied, ValidationFailed
from db.store.models import Assignment, AuditLog, Case, Response
from db.work import assignments, progress as progress_queries
from tests.support.factories import make_case, make_label, make_response, make_user


@pytest.fixture
def team(session):
    """An admin, a checker and three annotators in each expert group."""
    people = {"admin": make_user(session, "boss", "admin"), "checker": make_user(session, "chk1", "checker", 1)}
    for group in (1, 2):
        for i in range(1, 4):
            people[f"g{group}a{i}"] = make_user(session, f"g{group}a{i}", "annotator", group)
    session.commit()
    return people


def _annotators(team) -> list[str]:
    return [u.username for key, u in team.items() if key.startswith("g")]


def _cases_with_responses(session, n_cases: int, models: int, author=None, prefix="CC") -> list:
    cases = []
    for i in range(n_cases):
        case = make_case(session, f"{prefix}-{i:03d}", n=3, author=author)
        for m in range(models):
            make_response(session, case, model=f"model-{m}")
        cases.append(case)
    session.commit()
    return cases


def _label_assignments(session) -> list[Assignment]:
    return list(session.exec(select(Assignment).where(Assignment.kind == AssignmentKind.label)).all())


def test_labeling_gives_each_response_one_annotator_per_group_balanced(session, team):
    _cases_with_responses(session, n_cases=6, models=3)
    summary = assignments.assign_labeling(session, actor=team["admin"], annotators=_annotators(team))
    session.commit()

    rows = _label_assignments(session)
    assert summary.created == 6 * 3 * 2 == len(rows)
    per_response_group = Counter((a.response_id, a.group_no) for a in rows)
    assert set(per_response_group.values()) == {1}
    assert len({a.response_id for a in rows}) == 18
    users_by_id = {u.id: u for u in team.values()}
    assert all(users_by_id[a.user_id].group_no == a.group_no for a in rows)
    load = Counter(users_by_id[a.user_id].username for a in rows)
    # 18 responses per group over 3 annotators: exactly 6 each.
    assert sorted(load.values()) == [6] * 6


def test_labeling_is_idempotent_and_fills_only_what_is_missing(session, team):
    cases = _cases_with_responses(session, n_cases=2, models=2)
    assignments.assign_labeling(session, actor=team["admin"], annotators=_annotators(team))
    session.commit()
    before = {(a.response_id, a.group_no): a.user_id for a in _label_assignments(session)}

    again = assignments.assign_labeling(session, actor=team["admin"], annotators=_annotators(team))
    session.commit()
    assert again.created == 0 and again.already_assigned == 8
    assert {(a.response_id, a.group_no): a.user_id for a in _label_assignments(session)} == before

    make_response(session, cases[0], model="model-new")
    session.commit()
    third = assignments.assign_labeling(session, actor=team["admin"], annotators=_annotators(team))
    session.commit()
    assert third.created == 2
    assert len(_label_assignments(session)) == 10


def test_labeling_balances_against_existing_load(session, team):
    _cases_with_responses(session, n_cases=2, models=1, prefix="OLD")
    # Only g1a1 and g2a1 at first: they carry 2 each.
    assignments.assign_labeling(session, actor=team["admin"], annotators=["g1a1", "g2a1"])
    session.commit()
    _cases_with_responses(session, n_cases=4, models=1, prefix="NEW")
    assignments.assign_labeling(session, actor=team["admin"], annotators=["g1a1", "g1a2", "g1a3"])
    session.commit()
    users_by_id = {u.id: u.username for u in team.values()}
    load = Counter(users_by_id[a.user_id] for a in _label_assignments(session) if a.group_no == 1)
    # 4 new responses go to the two idle annotators first: 2 + 2, g1a1 stays at 2.
    assert load == {"g1a1": 2, "g1a2": 2, "g1a3": 2}


def test_labeling_never_gives_a_case_to_its_rubric_author(session, team):
    author = team["g1a1"]
    _cases_with_responses(session, n_cases=3, models=4, author=author)
    summary = assignments.assign_labeling(session, actor=team["admin"], annotators=_annotators(team))
    session.commit()
    rows = _label_assignments(session)
    assert summary.created == 24
    assert author.id not in {a.user_id for a in rows}
    # The group still gets exactly one annotator per response, from the two others.
    assert Counter(a.group_no for a in rows) == {1: 12, 2: 12}


def test_labeling_reports_responses_without_an_eligible_annotator(session, team):
    _cases_with_responses(session, n_cases=1, models=2, author=team["g2a1"])
    summary = assignments.assign_labeling(session, actor=team["admin"], annotators=["g1a1", "g2a1"])
    session.commit()
    assert summary.created == 2  # group 1 only; the sole group-2 annotator is the author
    assert len(summary.unassignable) == 2 and all("group 2" in line for line in summary.unassignable)


def test_labeling_skips_cases_without_an_approved_rubric(session, team):
    draft_case = make_case(session, "DRAFT-1", n=3, status=RubricStatus.draft)
    response = make_response(session, draft_case)
    session.commit()
    summary = assignments.assign_labeling(session, actor=team["admin"], annotators=_annotators(team))
    assert summary.created == 0
    with pytest.raises(ValidationFailed, match="no approved rubric"):
        assignments.assign_labeling(
            session, actor=team["admin"], annotators=_annotators(team), response_ids=[response.id]
        )


def test_every_assignment_is_audited_and_the_chain_holds(session, team):
    _cases_with_responses(session, n_cases=2, models=2)
    before = len(session.exec(select(AuditLog)).all())
    assignments.assign_labeling(session, actor=team["admin"], annotators=_annotators(team))
    session.commit()
    entries = session.exec(select(AuditLog).where(AuditLog.entity == "assignment")).all()
    assert len(entries) == 8 and len(session.exec(select(AuditLog)).all()) == before + 8
    assert all(e.actor == "boss" and e.action == "assign" and e.after["user"] for e in entries)
    assert {e.after["group"] for e in entries} == {1, 2}
    assert verify_chain(session).ok


def test_only_admins_assign(session, team):
    _cases_with_responses(session, n_cases=1, models=1)
    for who in ("checker", "g1a1"):
        with pytest.raises(PermissionDenied):
            assignments.assign_labeling(session, actor=team[who], annotators=_annotators(team))
        with pytest.raises(PermissionDenied):
            assignments.assign_rubric_authoring(session, actor=team[who], annotators=["g1a1"], specialty="心内科")
    assert _label_assignments(session) == []


def test_assignees_must_be_active_annotators(session, team):
    _cases_with_responses(session, n_cases=1, models=1)
    with pytest.raises(ValidationFailed, match="chk1"):
        assignments.assign_labeling(session, actor=team["admin"], annotators=["g1a1", "chk1"])
    make_user(session, "gone", "annotator", 1, active=False)
    with pytest.raises(ValidationFailed, match="gone"):
        assignments.assign_labeling(session, actor=team["admin"], annotators=["gone"])


def test_rubric_authoring_by_specialty_is_balanced_and_idempotent(session, team):
    for i in range(5):
        make_case(session, f"CARD-{i}", n=0, subject="心内科", subject_labels=["心内科"])
    make_case(session, "NEURO-1", n=0, subject="神经内科", subject_labels=["神经内科"])
    make_case(session, "CARD-DONE", n=3, subject="心内科")  # already has an approved rubric
    session.commit()
    summary = assignments.assign_rubric_authoring(
        session, actor=team["admin"], annotators=["g1a1", "g2a1"], specialty="心内科"
    )
    session.commit()
    rows = session.exec(select(Assignment).where(Assignment.kind == AssignmentKind.rubric)).all()
    assert summary.created == 5 == len(rows)
    assert sorted(Counter(a.user_id for a in rows).values()) == [2, 3]
    assert any("CARD-DONE" in line for line in summary.unassignable)
    again = assignments.assign_rubric_authoring(
        session, actor=team["admin"], annotators=["g1a2"], case_ids=["CARD-0", "NEURO-1"]
    )
    session.commit()
    assert again.created == 1 and again.already_assigned == 1
    with pytest.raises(ValidationFailed, match="NOPE"):
        assignments.assign_rubric_authoring(session, actor=team["admin"], annotators=["g1a2"], case_ids=["NOPE"])


def test_assigned_rubric_author_is_excluded_from_labeling_that_case(session, team):
    case = make_case(session, "AUTH-1", n=0)
    session.commit()
    assignments.assign_rubric_authoring(session, actor=team["admin"], annotators=["g1a1"], case_ids=["AUTH-1"])
    from tests.support.factories import make_rubric

    make_rubric(session, case, n=3)  # approved, author not recorded on the version (e.g. imported)
    make_response(session, case)
    session.commit()
    assignments.assign_labeling(session, actor=team["admin"], annotators=["g1a1", "g1a2", "g2a1"])
    session.commit()
    assert team["g1a1"].id not in {a.user_id for a in _label_assignments(session)}


def test_reassign_keeps_group_refuses_author_and_is_audited(session, team):
    cases = _cases_with_responses(session, n_cases=1, models=1, author=team["g1a3"])
    assignments.assign_labeling(session, actor=team["admin"], annotators=["g1a1", "g2a1"])
    session.commit()
    (g1_row,) = [a for a in _label_assignments(session) if a.group_no == 1]
    with pytest.raises(ValidationFailed, match="group 1"):
        assignments.reassign(session, actor=team["admin"], assignment_id=g1_row.id, to_username="g2a2")
    with pytest.raises(ValidationFailed, match="authored"):
        assignments.reassign(session, actor=team["admin"], assignment_id=g1_row.id, to_username="g1a3")
    with pytest.raises(PermissionDenied):
        assignments.reassign(session, actor=team["g1a1"], assignment_id=g1_row.id, to_username="g1a2")
    assignments.reassign(session, actor=team["admin"], assignment_id=g1_row.id, to_username="g1a2")
    session.commit()
    session.refresh(g1_row)
    assert g1_row.user_id == team["g1a2"].id
    entry = session.exec(select(AuditLog).where(AuditLog.action == "reassign")).one()
    assert entry.before["user"] == "g1a1" and entry.after["user"] == "g1a2"
    assert cases[0].case_id in entry.entity_key


def test_my_queue_shows_codes_and_state_never_models(session, team):
    cases = _cases_with_responses(session, n_cases=1, models=2)
    assignments.assign_labeling(session, actor=team["admin"], annotators=["g1a1", "g2a1"])
    session.commit()
    queue = assignments.my_queue(session, team["g1a1"], "label")
    assert len(queue) == 2 and all(item["criteria"] == 3 and not item["done"] for item in queue)
    assert all("model" not in item for item in queue)
    first = queue[0]
    from db.store.models import Response

    response = session.get(Response, first["response_id"])
    assert first["code"] == response.code
    for cid in ("c01", "c02", "c03"):
        make_label(session, response, cid, True, team["g1a1"])
    make_label(session, response, "c01", False, team["g2a1"])
    session.commit()
    queue = {item["response_id"]: item for item in assignments.my_queue(session, team["g1a1"], "label")}
    assert queue[response.id]["done"] and queue[response.id]["labeled"] == 3
    mine = progress_queries.my_progress(session, team["g1a1"])
    assert (mine["assigned"], mine["done"]) == (2, 1)
    # the labeling figure is the labeling queue's (one definition), the rubric one counted apart
    label_items = assignments.my_queue(session, team["g1a1"], "label")
    assert (mine["label_assigned"], mine["label_done"]) == (len(label_items), sum(i["done"] for i in label_items))
    assert mine["rubric_assigned"] + mine["label_assigned"] == mine["assigned"]
    other = {item["response_id"]: item for item in assignments.my_queue(session, team["g2a1"], "label")}
    assert other[response.id]["labeled"] == 1 and not other[response.id]["done"]
    with pytest.raises(PermissionDenied):
        assignments.my_queue(session, team["checker"], "label")
    assert cases  # fixture used


def test_progress_per_person_group_overall_and_disagreements(session, team):
    _cases_with_responses(session, n_cases=1, models=1)
    assignments.assign_labeling(session, actor=team["admin"], annotators=["g1a1", "g2a1"])
    session.commit()
    from db.store.models import Response

    response = session.exec(select(Response)).one()
    for cid, g1, g2 in (("c01", True, True), ("c02", True, False), ("c03", False, True)):
        make_label(session, response, cid, g1, team["g1a1"])
        make_label(session, response, cid, g2, team["g2a1"])
    make_label(session, response, "c03", True, team["checker"], stage=Stage.adjudication)
    session.commit()

    state = progress_queries.progress(session, actor=team["admin"])
    people = {p["username"]: p for p in state.people}
    assert people["g1a1"]["label_assigned"] == 1 and people["g1a1"]["label_done"] == 1
    assert people["g1a2"]["label_assigned"] == 0
    assert {g["group"]: (g["label_done"], g["label_assigned"]) for g in state.groups} == {1: (1, 1), 2: (1, 1)}
    assert state.overall["responses"] == 1 and state.overall["label_done"] == 2
    assert state.overall["unresolved_disagreements"] == 1  # c02; c03 is adjudicated
    # A checker counts only the responses closed to them: this one waits in their group's check queue.
    assert progress_queries.unresolved_disagreement_count(session, team["checker"]) == 0
    with pytest.raises(PermissionDenied):
        progress_queries.unresolved_disagreement_count(session, team["g1a1"])
    with pytest.raises(PermissionDenied):
        progress_queries.progress(session, actor=team["checker"])


def test_drafts_round_trip_per_user(session, team):
    me, other = team["g1a1"], team["g1a2"]
    drafts.save_draft(session, me, "label:R1", {"c01": True, "note": "心电图"})
    drafts.save_draft(session, me, "label:R1", {"c01": False})
    session.commit()
    assert drafts.load_draft(session, me, "label:R1") == {"c01": False}
    assert drafts.load_draft(session, other, "label:R1") is None
    assert drafts.discard_draft(session, me, "label:R1") is True
    assert drafts.discard_draft(session, me, "label:R1") is False
    assert drafts.load_draft(session, me, "label:R1") is None
    with pytest.raises(ValidationFailed):
        drafts.save_draft(session, me, "", {})


def test_the_admin_list_is_the_first_assignments_in_case_response_group_order(session, team):
    """The list reads a page of cases (db.work.assignments.list_assignments); whatever the limit, it is the first
    rows of every assignment sorted plainly, for everyone and for one person, and cases without any are skipped."""
    _cases_with_responses(session, n_cases=9, models=3)
    # Cases created out of case-id order, and one case without assignments (no approved rubric) in the middle.
    _cases_with_responses(session, n_cases=3, models=2, prefix="CA")
    make_case(session, "CC-004x", n=0)  # no rubric: labeling skips it
    assignments.assign_labeling(session, actor=team["admin"], annotators=_annotators(team))
    session.commit()
    rows = session.exec(select(Assignment).where(Assignment.kind == AssignmentKind.label)).all()
    case_of = {case.id: case.case_id for case in session.exec(select(Case)).all()}
    code_of = {response.id: response.code for response in session.exec(select(Response)).all()}
    user_of = {user.id: user.username for user in team.values()}
    everything = sorted(
        (case_of[a.case_pk], code_of[a.response_id], a.group_no, a.id, user_of[a.user_id]) for a in rows
    )
    assert len(everything) == (9 * 3 + 3 * 2) * 2
    for limit in (1, 5, 7, 13, 200):
        for who in (None, "g1a2", "g2a1"):
            listed = assignments.list_assignments(
                session, actor=team["admin"], kind=AssignmentKind.label, username=who, limit=limit
            )
            expected = [row for row in everything if who is None or row[4] == who][:limit]
            assert [(r["case_id"], r["response"], r["group"], r["id"], r["user"]) for r in listed] == expected
    assert "CC-004x" not in {r["case_id"] for r in listed} and "CC-004x" in case_of.values()
    assert assignments.list_assignments(session, actor=team["admin"], kind=AssignmentKind.rubric) == []
    with pytest.raises(PermissionDenied):
        assignments.list_assignments(session, actor=team["g1a1"], kind=AssignmentKind.label)


def test_reassign_candidates_are_exactly_those_reassign_accepts(session, team):
    _cases_with_responses(session, n_cases=1, models=1, author=team["g1a3"])
    assignments.assign_labeling(session, actor=team["admin"], annotators=["g1a1", "g2a1"])
    session.commit()
    (g1_row,) = [a for a in _label_assignments(session) if a.group_no == 1]
    offered = assignments.reassign_candidates(session, actor=team["admin"], assignment_id=g1_row.id)
    # Same group, not the holder (g1a1), not the rubric's author (g1a3).
    assert offered == ["g1a2"]
    accepted = []
    for username in _annotators(team):
        try:
            with session.begin_nested():
                assignments.reassign(session, actor=team["admin"], assignment_id=g1_row.id, to_username=username)
                accepted.append(username)
                raise _Undo
        except (ValidationFailed, _Undo):
            pass
    assert sorted(set(accepted) - {"g1a1"}) == offered
    with pytest.raises(PermissionDenied):
        assignments.reassign_candidates(session, actor=team["g1a1"], assignment_id=g1_row.id)


class _Undo(Exception):
    """Rolls a trial reassignment back."""


def test_a_preview_says_what_the_assignment_creates_and_writes_nothing(session, team):
    _cases_with_responses(session, n_cases=3, models=2)
    audit_before = len(session.exec(select(AuditLog)).all())
    preview = assignments.assign_labeling(session, actor=team["admin"], annotators=_annotators(team), preview=True)
    session.commit()
    assert _label_assignments(session) == [] and len(session.exec(select(AuditLog)).all()) == audit_before
    done = assignments.assign_labeling(session, actor=team["admin"], annotators=_annotators(team))
    assert (preview.created, preview.per_user) == (done.created, done.per_user) and done.created == 12
    make_case(session, "NEW-1", n=0)
    session.commit()
    rubric = assignments.assign_rubric_authoring(
        session, actor=team["admin"], annotators=["g1a1"], case_ids=["NEW-1"], preview=True
    )
    assert (
        rubric.created == 1
        and not session.exec(select(Assignment).where(Assignment.kind == AssignmentKind.rubric)).all()
    )
