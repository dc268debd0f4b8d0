"""The admin page "Judge runs" through AppTest: start a run against the loopback endpoint, follow it, cancel one.

The page starts each run as a process of its own (`clinconsensus judge resume ID`); the tests wait on
the run record that process writes.
"""

from __future__ import annotations

import time

import pytest
from sqlmodel import select

from db.store.engine import session_scope
from db.store.models import JudgeDecision, JudgeRun
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in, texts
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_response, make_user
from tools.llm_server import LLMServer

PAGE = "admin-judge-runs"


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


@pytest.fixture
def studio(app_database):
    with session_scope(app_database) as session:
        make_user(session, "boss", "admin")
        make_user(session, "ann", "annotator", 1)
        for n in (1, 2, 3):
            case = make_case(session, f"CC-{n:04d}", n=4)
            make_response(session, case, model="model-a", text=f"回答 {n}")
            make_response(session, case, model="model-b", text=f"另一个回答 {n}")
    return app_database


def wait_for(engine, run_id: int, statuses: tuple[str, ...], timeout: float = 60) -> JudgeRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with session_scope(engine, read_only=True) as session:
            run = session.get(JudgeRun, run_id)
            if run is not None and run.status in statuses:
                return run
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} did not reach {statuses} in {timeout}s")


def start(app, server: LLMServer, **fields):
    app.text_area(key="judge_base_url").set_value(server.url)
    app.text_input(key="judge_model").set_value("judge-8b")
    app.text_input(key="judge_name").set_value(fields.get("judge", "page-judge"))
    app.number_input(key="judge_concurrency").set_value(fields.get("concurrency", 4))
    return button(app, t("judge.form.start")).click().run()


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_page_renders_for_admins_only(studio, lang):
    app = open_page(signed_in(studio, "boss", lang=lang), PAGE)
    assert not app.exception and app.title[0].value == translate("judge.title", lang)
    assert translate("judge.history.empty", lang) in texts(app)
    annotator = open_page(signed_in(studio, "ann"), PAGE)
    assert not annotator.title or annotator.title[0].value != translate("judge.title", "zh")


def test_a_run_started_on_the_page_grades_every_item_and_shows_in_the_history(studio):
    with LLMServer() as server:
        app = start(open_page(signed_in(studio, "boss"), PAGE), server)
        assert not app.exception and not app.error, [e.value for e in app.error]
        with session_scope(studio, read_only=True) as session:
            run_id = session.exec(select(JudgeRun.id)).one()
        assert t("judge.started", id=run_id) in texts(app)
        assert t("judge.started", id=run_id) in [toast.value for toast in app.toast]
        run = wait_for(studio, run_id, ("finished", "failed"))
        assert run.status == "finished" and run.items == run.done == 24 and run.created_by == "boss"
        assert server.requests == 24
    with session_scope(studio, read_only=True) as session:
        assert len(session.exec(select(JudgeDecision).where(JudgeDecision.judge == "page-judge")).all()) == 24
    # Under the button, in place: how the started run ended.
    app = app.run()
    assert t("daily.judge.ended", id=run_id, status=t("judge.status.finished"), done="24", items="24") in texts(app)
    app = open_page(signed_in(studio, "boss"), PAGE)
    table = app.dataframe[0].value
    assert list(table[t("judge.column.done")]) == [24]
    assert list(table[t("judge.column.status")]) == [t("judge.status.finished")]
    # The history says which models the run judged (all, as none was chosen) in few enough columns to fit.
    assert list(table[t("judge.column.judged_models")]) == [t("daily.judge.all_models")]
    assert t("judge.column.prompt_tokens") not in table.columns and len(table.columns) <= 11
    assert t("judge.column.prompt_tokens") in app.dataframe[1].value.columns  # every figure, one click away
    assert t("judge.live.none") in texts(app)


def test_a_bad_endpoint_is_refused_on_the_page_with_one_line(studio):
    app = open_page(signed_in(studio, "boss"), PAGE)
    app.text_area(key="judge_base_url").set_value("localhost:8000")
    app.text_input(key="judge_model").set_value("m")
    app = button(app, t("judge.form.start")).click().run()
    assert not app.exception and len(app.error) == 1
    shown = app.error[0].value.replace("\\", "")
    assert t("judge.message.bad_endpoint", url="localhost:8000") in shown
    assert "expected" not in shown  # the command line's English stays there
    with session_scope(studio, read_only=True) as session:
        assert session.exec(select(JudgeRun)).all() == []


