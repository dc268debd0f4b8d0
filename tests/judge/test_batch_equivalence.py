"""Online and batch give the same decisions on the small demo, and each batch body is the body the online run sent.

Two copies of one small-demo database: the first is judged online against the loopback server, which keeps
every body it receives; the second exports a batch, has it answered by the script playing `vllm run-batch`
(tools/batch_runner.py) against a fresh server of the same fixed verdicts, and imports the results.
"""

from __future__ import annotations

import json
import shutil

import pytest
from sqlalchemy import text

from db.store.engine import make_engine
from demo import generator as demo
from judge.batch import export_generate_batch, export_judge_batch, import_batch
from judge.generate import GenerateOptions, run_generate
from judge.runner import RunOptions, run_judge
from tests.conftest import new_sqlite_url
from tools.batch_runner import run_batch
from tools.llm_server import LLMServer

MODEL = "model-gamma"


@pytest.fixture(scope="module")
def demo_copies(sqlite_template, tmp_path_factory):
    """Two identical small-demo databases."""
    folder = tmp_path_factory.mktemp("batch-equivalence")
    url = new_sqlite_url(sqlite_template, folder)
    engine = make_engine(url)
    demo.build_demo(engine, scale="small", seed=7)
    engine.dispose()
    source = url.removeprefix("sqlite:///")
    copy = str(folder / "copy.db")
    shutil.copyfile(source, copy)
    return f"sqlite:///{source}", f"sqlite:///{copy}"


def _released_counts(engine) -> tuple[int, int]:
    """(responses of MODEL, cases) on cases with an approved rubric: what a run judges or answers."""
    approved = "SELECT case_pk FROM rubric_version WHERE status = 'approved'"
    with engine.connect() as connection:
        responses = connection.execute(
            text(f"SELECT count(*) FROM response WHERE model = :m AND case_pk IN ({approved})"), {"m": MODEL}
        ).scalar_one()
        cases = connection.execute(text(f'SELECT count(*) FROM "case" WHERE id IN ({approved})')).scalar_one()
    return int(responses), int(cases)


def _decisions(engine, judge: str) -> dict[tuple[int, str], bool]:
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT response_id, criterion_id, met FROM judge_decision WHERE judge = :judge"), {"judge": judge}
        )
        return {(row[0], row[1]): bool(row[2]) for row in rows}


@pytest.mark.parametrize("structured", ["off", "on"])
def test_online_and_batch_decisions_and_bodies_are_identical(demo_copies, tmp_path, structured):
    online_engine, batch_engine = (make_engine(url) for url in demo_copies)
    judge = f"equivalence-{structured}"
    n_items = _released_counts(online_engine)[0] * 30
    options = dict(model="judge-8b", judge=judge, models=[MODEL], structured=structured, thinking=False, seed=5)
    with LLMServer() as server:
        summary = run_judge(online_engine, RunOptions(base_url=server.url, concurrency=4, **options))
        online_bodies = list(server.bodies)
    assert summary["status"] == "finished" and summary["done"] == summary["items"] == n_items > 0
    exported = export_judge_batch(batch_engine, tmp_path / "batch", RunOptions(base_url=[], **options))
    assert exported.requests == n_items
    with LLMServer() as server:
        run_batch(tmp_path / "batch" / "requests.jsonl", tmp_path / "results.jsonl", server.url)
    imported = import_batch(batch_engine, "judge", tmp_path / "results.jsonl", tmp_path / "batch")
    assert imported.decisions == n_items and imported.errors == 0 and imported.parse_failures == 0

    online, batch = _decisions(online_engine, judge), _decisions(batch_engine, judge)
    assert len(online) == n_items and online == batch
    assert {True, False} == set(online.values())
    requests = [json.loads(line) for line in (tmp_path / "batch" / "requests.jsonl").read_text("utf-8").splitlines()]
    by_prompt = {body["messages"][0]["content"]: body for body in online_bodies}
    assert len(by_prompt) == len(online_bodies) == n_items
    for line in requests:
        assert line["body"] == by_prompt[line["body"]["messages"][0]["content"]]
    assert ("response_format" in requests[0]["body"]) == (structured == "on")
    assert requests[0]["body"]["chat_template_kwargs"] == {"enable_thinking": False}
    online_engine.dispose()
    batch_engine.dispose()


def test_generated_answers_online_and_by_batch_are_identical(demo_copies, tmp_path):
    online_engine, batch_engine = (make_engine(url) for url in demo_copies)
    options = dict(model="cand-7b", stored_as="candidate-x", cases="released", max_tokens=300)
    n_cases = _released_counts(online_engine)[1]
    with LLMServer() as server:
        summary = run_generate(online_engine, GenerateOptions(base_url=server.url, **options))
        online_bodies = list(server.bodies)
    assert summary["done"] == n_cases > 0
    exported = export_generate_batch(batch_engine, tmp_path / "gen", GenerateOptions(base_url=[], **options))
    assert exported.requests == n_cases
    with LLMServer() as server:
        run_batch(tmp_path / "gen" / "requests.jsonl", tmp_path / "gen.jsonl", server.url)
    imported = import_batch(batch_engine, "generate", tmp_path / "gen.jsonl", tmp_path / "gen")
    assert imported.decisions == n_cases
    query = text('SELECT c.case_id, r.text FROM response r JOIN "case" c ON c.id = r.case_pk WHERE r.model = :m')
    with online_engine.connect() as a, batch_engine.connect() as b:
        assert dict(a.execute(query, {"m": "candidate-x"}).all()) == dict(b.execute(query, {"m": "candidate-x"}).all())
    requests = [json.loads(line) for line in (tmp_path / "gen" / "requests.jsonl").read_text("utf-8").splitlines()]
    by_prompt = {body["messages"][-1]["content"]: body for body in online_bodies}
    assert all(line["body"] == by_prompt[line["body"]["messages"][-1]["content"]] for line in requests)
    again = import_batch(batch_engine, "generate", tmp_path / "gen.jsonl", tmp_path / "gen")
    assert again.new == 0
    # Answered by the batch: neither another export nor an online run asks again (one cache).
    nothing = export_generate_batch(batch_engine, tmp_path / "gen2", GenerateOptions(base_url=[], **options))
    assert nothing.run is None and not (tmp_path / "gen2").exists()
    with LLMServer() as server:
        rerun = run_generate(batch_engine, GenerateOptions(base_url=server.url, **options))
        assert server.requests == 0 and rerun["cached"] == n_cases
    online_engine.dispose()
    batch_engine.dispose()
