"""Returned rubrics: "returned to you (N comments)" on home and sidebar, a confirmation before resubmitting
commented criteria unchanged, comments beside their criterion."""

from __future__ import annotations

from sqlmodel import select

from db import rubrics
from db.rubrics.authoring import CriterionInput, default_criterion_ids
from db.rules.enums import RubricStatus
from db.store.engine import session_scope
from db.store.models import Criterion, RubricVersion, User
from i18n import translate
from tests.pages.test_annotate_pages import clean_texts, editor_frame, save_version, studio  # noqa: F401
from tests.support.apptest_helpers import app_database, button, open_page, signed_in, texts  # noqa: F401
from tests.support.factories import make_case, make_user

N = 30


def zh(key, **values):
    return translate(key, "zh", **values)


def _return(engine, draft_id: int, comments: dict[str, str], overall: str | None = "整体过于笼统") -> None:
    with session_scope(engine) as session:
        version = session.get(RubricVersion, draft_id)
        version.status, version.review_comment = RubricStatus.returned, overall
        for criterion in session.exec(select(Criterion).where(Criterion.rubric_version_id == draft_id)).all():
            if criterion.criterion_id in comments:
                criterion.review_comment = comments[criterion.criterion_id]
                session.add(criterion)


def test_returned_work_counts_rubrics_and_comments(session):
    author = make_user(session, "ann1", "annotator", 1)
    other = make_user(session, "ann2", "annotator", 1)
    from db.store.models import Assignment

    for n in (1, 2):
        case = make_case(session, f"CC-000{n}", n=N, status=RubricStatus.returned if n == 1 else RubricStatus.submitted)
        session.add(Assignment(kind="rubric", case_pk=case.id, user_id=author.id, group_no=1))
    session.flush()
    assert rubrics.returned_to_author(session, author) == rubrics.ReturnedWork(1, 0)
    version = session.exec(select(RubricVersion).order_by(RubricVersion.id)).first()
    version.review_comment = "请补充"
    for criterion in session.exec(select(Criterion).where(Criterion.rubric_version_id == version.id)).all()[:3]:
        criterion.review_comment = "请具体化"
        session.add(criterion)
    session.add(version)
    session.flush()
    assert rubrics.returned_to_author(session, author) == rubrics.ReturnedWork(1, 4)
    assert rubrics.returned_to_author(session, other) == rubrics.ReturnedWork(0, 0)


def test_home_and_sidebar_say_returned_to_you_and_resubmitting_unchanged_asks_first(studio):  # noqa: F811
    draft = save_version(studio, clean_texts())
    _return(studio, draft.id, {"c03": "请写明药物名称", "c05": "请给出时间"})
    app = open_page(signed_in(studio, "ann1"), "home")
    notice = zh("workbench.returned_to_you", n=1, comments=3)
    assert notice in [w.value for w in app.warning]
    assert notice in [w.value for w in app.sidebar.warning]

    app = open_page(app, "annotate-rubrics")
    frame = editor_frame(app)
    # the number column first (a criterion moves by its number), then the comment beside its criterion
    assert list(frame.columns[:4]) == ["order", "criterion_id", "text", "review"]
    state = app.session_state[f"annotate_rubric_state_{draft.case_pk}"]
    state["rows"][2]["text"] = "说明应使用阿莫西林每次500毫克"  # c03 changed, c05 left as it was
    app = button(app, zh("annotate.authoring.submit")).click().run()
    assert zh("workbench.authoring.unchanged_commented", n=1, ids="c05") in [w.value for w in app.warning]
    with session_scope(studio, read_only=True) as session:
        statuses = session.exec(
            select(RubricVersion.status).where(RubricVersion.case_pk == draft.case_pk).order_by(RubricVersion.version)
        ).all()
    assert RubricStatus.submitted not in statuses  # nothing submitted yet; the edit is saved as a draft
    app = button(app, zh("workbench.authoring.submit_anyway")).click().run()
    with session_scope(studio, read_only=True) as session:
        newest = session.exec(
            select(RubricVersion).where(RubricVersion.case_pk == draft.case_pk).order_by(RubricVersion.version.desc())
        ).first()
        assert newest.status == RubricStatus.submitted
        texts_now = {
            c.criterion_id: c.text
            for c in rubrics.read_version(
                session, session.exec(select(User).where(User.username == "ann1")).one(), newest.id
            ).criteria
        }
    assert texts_now["c03"] == "说明应使用阿莫西林每次500毫克"
    assert zh("annotate.authoring.submitted", version=newest.version) in [s.value for s in app.success]


def test_unchanged_commented_is_empty_without_a_return():
    assert rubrics.unchanged_commented(None, [CriterionInput(cid, "x") for cid in default_criterion_ids(3)]) == []
