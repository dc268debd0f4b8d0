"""A team on several servers: two `clinconsensus serve` replicas on one PostgreSQL behind Debian's nginx.

Everything is real and on loopback: a PostgreSQL server (the test session's), two replicas started
with the console script, nginx run unprivileged with the shipped deploy/nginx-clinconsensus.conf
(only its ports changed) in a temporary prefix, and Chromium. Two checkers work on the same
disputed response, one on each replica:

- a decision saved on one replica is seen on the other (kept figures and the page read the database);
- the other checker's stale decision on the other replica is refused and shows the newer value;
- the first replica is stopped mid-session: the browser carries on through nginx on the other
  replica, still signed in, and nothing saved is lost.
"""

from __future__ import annotations

import os
import secrets

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from db import counts, labeling, labels as label_room, review
from db.access import independence, users
from db.rules.enums import AssignmentKind, Stage
from db.store.engine import make_engine, session_scope
from db.store.models import Assignment, Label, User
from tests.conftest import new_postgres_url
from tests.e2e.conftest import (
    DEMO_PASSWORD,
    AppServer,
    _free_port,
    _stop,
    choose_in_picker,
    find_account,
    login,
    seed_database,
    text,
    wait_for_app_run,
)
from tests.support.factories import make_case, make_response
from tests.support.page_save import as_sent
from tools.replicas import ROUTE_COOKIE, Nginx, find_nginx, start_replica

pytestmark = [pytest.mark.browser, pytest.mark.postgres]

DISPUTED = ("c01", "c02")
WAIT_MS = 30_000


@pytest.fixture(scope="module")
def nginx_binary() -> str:
    found = find_nginx()
    if found is None:
        message = "nginx not found (Debian: apt-get install nginx)"
        if os.environ.get("CLINCONSENSUS_REQUIRE_BROWSER", "") not in ("", "0"):
            pytest.fail(f"the several-replica test is required here: {message}")
        pytest.skip(message)
    return found


@pytest.fixture
def team(pg_server, nginx_binary, tmp_path):
    """PostgreSQL with the small demo, two replicas and nginx in front; yields what the test needs."""
    database_url = new_postgres_url(pg_server)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CLINCONSENSUS_DEMO_PASSWORD": DEMO_PASSWORD,
        # Every replica must sign Streamlit's cookies alike, or a browser passed to another one is refused.
        "STREAMLIT_SERVER_COOKIE_SECRET": secrets.token_hex(16),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("STREAMLIT_SERVER_PORT", None)
    seed_database(env)
    ports = [_free_port(), _free_port()]
    replicas = {}
    nginx = None
    try:
        for number, port in enumerate(ports, start=1):
            replicas[f"127.0.0.1:{port}"] = start_replica(port, env, tmp_path / f"replica{number}.log")
        nginx = Nginx(nginx_binary, ports)
        yield dict(database_url=database_url, nginx=nginx, replicas=replicas, tmp_path=tmp_path)
    finally:
        if nginx is not None:
            nginx.stop()
        for process in replicas.values():
            _stop(process)


def _disputed_response(database_url: str) -> tuple[int, str]:
    """A fresh case and response that an annotator of each group labeled; they differ on DISPUTED."""
    engine = make_engine(database_url)
    try:
        annotators = [find_account(database_url, "annotator", group).username for group in (1, 2)]
        with session_scope(engine) as s:
            case = make_case(s, f"E2E-{secrets.token_hex(3).upper()}")
            response = make_response(s, case, f"e2e-model-{secrets.token_hex(2)}", "建议您尽快到心内科就诊。")
            for group, name in enumerate(annotators, start=1):
                s.add(
                    Assignment(
                        kind=AssignmentKind.label,
                        case_pk=case.id,
                        response_id=response.id,
                        user_id=users.get_user(s, username=name).id,
                        group_no=group,
                    )
                )
            counts.refresh_assignments(s, [response.id])
            response_id, code = response.id, response.code
        for group, name in enumerate(annotators, start=1):
            with session_scope(engine) as s:
                person = users.get_user(s, username=name)
                view = labeling.response_for_labeling(s, person, response_id)
                decisions = [
                    labeling.LabelInput(c.criterion_id, met=(group == 1) or c.criterion_id not in DISPUTED)
                    for c in view.criteria
                ]
                label_room.save(
                    s,
                    person,
                    "annotation",
                    response_id,
                    **as_sent(decisions),
                    rubric_version_id=view.rubric_version_id,
                    expected_versions=view.expected_versions,
                )
        # Each group's checker confirms their group's labels: a response still waiting in a group's check
        # queue cannot be adjudicated by that group's checkers (db.access.independence).
        for group in (1, 2):
            checker = find_account(database_url, "checker", group).username
            with session_scope(engine) as s:
                person = users.get_user(s, username=checker)
                for criterion_id, met in s.exec(
                    select(Label.criterion_id, Label.met).where(
                        Label.response_id == response_id, Label.group_no == group, Label.stage == Stage.annotation
                    )
                ).all():
                    review.save_check(s, person, response_id=response_id, criterion_id=criterion_id, met=met)
            with session_scope(engine) as s:  # and takes it into adjudication (db.access.independence)
                independence.open_adjudication(s, users.get_user(s, username=checker), response_id)
    finally:
        engine.dispose()
    return response_id, code


