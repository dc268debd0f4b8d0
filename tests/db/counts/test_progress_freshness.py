"""The annotator's progress has one definition, shown the same in the sidebar, on home and on the labeling page,
and it is new right after a save (the sidebar's figures are kept per data version, not for a while)."""

from __future__ import annotations

import pytest

from db import counts, labeling, labels as label_room
from db.rules.enums import AssignmentKind
from db.store.engine import session_scope
from db.store.models import Assignment, User
from i18n import translate
from tests.support.apptest_helpers import open_page, signed_in
from tests.support.factories import make_case, make_response, make_user
from tests.support.page_save import as_sent

N = 4


@pytest.fixture
def annotated(app_database):
    with session_scope(app_database) as s:
        annotator = make_user(s, "ann1", "annotator", 1)
        case = make_case(s, "CC-0001", n=N)
        for model in ("model-a", "model-b", "model-c"):
            response = make_response(s, case, model)
            s.add(
                Assignment(
                    kind=AssignmentKind.label,
                    case_pk=case.id,
                    response_id=response.id,
                    user_id=annotator.id,
                    group_no=1,
                )
            )
            counts.refresh_assignments(s, [response.id])
    return app_database


def _progress_texts(app) -> list[str]:
    return [element.proto.text for element in app.get("progress")]


def _save_first_open(engine) -> None:
    with session_scope(engine) as s:
        user = s.query(User).filter_by(username="ann1").one()
        queue = labeling.labeling_queue(s, user)
        item = next(i for i in queue.items if i.status != labeling.DONE)
        view = labeling.response_for_labeling(s, user, item.response_id)
        label_room.save(
            s,
            user,
            "annotation",
            item.response_id,
            **as_sent([labeling.LabelInput(c.criterion_id, True) for c in view.criteria]),
            rubric_version_id=view.rubric_version_id,
            expected_versions=view.expected_versions,
        )


def test_sidebar_home_and_labeling_page_show_one_progress_new_right_after_a_save(annotated):
    app = signed_in(annotated, "ann1")
    open_page(app, "home")
    assert not app.exception
    words = translate("workbench.progress.label", "zh", done="0", total="3", share="0.0%")
    assert _progress_texts(app) == [words]
    assert [m.value for m in app.metric if m.label == translate("home.labels_open", "zh")] == ["3"]

    _save_first_open(annotated)  # elsewhere (another tab, another server): only the database knows
    app.run()
    words = translate("workbench.progress.label", "zh", done="1", total="3", share="33.3%")
    assert _progress_texts(app) == [words]
    assert [m.value for m in app.metric if m.label == translate("home.labels_open", "zh")] == ["2"]

    open_page(app, "annotate-labeling")
    assert not app.exception
    assert _progress_texts(app) == [words, words]  # the sidebar's and the page's own, one definition

    _save_first_open(annotated)
    open_page(app, "home")
    words = translate("workbench.progress.label", "zh", done="2", total="3", share="66.7%")
    assert _progress_texts(app) == [words]
