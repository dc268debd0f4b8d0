"""One policy per resource: each rule refuses exactly the wrong actors, with the catalog entry the pages show,
and no workflow in db/ decides a refusal of its own (they all ask `authorize(session, actor, Policy.action(...))`,
which reads the actor from the database first: tests/db/access/test_current_actor.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from db.access import policies
from db.access.policies import (
    AssignmentPolicy,
    DisagreementFiguresPolicy,
    FeedbackPolicy,
    LabelPolicy,
    RubricPolicy,
    StatisticsPolicy,
)
from db.rules.enums import Role
from db.store.models import User

ROOT = Path(__file__).resolve().parents[3]


def person(role: Role, group_no: int | None = 1, *, user_id: int = 7, active: bool = True) -> User:
    return User(id=user_id, username=f"{role}-{user_id}", role=role, group_no=group_no, is_active=active)


def refusal_key(actor: User, rule) -> str | None:
    """The rule's refusal for `actor` as given (these actors are not stored: the rule alone is under test)."""
    refusal = rule(actor)
    return refusal.key if refusal is not None else None


ADMIN, CHECKER, ANNOTATOR = person(Role.admin, None), person(Role.checker), person(Role.annotator)


@pytest.mark.parametrize(
    ("rule", "admitted"),
    [
        (AssignmentPolicy.manage(), {"admin"}),
        (StatisticsPolicy.see_group_figures(), {"admin"}),
        (RubricPolicy.author(), {"annotator"}),
        (RubricPolicy.audit(), {"checker"}),
        (LabelPolicy.annotate(), {"annotator"}),
        (LabelPolicy.check(), {"checker"}),
        (LabelPolicy.adjudicate(), {"checker"}),
        (FeedbackPolicy.receive(group_no=1), {"annotator"}),
        (DisagreementFiguresPolicy.read(), {"admin", "checker"}),
    ],
)
def test_each_rule_admits_its_roles_only(rule, admitted):
    for actor in (ADMIN, CHECKER, ANNOTATOR):
        assert (refusal_key(actor, rule) is None) == (str(actor.role) in admitted), actor.role


def test_an_inactive_account_is_refused_by_every_rule():
    for role in Role:
        asleep = person(role, active=False)
        assert refusal_key(asleep, LabelPolicy.read_checks()) == "errors.account_inactive"
        assert refusal_key(asleep, AssignmentPolicy.manage()) == "errors.account_inactive"
        assert refusal_key(asleep, policies.active()) == "errors.account_inactive"


def test_separation_of_duties_and_groups():
    assert refusal_key(CHECKER, LabelPolicy.check(annotator_id=CHECKER.id)) == "errors.check_own"
    assert refusal_key(CHECKER, LabelPolicy.check(annotator_id=CHECKER.id + 1)) is None
    assert refusal_key(person(Role.checker, None), LabelPolicy.check()) == "errors.checker_group"
    assert refusal_key(CHECKER, LabelPolicy.check(labels_closed=True)) == "errors.seen_other_group"
    assert refusal_key(CHECKER, RubricPolicy.audit(author_id=CHECKER.id)) == "errors.audit_own"
    assert refusal_key(CHECKER, LabelPolicy.adjudicate(annotated_it=True)) == "errors.adjudicate_own"
    assert refusal_key(CHECKER, LabelPolicy.adjudicate(check_pending=True)) == "errors.check_pending"
    assert refusal_key(CHECKER, LabelPolicy.adjudicate(opened=False)) == "errors.adjudication_not_open"
    assert refusal_key(ANNOTATOR, LabelPolicy.annotate(group_no=2)) == "errors.other_group_hidden"
    assert refusal_key(person(Role.annotator, None), LabelPolicy.annotate()) == "errors.annotator_group"
    assert refusal_key(ANNOTATOR, LabelPolicy.annotate(assigned=False)) == "errors.response_not_assigned"
    assert refusal_key(ANNOTATOR, RubricPolicy.author(assigned=False)) == "errors.rubric_not_assigned"
    assert refusal_key(ANNOTATOR, DisagreementFiguresPolicy.read()) == "errors.other_group_hidden"
    assert refusal_key(person(Role.annotator, 3), FeedbackPolicy.receive(group_no=3)) == "errors.feedback_annotators"
    # Feedback freezes the round: annotation labels of an opened round change no more.
    assert refusal_key(ANNOTATOR, LabelPolicy.change_annotation(final=True)) == "errors.labels_final"
    assert refusal_key(ANNOTATOR, LabelPolicy.change_annotation(final=False)) is None
    # The role comes first: a checker asking to annotate hears about the role, not the group.
    assert refusal_key(CHECKER, LabelPolicy.annotate(group_no=2)) == "errors.role_may_not"


def refusals_decided_outside_policies() -> list[str]:
    """`PermissionDenied(...)` built anywhere in db/ but the policies module."""
    found = []
    for path in sorted((ROOT / "db").rglob("*.py")):
        if path == ROOT / "db" / "access" / "policies.py" or "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "PermissionDenied":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def refusal_classes_outside_policies() -> list[str]:
    """Classes in db/ but the policies module that derive from PermissionDenied (directly or through another such
    class): a refusal of its own class is a refusal decided outside the policies, however it is built."""
    refusal_names = {"PermissionDenied"}
    classes: list[tuple[Path, ast.ClassDef]] = []
    for path in sorted((ROOT / "db").rglob("*.py")):
        if "migrations" not in path.parts:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            classes += [(path, node) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    grown = True
    while grown:  # subclasses of subclasses, wherever they are defined
        before = len(refusal_names)
        for _, node in classes:
            bases = {getattr(base, "id", getattr(base, "attr", None)) for base in node.bases}
            if bases & refusal_names:
                refusal_names.add(node.name)
        grown = len(refusal_names) > before
    policies_path = ROOT / "db" / "access" / "policies.py"
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
        for path, node in classes
        if node.name in refusal_names - {"PermissionDenied"} and path != policies_path
    ]


def test_every_refusal_in_db_is_a_policys():
    assert refusals_decided_outside_policies() == []
    assert refusal_classes_outside_policies() == []