def test_cancel_on_the_page_stops_a_running_run(studio):
    with LLMServer(latency=0.4) as server:
        app = start(open_page(signed_in(studio, "boss"), PAGE), server, concurrency=1)
        with session_scope(studio, read_only=True) as session:
            run_id = session.exec(select(JudgeRun.id)).one()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with session_scope(studio, read_only=True) as session:
                run = session.get(JudgeRun, run_id)
                if run.status == "running" and run.done >= 1:
                    break
            time.sleep(0.1)
        app = open_page(signed_in(studio, "boss"), PAGE)
        assert t(
            "judge.live.title", id=run_id, judge="page-judge", model="judge-8b", status=t("judge.status.running")
        ) in texts(app)
        app = app.button(key=f"cancel_{run_id}").click().run()
        run = wait_for(studio, run_id, ("cancelled", "finished", "failed"), timeout=30)
        assert run.status == "cancelled" and run.done < run.items == 24
        assert server.requests < 24


@pytest.mark.usefixtures("provisional_basis")  # the labels here are unchecked: the old reading
def test_the_exports_page_exports_judgements_of_chosen_models_and_a_release_tier(studio):
    import io
    import json
    import zipfile

    from db.store.models import Response, User
    from tests.support.factories import make_label

    with session_scope(studio) as session:
        g1 = session.exec(select(User).where(User.username == "ann")).one()
        for response in session.exec(select(Response).where(Response.model == "model-a")).all():
            for i in range(1, 5):
                make_label(session, response, f"c{i:02d}", i % 2 == 0, g1)
    app = open_page(signed_in(studio, "boss"), "admin-exports")
    app.multiselect(key="export_models").set_value(["model-a"])
    app = [b for b in app.button if b.key == "build_judgements"][0].click().run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    _, data = app.session_state["export_files"]["judgements"]
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = sorted(archive.namelist())
        scores = json.loads(archive.read("judgements/scores.json"))
    assert "judgements/judgements/model-a_judge.json" in names and "judgements/cases.jsonl" in names
    assert not [name for name in names if name.endswith("model-b_judge.json")]
    assert scores["models"]["model-a"]["n_responses"] == 3
    app.multiselect(key="export_difficulty").set_value(["high"])
    app = [b for b in app.button if b.key == "build_release"][0].click().run()
    assert not app.exception and not app.error
    _, data = app.session_state["export_files"]["release"]
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.read("release/cases.jsonl") == b""  # the studio's cases are all medium
    app.multiselect(key="export_difficulty").set_value(["medium"])
    app = [b for b in app.button if b.key == "build_release"][0].click().run()
    # their rubrics have 4 criteria, not 30: the release is refused with one red line
    assert not app.exception and len(app.error) == 1


def test_an_interrupted_run_is_resumed_from_the_page(studio):
    from datetime import timedelta

    from db.store.models import utcnow
    from db.work import judge_runs
    from judge.runner import RunOptions, create_run

    with LLMServer() as server:
        run_id = create_run(studio, RunOptions(base_url=server.url, model="judge-8b", judge="page-judge"), by="cli")
        with session_scope(studio) as session:  # a process that began the run and died a minute ago
            run = session.get(JudgeRun, run_id)
            run.status, run.items = "running", 24
            run.heartbeat_at = utcnow() - judge_runs.STALE_AFTER - timedelta(seconds=30)
        app = open_page(signed_in(studio, "boss"), PAGE)
        assert t("judge.status.interrupted") in texts(app)
        app = app.button(key=f"resume_{run_id}").click().run()
        run = wait_for(studio, run_id, ("finished", "failed"))
        assert run.status == "finished" and run.done == 24 and server.requests == 24


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_why_a_run_failed_is_said_in_the_readers_language(studio, lang):
    url = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there
    app = open_page(signed_in(studio, "boss", lang=lang), PAGE)
    app.text_area(key="judge_base_url").set_value(url)
    app.text_input(key="judge_model").set_value("judge-8b")
    app = button(app, translate("judge.form.start", lang)).click().run()
    with session_scope(studio, read_only=True) as session:
        run_id = session.exec(select(JudgeRun.id)).one()
    run = wait_for(studio, run_id, ("finished", "failed"))
    assert run.status == "failed" and run.message.startswith(f"cannot reach the endpoint {url}")  # the CLI's words
    assert run.message_said["key"] == "judge.message.unreachable"
    shown = texts(open_page(signed_in(studio, "boss", lang=lang), PAGE))
    lead = translate("judge.message.unreachable", lang, url=url, reason="").rstrip()
    assert lead in shown
    if lang == "zh":
        assert "cannot reach" not in shown
