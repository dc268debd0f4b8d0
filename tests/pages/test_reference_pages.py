"""The authoring page and reference answers through AppTest: the admin pastes or edits one (bad input refused with
one line, nothing changed), the author reads it with their own version's validation."""

from __future__ import annotations

import pytest
from sqlmodel import func, select

from db.rubrics.references import reference_for
from db.rules.enums import AssignmentKind
from db.store.engine import session_scope
from db.store.models import AnchorDecision, Assignment, AuditLog, ReferenceAnswer, RubricVersion, User
from db.work import judge_runs
from i18n import translate
from tests.support.apptest_helpers import open_page, signed_in, texts
from tests.support.factories import make_case, make_user

PAGE = "annotate-rubrics"


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


@pytest.fixture
def studio(app_database):
    with session_scope(app_database) as session:
        make_user(session, "boss", "admin")
        writer = make_user(session, "writer", "annotator", 1)
        case = make_case(session, "CC-0001", n=3, status="submitted", author=writer)
        session.add(Assignment(kind=AssignmentKind.rubric, case_pk=case.id, user_id=writer.id, group_no=1))
    return app_database


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("   ", "references.empty"),
        ("长" * 200_001, "references.too_long"),
    ],
)
def test_a_bad_paste_is_refused_with_one_line_and_changes_nothing(studio, text, reason):
    app = open_page(signed_in(studio, "boss"), PAGE)
    assert not app.exception
    app.text_area[0].set_value(text)
    app = _click_save(app)
    assert not app.exception and len(app.error) == 1
    assert "参考答案未保存" in app.error[0].value
    with session_scope(studio, read_only=True) as session:
        assert session.exec(select(func.count()).select_from(ReferenceAnswer)).one() == 0


def _click_save(app):
    for button in app.button:
        if button.label == t("rubric_quality.save_reference"):
            return button.click().run()
    raise AssertionError("no save button")


def test_the_admin_pastes_then_edits_and_each_change_is_audited(studio):
    app = open_page(signed_in(studio, "boss"), PAGE)
    app.text_area[0].set_value("第一版参考答案")
    app = _click_save(app)
    assert t("rubric_quality.reference_saved") in texts(app)
    app.text_area[0].set_value("第二版参考答案")
    app = _click_save(app)
    with session_scope(studio, read_only=True) as session:
        assert session.exec(select(ReferenceAnswer.text)).one() == "第二版参考答案"
        actions = session.exec(select(AuditLog.action).where(AuditLog.entity == "reference_answer")).all()
    assert actions == ["import", "update"]


def test_the_author_reads_the_reference_and_their_versions_flags(studio):
    with session_scope(studio) as session:
        from db.access import users
        from db.rubrics.references import set_reference

        admin = users.get_user(session, username="boss")
        version = session.exec(select(RubricVersion)).one()
        set_reference(session, admin, version.case_pk, "作者可见的参考答案")
        run = judge_runs.create_run(
            session,
            "boss",
            judge="page-judge",
            base_url="http://127.0.0.1:9/v1",
            model="m",
            template="official",
            template_sha256="0" * 64,
            params={},
            kind="validate",
        )
        session.add(
            AnchorDecision(
                run_id=run.id,
                case_pk=version.case_pk,
                rubric_version_id=version.id,
                anchor="reference",
                criterion_id="c02",
                met=False,
            )
        )
        session.add(
            AnchorDecision(
                run_id=run.id,
                case_pk=version.case_pk,
                rubric_version_id=version.id,
                anchor="refusal",
                criterion_id="c03",
                met=True,
            )
        )
        case_pk = version.case_pk
    app = open_page(signed_in(studio, "writer"), PAGE)
    assert not app.exception
    shown = texts(app)
    assert "作者可见的参考答案" in shown
    reasons = t("rubric_quality.reason.reference_not_met")
    assert t("rubric_quality.flag_line", position=2, reasons=reasons) in shown
    assert t("rubric_quality.flag_line", position=3, reasons=t("rubric_quality.reason.refusal_met")) in shown
    with session_scope(studio, read_only=True) as session:
        writer = session.exec(select(User).where(User.username == "writer")).one()
        assert reference_for(session, writer, case_pk) == "作者可见的参考答案"
