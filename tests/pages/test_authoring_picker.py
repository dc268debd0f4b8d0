"""The authoring page's case picker follows every save: "未开始" becomes "草稿" after a save, "待审核"
after a submission, on the run the save's click starts (no reload)."""

from __future__ import annotations

import pytest

from db.store.engine import session_scope
from db.store.models import Assignment
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in
from tests.support.factories import make_case, make_user

N = 30


def zh(key: str, **values) -> str:
    return translate(key, "zh", **values)


@pytest.fixture
def author(app_database):
    """ann1 (group 1) writes the rubric of CC-0002 and of CC-0003, neither started."""
    with session_scope(app_database) as session:
        ann1 = make_user(session, "ann1", "annotator", 1)
        for case_id in ("CC-0002", "CC-0003"):
            case = make_case(session, case_id, n=0)
            session.add(Assignment(kind="rubric", case_pk=case.id, user_id=ann1.id, group_no=1))
    return app_database


def _picker(app):
    [picker] = [box for box in app.selectbox if box.key == "annotate_rubric_case"]
    return picker


def _label_of(app, case_id: str) -> str:
    picker = _picker(app)
    [label] = [option for option in picker.options if option.startswith(case_id)]
    return label


def test_the_picker_says_draft_after_a_save_and_submitted_after_a_submission(author):
    app = open_page(signed_in(author, "ann1"), "annotate-rubrics")
    assert not app.exception
    case_pk = _picker(app).value
    case_id = _picker(app).options[_picker(app).index].split(" · ")[0]
    assert _label_of(app, case_id).endswith(zh("annotate.authoring.status.none"))
    state = app.session_state[f"annotate_rubric_state_{case_pk}"]
    for i, row in enumerate(state["rows"], start=1):
        row["text"] = f"回答明确说明第{i}项临床要点的具体处理内容"
    app = button(app, zh("annotate.authoring.save")).click().run()
    assert not app.exception
    assert zh("annotate.authoring.saved", version=1) in [s.value for s in app.success]
    assert _label_of(app, case_id).endswith(zh("annotate.authoring.status.draft"))
    assert _picker(app).value == case_pk  # the saved case stays picked, under its new label
    app = button(app, zh("annotate.authoring.submit")).click().run()
    assert not app.exception
    assert _label_of(app, case_id).endswith(zh("annotate.authoring.status.submitted"))
    assert _picker(app).value == case_pk
