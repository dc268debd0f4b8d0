"""A judge's API key comes only from variables meant for keys (docs/REFERENCE.md §3.7), checked against a
real loopback HTTP listener: for a refused name nothing at all reaches it, from the library, the command
line or the page."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from cli.main import main
from db.rules.errors import ValidationFailed
from db.store.engine import session_scope
from db.store.models import JudgeRun
from i18n import translate
from judge.runner import RunOptions, run_judge
from tests.support.apptest_helpers import button, open_page, signed_in
from tests.support.factories import make_case, make_response, make_user
from tools.llm_server import LLMServer

SECRET = "postgresql://app:hunter2-db-password@db/clin"
#: The app's own secrets and other variables not meant for API keys.
REFUSED = ["DATABASE_URL", "database_url", "CLINCONSENSUS_AUDIT_KEY", "CLINCONSENSUS_JUDGE_API_KEY",
           "STREAMLIT_SERVER_COOKIE_SECRET", "STREAMLIT_API_KEY", "PGPASSWORD", "HOME", "JUDGE_KEY"]  # fmt: skip


def one_case(engine) -> None:
    with Session(engine) as session:
        case = make_case(session, "CC-0001", n=2)
        make_response(session, case, model="model-a", text="回答")
        session.commit()


def options(server: LLMServer, variable: str) -> RunOptions:
    # One model per variable: a second run of the same model would be answered from the cache, sending nothing.
    return RunOptions(base_url=server.url, model=f"judge-{variable}", judge=variable, api_key_env=variable, timeout=10)


@pytest.mark.parametrize("variable", REFUSED)
def test_a_refused_variable_sends_nothing_and_records_no_run(sqlite_engine, monkeypatch, variable):
    one_case(sqlite_engine)
    monkeypatch.setenv(variable, SECRET)
    with LLMServer() as server:
        with pytest.raises(ValidationFailed, match=f"--api-key-env {variable}: not an API-key variable"):
            run_judge(sqlite_engine, options(server, variable))
        assert server.requests == 0 and server.authorizations == set()
    with Session(sqlite_engine) as session:
        assert session.exec(select(JudgeRun)).all() == []


def test_configuration_allows_other_names_but_never_the_apps_secrets(sqlite_engine, monkeypatch):
    one_case(sqlite_engine)
    monkeypatch.setenv("CLINCONSENSUS_API_KEY_VARS", "HOSPITAL_LLM_TOKEN, DATABASE_URL,CLINCONSENSUS_AUDIT_KEY")
    for variable in ("DATABASE_URL", "CLINCONSENSUS_AUDIT_KEY"):
        monkeypatch.setenv(variable, SECRET)
        with LLMServer() as server:
            with pytest.raises(ValidationFailed, match="not an API-key variable"):
                run_judge(sqlite_engine, options(server, variable))
            assert server.requests == 0
    monkeypatch.setenv("HOSPITAL_LLM_TOKEN", "sk-hospital")
    monkeypatch.setenv("OTHER_API_KEY", "sk-default-rule")
    for variable, key in (("HOSPITAL_LLM_TOKEN", "sk-hospital"), ("OTHER_API_KEY", "sk-default-rule")):
        with LLMServer() as server:
            summary = run_judge(sqlite_engine, options(server, variable))
            assert summary["status"] == "finished" and server.authorizations == {f"Bearer {key}"}


def test_the_command_line_refuses_in_one_line_and_sends_nothing(sqlite_url, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    with LLMServer() as server:
        code = main(["judge", "run", "--base-url", server.url, "--model", "m", "--api-key-env", "DATABASE_URL"])
        assert server.requests == 0 and server.authorizations == set()
    error = capsys.readouterr().err.strip()
    assert code == 1 and len(error.splitlines()) == 1
    assert error.startswith("clinconsensus: --api-key-env DATABASE_URL: not an API-key variable")
    assert "hunter2" not in error and sqlite_url not in error


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_judge_page_refuses_in_the_readers_language_and_sends_nothing(app_database, monkeypatch, lang):
    with session_scope(app_database) as session:
        make_user(session, "boss", "admin")
    monkeypatch.setenv("CLINCONSENSUS_AUDIT_KEY", "audit-key-that-must-stay-home")
    with LLMServer() as server:
        app = open_page(signed_in(app_database, "boss", lang=lang), "admin-judge-runs")
        app.text_area(key="judge_base_url").set_value(server.url)
        app.text_input(key="judge_model").set_value("judge-8b")
        app.text_input(key="judge_key_env").set_value("CLINCONSENSUS_AUDIT_KEY")
        app = button(app, translate("judge.form.start", lang)).click().run()
        assert server.requests == 0
    expected = translate("judge.error.api_key_env_refused", lang, variable="CLINCONSENSUS_AUDIT_KEY", suffix="_API_KEY")
    shown = [error.value.replace("\\", "") for error in app.error]
    assert not app.exception and len(shown) == 1 and shown[0].endswith(expected)
    with session_scope(app_database, read_only=True) as session:
        assert session.exec(select(JudgeRun)).all() == []
