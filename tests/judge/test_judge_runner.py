"""The judge runner against a real OpenAI-compatible HTTP server on loopback (tools/llm_server.py).

Every expectation is computed from the database rows and the server's fixed verdict function,
never from the runner's own code: request counts, retries, the concurrency limit, the cache
(zero requests on a re-run), resume after SIGKILL, parse failures kept out of the decisions, and
fidelity and scores from the run against scikit-learn and a plain count.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sklearn.metrics import f1_score
from sqlmodel import Session, select

from analysis.loader import load_frames
from analysis.report import build_report
from db.rules.errors import PermissionDenied, ValidationFailed
from db.store.models import Criterion, JudgeDecision, JudgeResult, JudgeRun, Response, RubricVersion
from db.work import judge_runs
from judge.runner import RunOptions, run_judge
from tests.support import recount
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_label, make_response, make_user
from tools.llm_server import LLMServer, expected_met

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")

ROOT = Path(__file__).resolve().parents[2]
OFFICIAL_TEMPLATE = ROOT / "analysis" / "templates" / "judge_prompt.txt"


def build_world(session: Session, n_cases: int = 3, n: int = 5, models=("model-a", "模型B"), markers=None) -> None:
    """Cases with n criteria each, one response per model; `markers` puts fault markers into criteria texts."""
    for c in range(1, n_cases + 1):
        case = make_case(
            session, f"CC-{c:04d}", n=n, clinical_context=f"病例 {c}：胸痛两小时。", user_request="请问需要做哪些检查？"
        )
        for model in models:
            make_response(session, case, model=model, text=f"{model} 对病例 {c} 的回答：建议心电图和肌钙蛋白。")
    for criterion in session.exec(select(Criterion)).all():
        for (case_id, criterion_id), marker in (markers or {}).items():
            if criterion.criterion_id == criterion_id and criterion.text.startswith(case_id):
                criterion.text = f"{criterion.text} {marker}"
                session.add(criterion)
    session.commit()


def world_items(session: Session) -> dict[tuple[int, str], bool]:
    """(response_id, criterion_id) → the server's verdict, from the stored texts."""
    items = {}
    for response in session.exec(select(Response)).all():
        rubric = session.exec(select(RubricVersion).where(RubricVersion.case_pk == response.case_pk)).first()
        for criterion in session.exec(select(Criterion).where(Criterion.rubric_version_id == rubric.id)).all():
            items[(response.id, criterion.criterion_id)] = expected_met(criterion.text, response.text)
    session.commit()  # end the read (on SQLite every transaction holds the write lock the runner needs)
    return items


def decisions(session: Session, judge: str) -> dict[tuple[int, str], bool]:
    rows = session.exec(select(JudgeDecision).where(JudgeDecision.judge == judge)).all()
    session.commit()
    return {(row.response_id, row.criterion_id): row.met for row in rows}


@pytest.fixture
def server():
    with LLMServer() as running:
        yield running


def options(server: LLMServer, **overrides) -> RunOptions:
    values = dict(base_url=server.url, model="judge-8b", judge="cc-judge", concurrency=4, max_retries=2, timeout=10)
    values.update(overrides)
    return RunOptions(**values)


def test_run_grades_every_item_and_a_rerun_sends_nothing(engine, session, server):
    build_world(session)
    expected = world_items(session)
    summary = run_judge(engine, options(server))
    assert summary["status"] == "finished"
    assert summary["items"] == summary["done"] == len(expected) == 30
    assert server.requests == 30 and summary["requests"] == 30
    assert summary["retries"] == 0 and summary["parse_failures"] == 0 and summary["errors"] == 0
    assert summary["prompt_tokens"] > 0 and summary["completion_tokens"] > 0
    session.expire_all()
    assert decisions(session, "cc-judge") == expected
    results = session.exec(select(JudgeResult)).all()
    assert len(results) == 30 and all(r.parse_ok and r.raw_output and r.latency_ms > 0 for r in results)
    assert {r.met for r in results} == {True, False}
    session.commit()

    again = run_judge(engine, options(server))
    assert server.requests == 30, "a re-run sends nothing already answered"
    assert again["done"] == again["cached"] == 30 and again["requests"] == 0
    # The same answers under another judge name come from the cache too, and become that judge's decisions.
    other = run_judge(engine, options(server, judge="another-name"))
    assert server.requests == 30 and other["cached"] == 30
    session.expire_all()
    assert decisions(session, "another-name") == expected
    # The import page's kept count moved with each run's decisions, as a count of the table says.
    assert recount.kept_judge_totals(session) == recount.recount_judge_totals(session)
    assert recount.kept_judge_totals(session) == [("another-name", 30), ("cc-judge", 30)]
    session.commit()