def _decisions(database_url: str, response_id: int) -> dict[str, tuple[bool, str]]:
    engine = make_engine(database_url)
    try:
        with session_scope(engine, read_only=True) as s:
            rows = s.exec(
                select(Label.criterion_id, Label.met, Label.user_id).where(
                    Label.response_id == response_id, Label.stage == Stage.adjudication
                )
            ).all()
            return {cid: (bool(met), s.get(User, user_id).username) for cid, met, user_id in rows}
    finally:
        engine.dispose()


def _open_adjudication(page, code: str) -> None:
    page.get_by_role("link", name=text("review.adjudication.title")).first.click()
    wait_for_app_run(page)
    # Picked by clicking the option: keys typed into a closed picker may reach the workbench, whose
    # decision keys (0, 1, ...) work from a closed picker, before the typed code opens the list.
    choose_in_picker(page, text("review.adjudication.pick"), code)
    expect(page.locator(".wb-pane-title")).to_have_text(text("workbench.response", code=code), timeout=WAIT_MS)
    page.locator(".wb-item").first.wait_for()


def _decide_and_save(page, keys: list[str], why: str) -> None:
    """Decides with the workbench's keys (1 met, 0 not met, j next), gives the rationale (R), saves (Ctrl+Enter)."""
    for key in keys:
        page.keyboard.press(key)
    page.keyboard.press("r")
    page.keyboard.type(why)
    page.keyboard.press("Enter")
    page.keyboard.press("Control+Enter")


def test_two_replicas_share_labels_refuse_stale_edits_and_survive_a_stop(team, browser):
    nginx, database_url = team["nginx"], team["database_url"]
    response_id, code = _disputed_response(database_url)
    checkers = [find_account(database_url, "checker", group) for group in (1, 2)]

    # One route cookie per replica, so each checker's browser is served by a different one.
    replicas = list(team["replicas"])
    routes: dict[str, str] = {}
    for attempt in range(200):
        route = f"route-{attempt}"
        routes.setdefault(nginx.replica_of(route), route)
        if len(routes) == 2:
            break
    assert sorted(routes) == sorted(replicas), f"nginx spreads browsers over both replicas: {routes}"

    pages = []
    for checker, replica in zip(checkers, replicas):
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="zh-CN")
        context.set_default_timeout(WAIT_MS)
        context.add_cookies([{"name": ROUTE_COOKIE, "value": routes[replica], "url": nginx.base_url}])
        page = context.new_page()
        login(page, AppServer(nginx.base_url, database_url, team["tmp_path"] / "unused.log"), checker)
        _open_adjudication(page, code)
        pages.append(page)
    first, second = pages
    assert nginx.replica_of(routes[replicas[0]]) == replicas[0]  # the routes hold

    # 1. The checker on replica 1 decides c01; the database has it.
    _decide_and_save(first, ["1"], "仲裁：回答已建议就医")
    expect(first.locator(".wb-message")).to_have_text(
        text("review.adjudication.saved", n=1, code=code), timeout=WAIT_MS
    )
    wait_for_app_run(first)
    assert _decisions(database_url, response_id) == {"c01": (True, checkers[0].username)}

    # 2. The checker on replica 2 still has the page from before that save: their decision is refused
    #    and shows the newer one; nothing is overwritten.
    _decide_and_save(second, ["0"], "仲裁：未说明何时就医")
    stale = text("review.adjudication.stale_other", criterion="c01", value=text("review.met"))
    expect(second.locator(".wb-message")).to_have_text(stale, timeout=WAIT_MS)
    wait_for_app_run(second)
    assert _decisions(database_url, response_id) == {"c01": (True, checkers[0].username)}

    # 3. Opened again on replica 2, the page shows the decision made on replica 1.
    second.reload()
    wait_for_app_run(second)
    _open_adjudication(second, code)
    decided = f"{text('review.met')} · {checkers[0].display_name}"  # people by name, not username
    expect(second.locator(".wb-item").first).to_contain_text(decided, timeout=WAIT_MS)

    # 4. Replica 1 stops mid-session. Its browser reloads through nginx, lands on replica 2 still signed
    #    in, finds its earlier decision there and saves the next one.
    _stop(team["replicas"][replicas[0]])
    first.reload()
    wait_for_app_run(first)
    expect(first.get_by_text(text("sidebar.signed_in_as", name=checkers[0].display_name))).to_be_visible(
        timeout=WAIT_MS
    )
    _open_adjudication(first, code)
    expect(first.locator(".wb-item").first).to_contain_text(decided, timeout=WAIT_MS)
    _decide_and_save(first, ["j", "0"], "仲裁：未提及复诊")
    expect(first.locator(".wb-message")).to_have_text(
        text("review.adjudication.saved", n=1, code=code), timeout=WAIT_MS
    )
    assert _decisions(database_url, response_id) == {
        "c01": (True, checkers[0].username),
        "c02": (False, checkers[0].username),
    }
    assert nginx.replica_of(routes[replicas[0]]) == replicas[1]  # now served by the replica still running
    for page in pages:
        page.context.close()
