"""The admin's Judge runs page starts a drafting run (docs/REFERENCE.md §4.3) against the loopback endpoint.

The page records the run as `draft rubrics` would and starts `clinconsensus judge resume ID`; the test
waits on the record, then reads the stored drafts against the server's own answer function. Bad input
is refused in one line and records nothing.
"""

from __future__ import annotations

import pytest
from sqlmodel import func, select

from db.rules.config import RUBRIC_SIZE
from db.rules.taxonomy import get_taxonomy
from db.store.engine import session_scope
from db.store.models import Case, JudgeRun, RubricDraft, RubricVersion
from i18n import translate
from judge.draft import fill, read_draft_template
from tests.pages.test_judge_page import wait_for
from tests.support.apptest_helpers import button, open_page, signed_in, texts
from tests.support.factories import make_case, make_user
from tools.llm_server import LLMServer, expected_draft

PAGE = "admin-judge-runs"


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


@pytest.fixture
def drafting(app_database):
    with session_scope(app_database) as session:
        make_user(session, "boss", "admin")
        for n in (1, 2):
            make_case(session, f"CC-{n:04d}", n=0, clinical_context=f"病例{n}：咳嗽三天")
        make_case(session, "CC-0900", n=4)  # has an approved rubric: not drafted under "missing"
    return app_database


def counts(engine) -> tuple[int, int, int]:
    with session_scope(engine, read_only=True) as session:
        return tuple(  # type: ignore[return-value]
            session.exec(select(func.count()).select_from(table)).one()
            for table in (JudgeRun, RubricDraft, RubricVersion)
        )


def fill_form(app, url: str, **fields):
    app.text_area(key="draft_base_url").set_value(url)
    app.text_input(key="draft_model").set_value(fields.get("model", "qwen-drafter"))
    app.text_input(key="draft_as").set_value(fields.get("generator", "page-drafter"))
    app.text_input(key="draft_template").set_value(fields.get("template", ""))
    return button(app, t("drafts.form.start")).click().run()


def test_a_drafting_run_started_on_the_page_drafts_the_cases_without_a_rubric(drafting):
    with LLMServer() as server:
        app = fill_form(open_page(signed_in(drafting, "boss"), PAGE), server.url)
        assert not app.exception and not app.error, [e.value for e in app.error]
        with session_scope(drafting, read_only=True) as session:
            run_id = session.exec(select(JudgeRun.id)).one()
        assert t("judge.started", id=run_id) in texts(app)
        run = wait_for(drafting, run_id, ("finished", "failed"))
        assert run.status == "finished" and run.kind == "draft" and run.items == run.done == 2
        assert run.judge == "page-drafter" and run.model == "qwen-drafter"
        assert server.requests == 2
    tags = [tag["id"] for tag in get_taxonomy().failure_tags()]
    template = read_draft_template(None)
    with session_scope(drafting, read_only=True) as session:
        cases = {case.id: case for case in session.exec(select(Case)).all()}
        stored = {cases[row.case_pk].case_id: row for row in session.exec(select(RubricDraft)).all()}
        assert set(stored) == {"CC-0001", "CC-0002"}
        for row in stored.values():
            case = cases[row.case_pk]
            prompt = fill(template, case, RUBRIC_SIZE, tags)
            assert [item["criterion"] for item in row.criteria] == expected_draft(prompt, RUBRIC_SIZE)
            assert row.generator == "page-drafter" and row.run_id == run_id
        # Nothing submitted: the one version is the approved rubric made with CC-0900.
        assert session.exec(select(func.count()).select_from(RubricVersion)).one() == 1
    app = open_page(signed_in(drafting, "boss"), PAGE)
    assert list(app.dataframe[0].value[t("judge.column.kind")]) == [t("judge.kind.draft")]


@pytest.mark.parametrize(
    ("fields", "url", "expected"),
    [
        ({}, "", "judge.message.no_endpoint"),
        ({}, "ftp://example.org/v1", "judge.message.bad_endpoint"),
        ({"template": "/no/such/template.txt"}, "http://127.0.0.1:9/v1", "drafts.template_missing"),
        ({"generator": "bad\x07name"}, "http://127.0.0.1:9/v1", None),
    ],
)
def test_bad_input_is_refused_in_one_line_and_records_nothing(drafting, fields, url, expected):
    before = counts(drafting)
    app = fill_form(open_page(signed_in(drafting, "boss"), PAGE), url, **fields)
    assert not app.exception
    errors = [element.value for element in app.error]
    assert len(errors) == 1 and "\n" not in errors[0].strip(), errors
    if expected == "judge.message.bad_endpoint":
        # The URL itself is shown escaped for markdown; the sentence around it is the catalog's.
        assert t(expected, url="@").split("@")[1] in errors[0] and "example" in errors[0]
    elif expected is not None:
        assert t(expected) in errors[0]
    assert "Traceback" not in errors[0]
    assert counts(drafting) == before


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_drafting_form_is_shown_in_the_readers_language(drafting, lang):
    app = open_page(signed_in(drafting, "boss", lang=lang), PAGE)
    assert not app.exception
    assert translate("drafts.form.heading", lang) in [s.value for s in app.subheader]
    assert translate("drafts.form.start", lang) in [b.label for b in app.button]