def test_requests_carry_the_official_prompt_temperature_seed_and_thinking_off(sqlite_engine, server):
    with Session(sqlite_engine) as session:
        build_world(session, n_cases=1, n=2, models=("model-a",))
        case_text = "病例 1：胸痛两小时。\n\n请问需要做哪些检查？"
        response_text = session.exec(select(Response.text)).one()
        criteria = session.exec(select(Criterion.text).order_by(Criterion.position)).all()
    run_judge(sqlite_engine, options(server, thinking=False, seed=77, concurrency=1))
    template = OFFICIAL_TEMPLATE.read_text(encoding="utf-8")
    assert [body["messages"] for body in server.bodies] == [
        [{"role": "user", "content": template.format(user_message=case_text, response=response_text, rubric_item=text)}]
        for text in criteria
    ]
    for body in server.bodies:
        assert body["temperature"] == 0 and body["seed"] == 77 and body["model"] == "judge-8b"
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        # The official judge answers in a fenced json block: no structured-output request by default.
        assert "response_format" not in body
    # The cache key is sha256 of the canonical request: model, messages and the answer-shaping parameters.
    with Session(sqlite_engine) as session:
        keys = {row.criterion_id: row.cache_key for row in session.exec(select(JudgeResult)).all()}
    parameters = {"max_tokens": 512, "seed": 77, "structured": "off", "temperature": 0.0, "thinking": False}
    for criterion_id, body in zip(("c01", "c02"), server.bodies):
        canonical = json.dumps(
            {"messages": body["messages"], "model": "judge-8b", "parameters": parameters},
            ensure_ascii=False,
            sort_keys=True,
            separators=(",", ":"),
        )
        assert keys[criterion_id] == hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def test_faults_retries_reasks_and_parse_failures(engine, session, server):
    markers = {
        ("CC-0001", "c01"): "[429]",
        ("CC-0001", "c02"): "[500]",
        ("CC-0001", "c03"): "[bad]",
        ("CC-0001", "c04"): "[bad-once]",
        ("CC-0001", "c05"): "[down]",
    }
    build_world(session, n_cases=2, models=("model-a",), markers=markers)
    expected = world_items(session)
    summary = run_judge(engine, options(server))
    # 10 items: [429] 2 requests, [500] 3, [bad] 3 (two re-asks), [bad-once] 2, [down] 3 (then given up), 5 clean.
    assert server.requests == 2 + 3 + 3 + 2 + 3 + 5
    assert summary["requests"] == server.requests
    assert summary["retries"] == 1 + 2 + 2 and summary["reasks"] == 2 + 1
    assert summary["parse_failures"] == 1 and summary["errors"] == 1
    assert summary["done"] == 9 and summary["items"] == 10
    assert server.statuses[429] == 1 and server.statuses[500] == 2 + 3
    session.expire_all()
    stored = decisions(session, "cc-judge")
    response_id = next(rid for (rid, cid) in expected if cid == "c03")
    bad = session.exec(
        select(JudgeResult).where(JudgeResult.criterion_id == "c03", JudgeResult.response_id == response_id)
    ).one()
    assert bad.parse_ok is False and bad.met is None and "maybe" in bad.raw_output and bad.attempts == 3
    assert (response_id, "c03") not in stored, "an unreadable answer is never stored as met or not met"
    assert (response_id, "c05") not in stored
    session.commit()
    assert stored == {
        key: value for key, value in expected.items() if key not in {(response_id, "c03"), (response_id, "c05")}
    }
    # A re-run sends only the item the endpoint never answered (the parse failure is answered: cached).
    before = server.requests
    again = run_judge(engine, options(server))
    assert server.requests - before == 3 and again["errors"] == 1 and again["parse_failures"] == 1


