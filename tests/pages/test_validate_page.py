"""The admin's Judge runs page starts a rubric validation (docs/REFERENCE.md §4.2) against the loopback endpoint.

The run executes in a process of its own (`clinconsensus judge resume ID`, which recognises the run's kind);
the test waits on the record, then counts anchor decisions, and that no judge decision was written.
"""

from __future__ import annotations

import pytest
from sqlmodel import func, select

from db.rules.anchors import ANCHORS
from db.store.engine import session_scope
from db.store.models import AnchorDecision, JudgeDecision, JudgeRun
from i18n import translate
from tests.pages.test_judge_page import studio, wait_for  # noqa: F401  (the fixture is used by name)
from tests.support.apptest_helpers import button, open_page, signed_in
from tools.llm_server import LLMServer

PAGE = "admin-judge-runs"


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


def test_a_validation_started_on_the_page_grades_the_weak_anchors(studio):  # noqa: F811
    with LLMServer() as server:
        app = open_page(signed_in(studio, "boss"), PAGE)
        app.text_area(key="validate_base_url").set_value(server.url)
        app.text_input(key="validate_model").set_value("judge-8b")
        app.text_input(key="validate_judge").set_value("page-anchor-judge")
        app = button(app, t("rubric_quality.form.start")).click().run()
        assert not app.exception and not app.error, [e.value for e in app.error]
        with session_scope(studio, read_only=True) as session:
            run_id = session.exec(select(JudgeRun.id)).one()
        assert t("judge.started", id=run_id) in [toast.value for toast in app.toast]  # where the admin looks
        run = wait_for(studio, run_id, ("finished", "failed"))
        # 3 cases × 4 criteria × the two weak anchors (no case has a reference answer).
        assert run.status == "finished" and run.kind == "validate" and run.items == run.done == 24
        assert server.requests == 24
    with session_scope(studio, read_only=True) as session:
        assert session.exec(select(func.count()).select_from(AnchorDecision)).one() == 24
        assert session.exec(select(func.count()).select_from(JudgeDecision)).one() == 0
        assert run.params["anchor_items"] == dict.fromkeys(ANCHORS, 12) | {"reference": 0}
    app = open_page(signed_in(studio, "boss"), PAGE)
    assert list(app.dataframe[0].value[t("judge.column.kind")]) == [t("judge.kind.validate")]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_form_is_shown_in_the_readers_language(studio, lang):  # noqa: F811
    app = open_page(signed_in(studio, "boss", lang=lang), PAGE)
    assert not app.exception
    assert translate("rubric_quality.form.heading", lang) in [s.value for s in app.subheader]
