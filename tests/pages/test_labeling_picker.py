"""The labeling page's response picker: each option names case, code and state in the reader's language."""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import counts
from db.labeling import drafts as label_drafts
from db.store.engine import session_scope
from db.store.models import Assignment, Response, User
from i18n import translate
from tests.support.apptest_helpers import open_page, signed_in
from tests.support.factories import make_case, make_response, make_user

N = 30


@pytest.fixture
def queue(app_database):
    """ann2 (group 2) has three responses of CC-0001 to label."""
    with session_scope(app_database) as session:
        ann2 = make_user(session, "ann2", "annotator", 2)
        case = make_case(session, "CC-0001")
        for model in ("secret-model-alpha", "secret-model-beta", "secret-model-gamma"):
            response = make_response(session, case, model, f"{model} 的回答")
            session.add(Assignment(kind="label", case_pk=case.id, response_id=response.id, user_id=ann2.id, group_no=2))
            counts.refresh_assignments(session, [response.id])
    return app_database


def expected_options(engine, lang: str, done: set[str] = frozenset()) -> list[str]:
    with session_scope(engine, read_only=True) as session:
        codes = sorted(session.exec(select(Response.code)).all())
    out = []
    for code in codes:
        if code in done:
            status = translate("annotate.labeling.status.done", lang, labeled=N, size=N)
        else:
            status = translate("annotate.labeling.status.todo", lang, labeled=0, size=N)
        out.append(translate("annotate.labeling.item", lang, case_id="CC-0001", code=code, status=status))
    return out


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_each_option_names_case_code_and_state_and_follows_a_save(queue, lang):
    app = open_page(signed_in(queue, "ann2", lang=lang), "annotate-labeling")
    assert not app.exception
    [picker] = app.selectbox
    assert list(picker.options) == expected_options(queue, lang)
    assert all("secret-model" not in option for option in picker.options)

    first_id = app.session_state["annotate_label_current"]
    with session_scope(queue) as session:
        ann2 = session.exec(select(User).where(User.username == "ann2")).one()
        bench = label_drafts.open_response(session, ann2, first_id)
        label_drafts.save(
            session,
            ann2,
            first_id,
            rubric_version_id=bench.view.rubric_version_id,
            decisions=dict.fromkeys(bench.decisions, True),
            expected_versions=bench.view.expected_versions,
        )
        code = bench.view.code
    app.session_state["annotate_label_queue"] = None  # read the queue again, as the refresh button does
    app.run()
    [picker] = app.selectbox
    assert list(picker.options) == expected_options(queue, lang, done={code})
