"""Feedback after a round in the browser at 1440×900, on its own copy of the demo (which opened one finished round
of its own): an annotator of another finished round first finds none of their labels in it; the admin finds an
unfinished round refused, then opens that finished one; the annotator's feedback page is kept as a screenshot and
carries no model name anywhere in the DOM."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from db.rules.enums import AssignmentKind
from db.store.engine import make_engine, session_scope
from db.store.models import Assignment, JudgeDecision, Response, User
from db.work import feedback
from tests.e2e.conftest import (
    ACTION_TIMEOUT_MS,
    DEMO_PASSWORD,
    Account,
    choose_in_picker,
    find_account,
    login,
    open_app,
    screenshot,
    seed_database,
    served_app,
    text,
)

pytestmark = pytest.mark.browser


def _annotators(database_url: str, round_at) -> dict[int, set[str]]:
    """The annotators of each group in the round handed out at `round_at`."""
    engine = make_engine(database_url)
    try:
        with session_scope(engine, read_only=True) as s:
            rows = s.exec(
                select(User.username, Assignment.group_no)
                .join(User, User.id == Assignment.user_id)
                .where(Assignment.kind == AssignmentKind.label, Assignment.created_at == round_at)
            ).all()
    finally:
        engine.dispose()
    found: dict[int, set[str]] = {1: set(), 2: set()}
    for username, group in rows:
        found[group].add(username)
    return found


@pytest.fixture(scope="module")
def feedback_server(chromium_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("e2e-feedback")
    database_url = f"sqlite:///{folder / 'studio.db'}"
    env = {**os.environ, "DATABASE_URL": database_url, "CLINCONSENSUS_DEMO_PASSWORD": DEMO_PASSWORD}
    env.pop("STREAMLIT_SERVER_PORT", None)
    seed_database(env)
    with served_app(folder, env, database_url) as server:
        yield server


def _model_names(database_url: str) -> list[str]:
    engine = make_engine(database_url)
    try:
        with session_scope(engine, read_only=True) as s:
            names = set(s.exec(select(Response.model)).all()) | set(s.exec(select(JudgeDecision.judge)).all())
    finally:
        engine.dispose()
    return sorted(names)


def _round_option(number: int) -> str:
    """The start of a round's name in the picker ("第 6 轮 ·"), whatever its time and state."""
    return text("admin.feedback.round_name", number=number, time="\u00a7").split("\u00a7")[0]


def test_admin_opens_a_finished_round_and_the_annotator_reads_its_feedback(browser, feedback_server):
    server = feedback_server
    engine = make_engine(server.database_url)
    with session_scope(engine, read_only=True) as s:
        admin_user = s.exec(select(User).where(User.role == "admin")).first()
        states = feedback.round_states(s, actor=admin_user)
    # The demo hands labeling out in rounds: one finished round has its feedback open, other finished rounds wait
    # for the admin, the rest still label.
    (demo_open,) = [state for state in states if state.is_open]
    assert demo_open.finished
    unfinished = next(state for state in states if not state.finished)
    open_to = set().union(*_annotators(server.database_url, demo_open.round_at).values())
    # A finished round whose group-1 annotator has no open round yet: they first read "not open yet".
    finished, annotator_name = next(
        (state, name)
        for state in states
        if state.finished and not state.is_open
        for name in sorted(_annotators(server.database_url, state.round_at)[1] - open_to)
    )
    with session_scope(engine, read_only=True) as s:
        display_name = s.exec(select(User.display_name).where(User.username == annotator_name)).one()
    annotator = Account(annotator_name, "annotator", 1, display_name or annotator_name)
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN", timezone_id="Asia/Shanghai")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    admin_context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    admin_context.set_default_timeout(ACTION_TIMEOUT_MS)
    try:
        page = context.new_page()
        login(page, server, annotator)
        # Feedback is open for the group (the demo's round), but none of this annotator's own labels is in it yet.
        with session_scope(engine, read_only=True) as s:
            user = s.exec(select(User).where(User.username == annotator_name)).one()
            assert not feedback.my_feedback(s, user).responses
        open_app(page, server, "annotate-feedback")
        expect(page.get_by_role("heading", name=text("annotate.feedback.title"))).to_be_visible()

        admin_page = admin_context.new_page()
        login(admin_page, server, find_account(server.database_url, "admin"))
        open_app(admin_page, server, "admin-feedback")
        picker, open_button = text("admin.feedback.choose"), text("admin.feedback.open")
        choose_in_picker(admin_page, picker, _round_option(unfinished.number))
        admin_page.get_by_role("button", name=open_button, exact=True).click()
        refused = text(
            "admin.feedback.unfinished",
            number=unfinished.number,
            done=f"{unfinished.done:,}",
            total=f"{unfinished.assignments:,}",
            share=f"{unfinished.done_share:.1%}",
        )
        expect(admin_page.get_by_text(refused)).to_be_visible()
        choose_in_picker(admin_page, picker, _round_option(finished.number))
        admin_page.get_by_role("button", name=open_button, exact=True).click()
        expect(admin_page.get_by_text(text("admin.feedback.opened", number=finished.number))).to_be_visible()
        screenshot(admin_page, "feedback-admin-1440x900")

        with session_scope(engine, read_only=True) as s:
            user = s.exec(select(User).where(User.username == annotator_name)).one()
            view = feedback.my_feedback(s, user)
            opened = [state.number for state in feedback.round_states(s, actor=admin_user) if state.is_open]
        assert sorted(opened) == sorted([demo_open.number, finished.number])  # the unfinished round stayed closed
        assert view.responses, "the finished round has no decision where gold differs from this annotator"

        open_app(page, server, "annotate-feedback")
        expect(page.get_by_role("heading", name=text("annotate.feedback.title"))).to_be_visible()
        expect(page.get_by_text(view.responses[0].decisions[0].criterion_text, exact=True).first).to_be_visible()
        expect(page.get_by_text(f"{100 * view.agreement:.1f}%", exact=True)).to_be_visible()
        screenshot(page, "feedback-annotator-1440x900")
        html = page.content()
        leaked = [name for name in _model_names(server.database_url) if name in html]
        assert not leaked, f"model names in the feedback page: {leaked}"
    finally:
        context.close()
        admin_context.close()
        engine.dispose()
