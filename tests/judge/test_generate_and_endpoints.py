"""`generate` and runs over several endpoints, against real OpenAI-compatible HTTP servers on loopback.

Every expectation is computed from the stored rows and the servers' fixed answer functions
(tools/llm_server.py: `expected_met`, `expected_answer`), never from the runner's own code: one of two
servers stopped mid-run (the run finishes, every item answered once, each endpoint's share recorded),
truncated and empty answers counted and never stored as responses, re-runs sending nothing (counted
on the servers), the structured-output default, and one-line refusals that store nothing.
"""

from __future__ import annotations

import threading
import time

import pytest
from sqlmodel import Session, func, select

from analysis.prompt import user_message
from db.store.models import GenerationResult, JudgeDecision, JudgeResult, JudgeRun, Response
from judge.generate import GenerateOptions, run_generate
from judge.runner import RunOptions, run_judge
from tests.judge.test_judge_runner import build_world, decisions, world_items
from tests.support.factories import make_case, make_response
from tools.llm_server import LLMServer, expected_answer

CANDIDATE = "候选模型-v2"


def stop_after(server: LLMServer, requests: int) -> threading.Thread:
    """Stops `server` (closing its connections in use) once it has answered `requests` requests."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        while server.requests < requests and time.monotonic() < deadline:
            time.sleep(0.005)
        server.stop()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_judge_run_over_two_endpoints_survives_one_stopped_mid_run(sqlite_engine):
    with Session(sqlite_engine) as session:
        build_world(session, n_cases=6, n=5)
        expected = world_items(session)
    with LLMServer(latency=0.02) as first, LLMServer(latency=0.02) as second:
        watcher = stop_after(second, 8)
        summary = run_judge(
            sqlite_engine,
            RunOptions(
                base_url=[first.url, second.url], model="judge-8b", judge="cc", concurrency=3, max_retries=1, timeout=5
            ),
        )
        watcher.join()
    assert summary["status"] == "finished" and summary["errors"] == 0
    assert summary["items"] == summary["done"] == len(expected) == 60
    shares = {share["base_url"]: share for share in summary["endpoints"]}
    assert set(shares) == {first.url, second.url}
    assert shares[second.url]["left_out"] and not shares[first.url]["left_out"]
    assert 0 < shares[second.url]["done"] < 60 and shares[second.url]["errors"] >= 1
    assert shares[first.url]["done"] + shares[second.url]["done"] == 60
    assert "left out" in summary["message"]
    with Session(sqlite_engine) as session:
        assert decisions(session, "cc") == expected
        results = session.exec(select(JudgeResult)).all()
        assert len(results) == 60 == len({row.cache_key for row in results}), "every item answered once"


def test_a_run_fails_when_every_endpoint_is_left_out(sqlite_engine):
    with Session(sqlite_engine) as session:
        build_world(session, n_cases=2, n=3, models=("model-a",))
    with LLMServer() as first, LLMServer() as second:
        first.broken = second.broken = True
        summary = run_judge(
            sqlite_engine,
            RunOptions(base_url=[first.url, second.url], model="m", judge="j", concurrency=1, max_retries=0, timeout=5),
        )
    assert summary["status"] == "failed" and summary["message"].startswith("every endpoint failed")
    assert all(share["left_out"] for share in summary["endpoints"]) and summary["done"] == 0


def build_cases(session: Session) -> dict[str, str]:
    """Six cases (one truncated, one empty answer; one without an approved rubric); case_id → user message."""
    requests = {2: "请详细说明。[length]", 3: "请回答。[empty]"}
    messages = {}
    for c in range(1, 7):
        request = requests.get(c, f"第 {c} 个问题：下一步怎么办？")
        make_case(session, f"CC-{c:04d}", n=0 if c == 6 else 3, clinical_context=f"病例 {c}", user_request=request)
        messages[f"CC-{c:04d}"] = user_message(f"病例 {c}", request)
    session.commit()
    return messages


def stored_responses(engine, model: str) -> dict[str, str]:
    with Session(engine) as session:
        rows = session.exec(select(Response).where(Response.model == model)).all()
        return {f"CC-{row.case_pk:04d}": row.text for row in rows}


def generate_options(*servers: LLMServer, **overrides) -> GenerateOptions:
    values = dict(
        base_url=[server.url for server in servers],
        model="cand-7b",
        stored_as=CANDIDATE,
        concurrency=2,
        max_retries=1,
        timeout=5,
    )
    values.update(overrides)
    return GenerateOptions(**values)


def test_generate_stores_complete_answers_counts_the_rest_and_reruns_send_nothing(sqlite_engine):
    with Session(sqlite_engine) as session:
        messages = build_cases(session)
    complete = {case_id: expected_answer(text) for case_id, text in messages.items() if case_id[-1] not in "23"}
    with LLMServer(latency=0.03) as first, LLMServer(latency=0.03) as second:
        watcher = stop_after(second, 2)
        summary = run_generate(sqlite_engine, generate_options(first, second))
        watcher.join()
        assert summary["kind"] == "generate" and summary["status"] == "finished" and summary["errors"] == 0
        assert summary["items"] == summary["done"] == 6
        assert summary["truncated"] == 1 and summary["empty"] == 1
        assert sum(share["done"] for share in summary["endpoints"]) == 6
        assert stored_responses(sqlite_engine, CANDIDATE) == complete
        with Session(sqlite_engine) as session:
            rows = session.exec(select(GenerationResult)).all()
            statuses = {row.case_pk: (row.status, row.response_id is not None) for row in rows}
        assert statuses[2] == ("truncated", False) and statuses[3] == ("empty", False)
        assert statuses[1] == ("complete", True)
        # The user message is built as judges read it, and nothing else is sent.
        bodies = first.bodies + second.bodies
        assert {"messages": [{"role": "user", "content": messages["CC-0001"]}]}.items() <= next(
            body for body in bodies if body["messages"][0]["content"] == messages["CC-0001"]
        ).items()
        sent = first.requests + second.requests

        again = run_generate(sqlite_engine, generate_options(first))
        assert first.requests + second.requests == sent, "a re-run sends nothing"
        assert again["cached"] == again["done"] == 6 and again["requests"] == 0
        assert again["truncated"] == 1 and again["empty"] == 1
        # The same answers stored under another name come from the cache too.
        other = run_generate(sqlite_engine, generate_options(first, stored_as="别名"))
        assert other["requests"] == 0 and stored_responses(sqlite_engine, "别名") == complete
        # Other parameters ask again; `released` leaves out the case without an approved rubric.
        more = run_generate(sqlite_engine, generate_options(first, max_tokens=8192, cases="released"))
        assert more["items"] == 5 and more["requests"] == 5
    assert stored_responses(sqlite_engine, CANDIDATE) == complete


def test_generate_case_file_and_the_judge_then_grades_the_answers(sqlite_engine, tmp_path):
    with Session(sqlite_engine) as session:
        messages = build_cases(session)
    listing = tmp_path / "cases.txt"
    listing.write_text("CC-0004\n\nCC-0001\nCC-0004\n", encoding="utf-8")
    with LLMServer() as server:
        summary = run_generate(sqlite_engine, generate_options(server, cases=str(listing)))
        assert summary["items"] == 2 and server.requests == 2
        assert set(stored_responses(sqlite_engine, CANDIDATE)) == {"CC-0001", "CC-0004"}
        judged = run_judge(sqlite_engine, RunOptions(base_url=server.url, model="j", judge="j", models=[CANDIDATE]))
        assert judged["items"] == judged["done"] == 6
    with Session(sqlite_engine) as session:
        assert len(session.exec(select(JudgeDecision)).all()) == 6
    assert stored_responses(sqlite_engine, CANDIDATE)["CC-0001"] == expected_answer(messages["CC-0001"])


def test_structured_output_default_follows_the_template(sqlite_engine):
    with Session(sqlite_engine) as session:
        build_world(session, n_cases=1, n=2, models=("model-a",))
    with LLMServer() as server:
        official = run_judge(sqlite_engine, RunOptions(base_url=server.url, model="m", judge="a", concurrency=1))
        assert official["params"]["structured"] == "off"
        assert server.bodies and all("response_format" not in body for body in server.bodies)
        server.reset_counts()
        run_judge(sqlite_engine, RunOptions(base_url=server.url, model="m", judge="b", template="zh", concurrency=1))
        assert server.bodies and all(body["response_format"]["type"] == "json_schema" for body in server.bodies)
        server.reset_counts()
        run_judge(sqlite_engine, RunOptions(base_url=server.url, model="m", judge="c", structured="on"))
        assert server.bodies and all("response_format" in body for body in server.bodies)


def counts(engine) -> tuple[int, int, int]:
    with Session(engine) as session:
        return (
            session.exec(select(func.count()).select_from(JudgeRun)).one(),
            session.exec(select(func.count()).select_from(Response)).one(),
            session.exec(select(func.count()).select_from(GenerationResult)).one(),
        )


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["generate", "--model", "m"], "--base-url: give at least one endpoint"),
        (["judge", "run", "--model", "m"], "--base-url: give at least one endpoint"),
        (["generate", "--model", "m", "--base-url", "{url}", "--cases", "{missing}"], "no such file"),
        (["generate", "--model", "m", "--base-url", "{url}", "--cases", "{bad}"], "line 2: unknown case id 'CC-9999'"),
        (["generate", "--model", "m", "--base-url", "{url}", "--api-key-env", "DATABASE_URL"], "not an API-key"),
        (["judge", "run", "--model", "m", "--base-url", "{url}", "--api-key-env", "HOME"], "not an API-key"),
        (["generate", "--model", "m", "--base-url", "{url}", "--base-url", "{url}"], "each endpoint once"),
    ],
)
def test_bad_inputs_are_one_line_refusals_that_store_nothing(
    sqlite_url, tmp_path, monkeypatch, capsys, arguments, message
):
    from cli.main import main
    from db.migrations.upgrade import upgrade
    from db.store.engine import make_engine

    engine = make_engine(sqlite_url)
    upgrade(engine)
    with Session(engine) as session:
        case = make_case(session, "CC-0001", n=2)
        make_response(session, case, model="model-a", text="回答")
        session.commit()
    before = counts(engine)
    bad = tmp_path / "bad.txt"
    bad.write_text("CC-0001\nCC-9999\n", encoding="utf-8")
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    with LLMServer() as server:
        filled = [a.format(url=server.url, missing=tmp_path / "none.txt", bad=bad) for a in arguments]
        assert main(filled) == 1
        assert server.requests == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert counts(engine) == before
    engine.dispose()


def test_command_line_generate_prints_truncated_and_empty(sqlite_url, monkeypatch, capsys):
    from cli.main import main
    from db.store.engine import make_engine

    engine = make_engine(sqlite_url)
    with Session(engine) as session:
        build_cases(session)
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    with LLMServer() as server:
        code = main(["generate", "--base-url", server.url, "--model", "cand", "--as", CANDIDATE, "--cases", "released"])
    out = capsys.readouterr().out
    assert code == 0 and "generate run" in out and "truncated 1, empty 1 (not stored)" in out
    assert len(stored_responses(engine, CANDIDATE)) == 3
    engine.dispose()