def test_concurrency_limit_is_held(sqlite_engine):
    with Session(sqlite_engine) as session:
        build_world(session, n_cases=4, n=6, models=("model-a",))
    with LLMServer(latency=0.05) as server:
        summary = run_judge(sqlite_engine, options(server, concurrency=3))
        assert summary["done"] == 24
        assert server.max_in_flight == 3


def test_structured_output_is_dropped_when_the_server_refuses_it(sqlite_engine):
    with Session(sqlite_engine) as session:
        build_world(session, n_cases=1, n=4, models=("model-a",))
        expected = world_items(session)
    with LLMServer(structured=False) as server:
        summary = run_judge(sqlite_engine, options(server, concurrency=1, structured="auto"))
        assert server.statuses[400] == 1 and server.requests == 5
        assert summary["done"] == 4 and summary["parse_failures"] == 0
        assert all("response_format" not in body for body in server.bodies[1:])
    with Session(sqlite_engine) as session:
        assert decisions(session, "cc-judge") == expected


def test_missing_models_and_limit_select_items(sqlite_engine, server):
    with Session(sqlite_engine) as session:
        build_world(session, n_cases=2, n=3)
    first = run_judge(sqlite_engine, options(server, models=["模型B"], limit=4))
    assert first["items"] == 4 and server.requests == 4
    missing = run_judge(sqlite_engine, options(server, responses="missing", judge="cc-judge"))
    assert missing["items"] == 12 - 4 and server.requests == 12
    with pytest.raises(ValidationFailed, match="no responses of nobody"):
        run_judge(sqlite_engine, options(server, models=["nobody"]))


def test_api_key_comes_from_the_environment_and_is_never_stored(sqlite_engine, server, monkeypatch):
    with Session(sqlite_engine) as session:
        build_world(session, n_cases=1, n=2, models=("model-a",))
    secret = "sk-test-very-secret-123"
    monkeypatch.setenv("JUDGE_API_KEY", secret)
    summary = run_judge(sqlite_engine, options(server, api_key_env="JUDGE_API_KEY"))
    assert server.authorizations == {f"Bearer {secret}"}
    assert summary["params"]["api_key_env"] == "JUDGE_API_KEY"
    with sqlite_engine.connect() as connection:
        dump = "\n".join(
            str(row)
            for table in ("judge_run", "judge_result", "judge_decision", "audit_log")
            for row in connection.exec_driver_sql(f"SELECT * FROM {table}")
        )
    assert secret not in dump and "JUDGE_API_KEY" in dump
    monkeypatch.delenv("JUDGE_API_KEY")
    with pytest.raises(ValidationFailed, match="JUDGE_API_KEY: that environment variable is not set"):
        run_judge(sqlite_engine, options(server, api_key_env="JUDGE_API_KEY"))


def test_only_admins_create_list_or_cancel_runs(session):
    annotator = make_user(session, "ann", role="annotator")
    checker = make_user(session, "chk", role="checker")
    admin = make_user(session, "boss", role="admin")
    fields = dict(
        judge="j", base_url="http://127.0.0.1:9/v1", model="m", template="official", template_sha256="0" * 64, params={}
    )
    for user in (annotator, checker):
        with pytest.raises(PermissionDenied):
            judge_runs.create_run(session, user, **fields)
        with pytest.raises(PermissionDenied):
            judge_runs.list_runs(session, user)
    run = judge_runs.create_run(session, admin, **fields)
    for user in (annotator, checker):
        with pytest.raises(PermissionDenied):
            judge_runs.request_cancel(session, user, run.id)
    assert judge_runs.request_cancel(session, admin, run.id).status == "cancelled"
    assert [r.id for r in judge_runs.list_runs(session, admin)] == [run.id]


