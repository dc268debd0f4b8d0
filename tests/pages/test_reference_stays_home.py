"""Reference answers reach only the case's rubric author, rubric auditors and admins (docs/REFERENCE.md §1).

Every case of the small demo gets a reference answer holding a sentinel; every page of every physician is
rendered and scanned (labeling, check, adjudication, feedback, home), as is the release export; the rules
themselves are called as the wrong user in db/.
"""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from analysis.exports.release import export_release
from db.access import users
from db.rubrics.references import reference_for, set_reference
from db.rules.enums import AssignmentKind, Role
from db.rules.errors import PermissionDenied
from db.store.engine import session_scope
from db.store.models import Assignment, Case, User
from demo import generator as demo
from tests.support.apptest_helpers import open_page, signed_in
from tests.support.language_leaks import shown_texts

SENTINEL = "哨兵参考答案"
#: The pages where a reference answer may be shown: the author's authoring page, the auditor's audit page.
MAY_SHOW = {"annotate-rubrics", "review-rubrics"}


@pytest.fixture
def sentinel_demo(app_database):
    demo.build_demo(app_database, scale="small", seed=7)
    with session_scope(app_database) as session:
        admin = users.get_user(session, username="admin")
        for case in session.exec(select(Case)).all():
            set_reference(session, admin, case.id, f"{SENTINEL}-{case.case_id}：先排除危重情况，再给出检查与处理。")
    return app_database


def _physicians(engine) -> list[str]:
    with session_scope(engine, read_only=True) as session:
        return list(
            session.exec(select(User.username).where(User.role != Role.admin, User.is_active == True)).all()  # noqa: E712
        )


def _pages_of(engine, username: str) -> list[str]:
    app = signed_in(engine, username)
    return sorted({info.get("url_pathname") or "home" for info in app._registered_pages.values()})


def test_no_physician_page_but_authoring_and_audit_shows_a_reference(sentinel_demo):
    scanned = 0
    for username in _physicians(sentinel_demo)[:6]:
        for url_path in _pages_of(sentinel_demo, username):
            if url_path in MAY_SHOW:
                continue
            app = open_page(signed_in(sentinel_demo, username), url_path)
            assert not app.exception, (username, url_path)
            shown = " ".join(item.text for item in shown_texts(app))
            assert SENTINEL not in shown, (username, url_path)
            scanned += 1
    assert scanned >= 10


def test_the_author_sees_their_case_and_the_auditor_theirs(sentinel_demo):
    with session_scope(sentinel_demo, read_only=True) as session:
        row = session.exec(
            select(Assignment.user_id, Assignment.case_pk).where(Assignment.kind == AssignmentKind.rubric)
        ).first()
        author = session.get(User, row[0])
    app = open_page(signed_in(sentinel_demo, author.username), "annotate-rubrics")
    assert not app.exception
    assert any(SENTINEL in item.text for item in shown_texts(app))


def test_the_release_carries_no_reference(sentinel_demo, tmp_path):
    export_release(sentinel_demo, tmp_path / "release")
    for path in (tmp_path / "release").rglob("*"):
        if path.is_file():
            assert SENTINEL not in path.read_text(encoding="utf-8", errors="replace"), path.name
    lines = (tmp_path / "release" / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines and all("reference_answer" not in json.loads(line) for line in lines)


def test_the_rules_refuse_the_wrong_annotator_alike_whether_or_not_a_reference_exists(session):
    from tests.support.factories import make_case, make_user

    admin = make_user(session, "boss", "admin")
    author = make_user(session, "writer", "annotator", 1)
    other = make_user(session, "reader", "annotator", 2)
    checker = make_user(session, "auditor", "checker", 1)
    with_reference = make_case(session, "CC-0001", n=3)
    without = make_case(session, "CC-0002", n=3)
    session.add(Assignment(kind=AssignmentKind.rubric, case_pk=with_reference.id, user_id=author.id, group_no=1))
    session.flush()
    set_reference(session, admin, with_reference.id, "只给作者看的参考答案")
    assert reference_for(session, author, with_reference.id) == "只给作者看的参考答案"
    assert reference_for(session, checker, with_reference.id) == "只给作者看的参考答案"
    assert reference_for(session, admin, without.id) is None
    refusals = []
    for case in (with_reference, without):
        with pytest.raises(PermissionDenied) as refused:
            reference_for(session, other, case.id)
        refusals.append((str(refused.value), refused.value.key))
    assert refusals[0] == refusals[1]  # the refusal tells nothing about the case
    with pytest.raises(PermissionDenied):
        set_reference(session, checker, with_reference.id, "检查员不能写")
    with pytest.raises(PermissionDenied):
        set_reference(session, author, with_reference.id, "作者不能写")
    session.rollback()
