"""Endpoints that answer something other than a chat completion, against a real HTTP server on loopback:
an HTML page, plain text, JSON without choices, a 5,000-digit number, malformed or huge bodies. `judge run`
and `generate` name each in one line and store nothing; a refusal's body is kept to its status and first
200 characters; a refused generated answer keeps its first 4,000 characters and its length."""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session, select

from cli.main import main
from db.store.engine import get_engine
from db.store.models import GenerationResult, JudgeDecision, JudgeRun, Response
from judge.endpoints import MAX_ANSWER_BYTES
from tests.judge.test_generate_and_endpoints import build_cases
from tests.judge.test_judge_runner import build_world
from tools.llm_server import LLMServer

HTML = b"<!doctype html><html><body><h1>502 Bad Gateway</h1></body></html>"
BAD_ANSWERS = [
    ((200, "text/html; charset=utf-8", HTML), "the endpoint answered text/html, not JSON (HTTP 200)"),
    ((200, "text/plain", b"model is loading"), "the endpoint answered text/plain, not JSON (HTTP 200)"),
    ((200, "application/json", b'{"object": "error"}'), "not a chat completion (no list of choices)"),
    ((200, "application/json", b'{"choices": [], "n": ' + b"7" * 5000 + b"}"), "a number longer than 4,300 digits"),
    ((200, "application/json", b'{"choices": [ oops'), "the endpoint's answer is not readable JSON"),
    (
        (200, "application/json", b'{"choices": [], "pad": "' + b"x" * (MAX_ANSWER_BYTES + 10) + b'"}'),
        f"more than {MAX_ANSWER_BYTES:,}",
    ),
]
IDS = ["html", "text", "no-choices", "long-number", "malformed", "huge"]


@pytest.fixture
def cli_db(sqlite_url, sqlite_engine, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    get_engine.cache_clear()
    yield sqlite_engine
    get_engine.cache_clear()


def _no_traceback(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert "AttributeError" not in captured.err + captured.out and "KeyError" not in captured.err + captured.out
    return captured.out + captured.err


@pytest.mark.parametrize(("answer", "said"), BAD_ANSWERS, ids=IDS)
def test_judge_run_names_an_answer_that_is_no_chat_completion(cli_db, capsys, answer, said):
    with Session(cli_db) as session:
        build_world(session, n_cases=2, n=2, models=("model-a",))
    with LLMServer() as server:
        server.raw_answer = answer
        code = main(["judge", "run", "--base-url", server.url, "--model", "m", "--judge", "jx", "--concurrency", "1",
                     "--max-retries", "0"])  # fmt: skip
        assert server.requests >= 1
    text = _no_traceback(capsys)
    assert code == 1 and said in text
    with Session(cli_db) as session:
        assert session.exec(select(JudgeDecision)).all() == []
        (run,) = session.exec(select(JudgeRun)).all()
        assert said in run.message and "\n" not in run.message


@pytest.mark.parametrize(("answer", "said"), BAD_ANSWERS[:2], ids=IDS[:2])
def test_generate_names_an_html_or_text_answer_and_stores_nothing(cli_db, capsys, answer, said):
    with Session(cli_db) as session:
        build_cases(session)
    with LLMServer() as server:
        server.raw_answer = answer
        code = main(["generate", "--base-url", server.url, "--model", "cand", "--as", "cand", "--cases", "released",
                     "--concurrency", "1", "--max-retries", "0"])  # fmt: skip
    text = _no_traceback(capsys)
    assert code == 1 and said in text
    with Session(cli_db) as session:
        assert session.exec(select(Response).where(Response.model == "cand")).all() == []
        assert session.exec(select(GenerationResult)).all() == []


def test_an_error_body_is_kept_to_its_status_and_first_200_characters(cli_db, capsys):
    with Session(cli_db) as session:
        build_world(session, n_cases=1, n=1, models=("model-a",))
    body = ("<html>internal admin console: " + "SECRET-TOKEN " * 100 + "</html>").encode()
    with LLMServer() as server:
        server.raw_answer = (403, "text/html", body)
        assert main(["judge", "run", "--base-url", server.url, "--model", "m", "--judge", "jx"]) == 1
    text = _no_traceback(capsys)
    with Session(cli_db) as session:
        (run,) = session.exec(select(JudgeRun)).all()
    shown = " ".join(body.decode().split())[:200]
    assert f"HTTP 403: {shown}…" in run.message and f"HTTP 403: {shown}…" in text
    kept = run.message.split("HTTP 403: ", 1)[1].split("…")[0]
    assert len(kept) <= 200 and " ".join(body.decode().split())[:201] not in text


def test_a_refused_generated_answer_keeps_its_first_4000_characters_and_its_length(cli_db, capsys):
    with Session(cli_db) as session:
        build_cases(session)
    content = "很长的回答。" * 40_000  # 240,000 characters: more than a response may hold
    completion = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "cand",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }
    with LLMServer() as server:
        server.raw_answer = (200, "application/json", json.dumps(completion, ensure_ascii=False).encode())
        main(["generate", "--base-url", server.url, "--model", "cand", "--as", "cand", "--cases", "released"])
    _no_traceback(capsys)
    with Session(cli_db) as session:
        rows = session.exec(select(GenerationResult)).all()
        assert session.exec(select(Response).where(Response.model == "cand")).all() == []
    assert rows and {row.status for row in rows} == {"refused"}
    for row in rows:
        assert row.text == content[:4000] and row.text_length == len(content) == 240_000