def test_fidelity_and_scores_from_the_run_equal_the_report(engine, session, server):
    build_world(session, n_cases=4, n=5)
    g1, g2 = make_user(session, "a1", group_no=1), make_user(session, "a2", group_no=2)
    responses = session.exec(select(Response)).all()
    for response in responses:
        for i in range(1, 6):
            make_label(session, response, f"c{i:02d}", (response.id + i) % 3 != 0, g1)
            make_label(session, response, f"c{i:02d}", (response.id * i) % 4 != 1, g2)
    session.commit()
    expected = world_items(session)
    run_judge(engine, options(server))
    report = build_report(load_frames(engine), k=2, source="judge:cc-judge", resamples=0)

    def group(no):
        labels = {}
        for response in responses:
            for i in range(1, 6):
                labels[(response.id, f"c{i:02d}")] = (
                    ((response.id + i) % 3 != 0) if no == 1 else ((response.id * i) % 4 != 1)
                )
        return labels

    keys = sorted(expected)
    for no in (1, 2):
        truth = group(no)
        want = f1_score([truth[k] for k in keys], [expected[k] for k in keys], average="macro")
        assert report.judges.loc["cc-judge", f"mf1_group{no}"] == pytest.approx(want, abs=1e-12)
    # CACS@2 per model from the server's verdicts by plain counting (N = 5).
    for model in ("model-a", "模型B"):
        values = []
        for response in responses:
            if response.model != model:
                continue
            s = sum(expected[(response.id, f"c{i:02d}")] for i in range(1, 6))
            values.append(sum(s >= level for level in range(2, 6)) / 4)
        assert report.models.loc[model, "cacs_at_k"] == pytest.approx(sum(values) / len(values), abs=1e-12)
        assert report.models.loc[model, "n_responses"] == len(values)


def test_a_run_killed_with_sigkill_resumes_without_resending_answers(sqlite_url, tmp_path):
    from db.store.engine import make_engine

    engine = make_engine(sqlite_url)
    with Session(engine) as session:
        build_world(session, n_cases=6, n=5, models=("model-a", "模型B"))
        expected = world_items(session)
    env = {**os.environ, "DATABASE_URL": sqlite_url, "PYTHONPATH": str(ROOT)}
    with LLMServer(latency=0.15) as server:
        command = [
            sys.executable,
            "-m",
            "cli.main",
            "judge",
            "run",
            "--base-url",
            server.url,
            "--model",
            "judge-8b",
            "--judge",
            "cc-judge",
            "--concurrency",
            "2",
        ]
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with engine.connect() as connection:
                    stored = connection.exec_driver_sql("SELECT COUNT(*) FROM judge_result").scalar()
                if stored >= 8:
                    break
                time.sleep(0.05)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == -signal.SIGKILL
        with Session(engine) as session:
            answered = {row.cache_key for row in session.exec(select(JudgeResult)).all()}
            run = session.exec(select(JudgeRun)).one()
            assert run.status == "running" and 8 <= len(answered) < len(expected)
            later = judge_runs._aware(run.heartbeat_at) + judge_runs.STALE_AFTER * 2
            assert judge_runs.shown_status(run, now=later) == "interrupted"
        sent_before = server.requests
        result = subprocess.run(
            [sys.executable, "-m", "cli.main", "judge", "resume", str(run.id), "--json"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
        assert summary["status"] == "finished" and summary["done"] == len(expected)
        assert summary["cached"] == len(answered)
        assert server.requests - sent_before == len(expected) - len(answered)
    with Session(engine) as session:
        assert decisions(session, "cc-judge") == expected
        assert len(session.exec(select(JudgeResult)).all()) == len(expected)
    engine.dispose()


def test_command_line_judge_run_and_runs(sqlite_url, server, monkeypatch, capsys):
    from cli.main import main
    from db.store.engine import make_engine

    engine = make_engine(sqlite_url)
    with Session(engine) as session:
        build_world(session, n_cases=1, n=3, models=("model-a",))
    engine.dispose()
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    assert main(["judge", "run", "--base-url", server.url, "--model", "judge-8b", "--judge", "cc"]) == 0
    out = capsys.readouterr().out
    assert "finished" in out and "items 3, done 3" in out
    assert main(["judge", "runs", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["judge"], r["items"], r["done"], r["parse_failures"]) for r in runs] == [("cc", 3, 3, 0)]
    assert main(["judge", "run", "--base-url", "ftp://x", "--model", "m"]) == 1
    assert "--base-url 'ftp://x': expected an http(s) URL" in capsys.readouterr().err
    assert main(["judge", "run", "--base-url", server.url, "--model", "m", "--template", "/nonexistent.txt"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such template file" in err


def test_a_slow_answer_times_out_is_retried_and_counted_not_stored(sqlite_engine):
    with Session(sqlite_engine) as session:
        build_world(session, n_cases=1, n=3, models=("model-a",), markers={("CC-0001", "c02"): "[slow]"})
        expected = world_items(session)
    with LLMServer(slow_seconds=1.0) as server:
        summary = run_judge(sqlite_engine, options(server, timeout=0.4, max_retries=1, concurrency=2))
        # c02 is asked twice (the SDK's one retry after its timeout), then given up: an error, not a decision.
        assert summary["errors"] == 1 and summary["retries"] == 1 and summary["done"] == 2
        assert summary["requests"] == 2 + 2
    with Session(sqlite_engine) as session:
        stored = decisions(session, "cc-judge")
        assert stored == {key: value for key, value in expected.items() if key[1] != "c02"}
        assert session.exec(select(JudgeResult).where(JudgeResult.criterion_id == "c02")).all() == []


def test_a_refused_key_stops_the_run_with_the_endpoints_reason(sqlite_engine, monkeypatch):
    with Session(sqlite_engine) as session:
        build_world(session, n_cases=2, n=3, models=("model-a",))
    monkeypatch.setenv("WRONG_API_KEY", "sk-wrong")
    with LLMServer(api_key="sk-right") as server:
        summary = run_judge(sqlite_engine, options(server, api_key_env="WRONG_API_KEY", concurrency=1))
        assert (
            summary["status"] == "failed" and "(401)" in summary["message"] and "invalid api key" in summary["message"]
        )
        assert server.requests == 1, "a refused key is not retried item after item"
        assert summary["done"] == 0
    with Session(sqlite_engine) as session:
        assert session.exec(select(JudgeDecision)).all() == []


def test_structured_output_on_demand_fails_the_run_when_the_server_refuses_it(sqlite_engine):
    with Session(sqlite_engine) as session:
        build_world(session, n_cases=1, n=2, models=("model-a",))
    with LLMServer(structured=False) as server:
        summary = run_judge(sqlite_engine, options(server, structured="on", concurrency=1))
        assert summary["status"] == "failed" and "response_format is not supported" in summary["message"]
        assert server.requests == 1
    with LLMServer(structured=False) as server:
        summary = run_judge(sqlite_engine, options(server, structured="off", concurrency=1))
        assert summary["status"] == "finished" and server.statuses == {200: 2}
        assert all("response_format" not in body for body in server.bodies)


def test_an_endpoint_nobody_listens_on_fails_the_run_at_once(sqlite_engine):
    import socket

    with Session(sqlite_engine) as session:
        build_world(session, n_cases=3, n=5, models=("model-a",))
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    summary = run_judge(
        sqlite_engine,
        RunOptions(
            base_url=f"http://127.0.0.1:{port}/v1", model="m", judge="j", concurrency=2, max_retries=1, timeout=5
        ),
    )
    assert summary["status"] == "failed" and "cannot reach the endpoint" in summary["message"]
    assert summary["done"] == 0 and summary["errors"] >= 2
    with Session(sqlite_engine) as session:
        assert session.exec(select(JudgeResult)).all() == []
