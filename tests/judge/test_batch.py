"""Batch files for judge runs (docs/REFERENCE.md §3.8), answered by a script playing `vllm run-batch`
(tools/batch_runner.py) against the deterministic loopback server (tools/llm_server.py).

Expectations come from the server's fixed verdict function and the stored texts, or from what the
server received during an online run: never from the batch code itself.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from sqlmodel import Session, func, select

from db.rules.errors import PermissionDenied, ValidationFailed
from db.store.models import JudgeDecision, JudgeResult, JudgeRun
from judge import batch as batch_module
from judge.batch import export_judge_batch, import_batch
from judge.runner import REASK_TEXT, RunOptions, execute_run, run_judge
from tests.judge.test_judge_runner import build_world, decisions, world_items
from tests.support.factories import make_user
from tools.batch_runner import run_batch
from tools.llm_server import LLMServer


@pytest.fixture
def server():
    with LLMServer() as running:
        yield running


def batch_options(**overrides) -> RunOptions:
    values = dict(base_url=[], model="judge-8b", judge="cc-judge")
    values.update(overrides)
    return RunOptions(**values)


def requests_of(directory: Path) -> list[dict]:
    return [json.loads(line) for line in (directory / "requests.jsonl").read_text(encoding="utf-8").splitlines()]


def table_counts(session: Session) -> tuple[int, int, int]:
    found = (
        session.exec(select(func.count()).select_from(JudgeDecision)).one(),
        session.exec(select(func.count()).select_from(JudgeResult)).one(),
        session.exec(select(func.count()).select_from(JudgeRun)).one(),
    )
    session.commit()
    return found


def test_export_writes_the_format_and_keeps_names_out(engine, session, tmp_path):
    build_world(session, n_cases=2, n=3)
    exported = export_judge_batch(engine, tmp_path / "b1", batch_options())
    lines = requests_of(tmp_path / "b1")
    assert exported.requests == len(lines) == 2 * 3 * 2
    ids = [line["custom_id"] for line in lines]
    assert len(set(ids)) == len(ids)
    assert all(line["method"] == "POST" and line["url"] == "/v1/chat/completions" for line in lines)
    text = (tmp_path / "b1" / "requests.jsonl").read_text(encoding="utf-8")
    assert all("model-a" not in identifier and "模型B" not in identifier for identifier in ids)
    assert "\\u" not in text, "Chinese written as is"
    # Ordered by response, then criterion: each response's criteria adjacent and in rubric order.
    shown = [(line["body"]["messages"][0]["content"].split("# Rubric Item")[0]) for line in lines]
    changes = sum(1 for before, after in zip(shown, shown[1:]) if before != after)
    assert changes == 2 * 2 - 1
    manifest = json.loads((tmp_path / "b1" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["kind"] == "judge" and manifest["run"] == exported.run
    assert manifest["counts"] == {"requests": 12, "reasks": 0, "items": 12, "answered_before": 0}
    digest = hashlib.sha256((tmp_path / "b1" / "requests.jsonl").read_bytes()).hexdigest()
    assert manifest["sha256"] == {"requests.jsonl": digest}
    assert {"count", "hash"} <= set(manifest["audit_head"]) or manifest["audit_head"]
    assert len(manifest["template_sha256"]) == 64 and manifest["options"]["template"]
    run = session.get(JudgeRun, exported.run)
    assert run.status == "pending" and run.params["batch"]["requests"] == 12 and run.base_url == "batch"
    session.commit()
    # A batch's run is answered by import, never resumed online.
    with pytest.raises(ValidationFailed, match="is a batch"):
        execute_run(engine, exported.run)
    # A folder that holds a batch is not written over.
    with pytest.raises(ValidationFailed, match="holds a batch already"):
        export_judge_batch(engine, tmp_path / "b1", batch_options())


def test_partial_results_reimport_reasks_and_the_shared_cache(engine, session, tmp_path, server):
    markers = {("CC-0001", "c03"): "[bad]", ("CC-0001", "c04"): "[bad-once]", ("CC-0001", "c05"): "[down]"}
    build_world(session, n_cases=2, models=("model-a",), markers=markers)
    expected = world_items(session)
    first = export_judge_batch(engine, tmp_path / "b1", batch_options())
    assert first.requests == 10
    # The engine stops part-way: 6 of the 10 requests answered (c01..c05 of case 1, c01 of case 2).
    run_batch(tmp_path / "b1" / "requests.jsonl", tmp_path / "r1.jsonl", server.url, only=6)
    imported = import_batch(engine, "judge", tmp_path / "r1.jsonl", tmp_path / "b1")
    assert imported.lines == 6 and imported.errors == 1 and imported.parse_failures == 2
    assert imported.decisions == 3
    stored = decisions(session, "cc-judge")
    assert len(stored) == 3 and all(expected[key] == met for key, met in stored.items())
    before = table_counts(session)
    again = import_batch(engine, "judge", tmp_path / "r1.jsonl", tmp_path / "b1")
    assert again.new == 0 and again.decisions == 0 and again.already == 5
    assert table_counts(session) == before, "importing the same results twice changes nothing"

    # The next batch: the 4 never answered, the [down] error, and a re-ask of each unreadable answer.
    second = export_judge_batch(engine, tmp_path / "b2", batch_options())
    lines = requests_of(tmp_path / "b2")
    assert second.requests == 4 + 1 + 2 and second.reasks == 2
    reasks = [line for line in lines if len(line["body"]["messages"]) == 3]
    first_answers = {
        json.loads(line)["custom_id"]: json.loads(line)
        for line in (tmp_path / "r1.jsonl").read_text(encoding="utf-8").splitlines()
    }
    for line in reasks:
        original = line["custom_id"].removesuffix("-r1")
        unreadable = first_answers[original]["response"]["body"]["choices"][0]["message"]["content"]
        prompt = line["body"]["messages"][0]
        assert line["body"]["messages"] == [
            prompt,
            {"role": "assistant", "content": unreadable},
            {"role": "user", "content": REASK_TEXT},
        ]
    run_batch(tmp_path / "b2" / "requests.jsonl", tmp_path / "r2.jsonl", server.url)
    imported = import_batch(engine, "judge", tmp_path / "r2.jsonl", tmp_path / "b2")
    assert imported.decisions == 4 + 1 and imported.errors == 1 and imported.parse_failures == 1
    # Third round: the [bad] item's second re-ask, the [down] item again; then [bad] is done for good.
    third = export_judge_batch(engine, tmp_path / "b3", batch_options())
    assert third.requests == 2 and third.reasks == 1
    assert any(line["custom_id"].endswith("-r2") for line in requests_of(tmp_path / "b3"))
    run_batch(tmp_path / "b3" / "requests.jsonl", tmp_path / "r3.jsonl", server.url)
    import_batch(engine, "judge", tmp_path / "r3.jsonl", tmp_path / "b3")
    fourth = export_judge_batch(engine, tmp_path / "b4", batch_options())
    assert fourth.requests == 1 and "[down]" in requests_of(tmp_path / "b4")[0]["body"]["messages"][0]["content"]
    bad = session.exec(select(JudgeResult).where(JudgeResult.criterion_id == "c03")).all()
    assert [(row.parse_ok, row.attempts) for row in bad if "[bad]" in row.raw_output or not row.parse_ok] == [
        (False, 3)
    ]
    session.commit()
    stored = decisions(session, "cc-judge")
    assert len(stored) == 8 and all(expected[key] == met for key, met in stored.items())
    # The online run shares the cache: it asks only for the item no batch got an answer to.
    server.reset_counts()
    summary = run_judge(engine, RunOptions(base_url=server.url, model="judge-8b", judge="cc-judge", timeout=5))
    assert summary["cached"] == 9 and {b["messages"][0]["content"].count("[down]") for b in server.bodies} == {1}
    run = session.get(JudgeRun, first.run)
    assert run.status == "finished" and run.parse_failures == 2 and run.done == 5 and run.errors == 1
    session.commit()


def test_a_killed_import_run_again_stores_each_decision_once(engine, session, tmp_path, server, monkeypatch):
    build_world(session, n_cases=3, n=5)
    expected = world_items(session)
    export_judge_batch(engine, tmp_path / "b", batch_options())
    run_batch(tmp_path / "b" / "requests.jsonl", tmp_path / "r.jsonl", server.url)
    monkeypatch.setattr(batch_module, "STORE_CHUNK", 7)
    real_store = batch_module.JudgeBatch.store
    calls = []

    def dies_on_the_third_chunk(self, session_, answers):
        calls.append(len(answers))
        if len(calls) == 3:
            raise KeyboardInterrupt  # the process is stopped mid-import
        real_store(self, session_, answers)

    monkeypatch.setattr(batch_module.JudgeBatch, "store", dies_on_the_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        import_batch(engine, "judge", tmp_path / "r.jsonl", tmp_path / "b")
    assert len(decisions(session, "cc-judge")) == 14
    monkeypatch.setattr(batch_module.JudgeBatch, "store", real_store)
    rerun = import_batch(engine, "judge", tmp_path / "r.jsonl", tmp_path / "b")
    assert rerun.already == 14 and rerun.decisions == 16
    assert decisions(session, "cc-judge") == expected
    assert table_counts(session)[:2] == (30, 30), "each decision and each cached answer once"


def _results_line(identifier: str, content: str = '```json\n{"criteria_met": true}\n```') -> str:
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "judge-8b",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
    }
    return json.dumps(
        {"id": "b", "custom_id": identifier, "response": {"status_code": 200, "body": body}, "error": None}
    )


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("not_json", "r.jsonl line 2: not JSON"),
        ("unknown", "r.jsonl line 2: custom_id 'j-0000' is not a request of this batch"),
        ("duplicate", "r.jsonl line 2: custom_id"),
        ("no_id", "r.jsonl line 1: custom_id: missing"),
        ("bad_body", "r.jsonl line 1: response.body is not a chat completion"),
        ("no_status", "r.jsonl line 1: response.status_code"),
        ("requests_changed", "requests.jsonl: does not match its manifest"),
        ("manifest_run", "does not match run"),
        ("other_kind", "a generate batch, not a judge batch"),
        ("no_manifest", "manifest.json: no such file"),
        ("template_changed", "template file changed"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(engine, session, tmp_path, case, words):
    build_world(session, n_cases=1, n=3, models=("model-a",))
    template = tmp_path / "template.txt"
    template.write_text("{user_message}\n{response}\n{rubric_item}\n", encoding="utf-8")
    directory = tmp_path / "b"
    export_judge_batch(engine, directory, batch_options(template=str(template)))
    ids = [line["custom_id"] for line in requests_of(directory)]
    lines = [_results_line(identifier) for identifier in ids]
    if case == "not_json":
        lines[1] = "{not json"
    elif case == "unknown":
        lines[1] = _results_line("j-0000")
    elif case == "duplicate":
        lines[1] = lines[0]
    elif case == "no_id":
        lines[0] = json.dumps({"response": None, "error": {"message": "x"}})
    elif case == "bad_body":
        lines[0] = json.dumps({"custom_id": ids[0], "response": {"status_code": 200, "body": {"choices": 3}}})
    elif case == "no_status":
        lines[0] = json.dumps({"custom_id": ids[0], "response": {"body": {}}, "error": None})
    elif case == "requests_changed":
        with (directory / "requests.jsonl").open("a", encoding="utf-8") as handle:
            handle.write("\n")
    elif case == "manifest_run":
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
        manifest["template_sha256"] = "0" * 64
        (directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    elif case == "other_kind":
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
        manifest["kind"] = "generate"
        (directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    elif case == "no_manifest":
        (directory / "manifest.json").unlink()
    elif case == "template_changed":
        template.write_text("{user_message}\n\n{response}\n{rubric_item}\n", encoding="utf-8")
    (tmp_path / "r.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = table_counts(session)
    run_before = session.exec(select(JudgeRun.status, JudgeRun.done)).all()
    session.commit()
    with pytest.raises(ValidationFailed) as refused:
        import_batch(engine, "judge", tmp_path / "r.jsonl", directory)
    assert words in str(refused.value) and "\n" not in str(refused.value)
    assert table_counts(session) == before
    assert session.exec(select(JudgeRun.status, JudgeRun.done)).all() == run_before
    session.commit()


def test_answers_are_read_as_leniently_as_online(engine, session, tmp_path):
    """A server's unusual fields (no usage, a null finish reason, extra keys) do not refuse an answer."""
    build_world(session, n_cases=1, n=2, models=("model-a",))
    export_judge_batch(engine, tmp_path / "b", batch_options())
    lines = []
    for line in requests_of(tmp_path / "b"):
        body = {
            "choices": [{"message": {"role": "assistant", "content": '```json\n{"criteria_met": false}\n```'}, "x": 1}],
            "vendor_field": {"anything": True},
        }
        output = {"custom_id": line["custom_id"], "response": {"status_code": 200, "body": body}, "error": None}
        lines.append(json.dumps(output))
    (tmp_path / "r.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    imported = import_batch(engine, "judge", tmp_path / "r.jsonl", tmp_path / "b")
    assert imported.decisions == 2 and imported.parse_failures == 0
    assert set(decisions(session, "cc-judge").values()) == {False}


def test_only_admins_export_or_import(engine, session, tmp_path, server):
    build_world(session, n_cases=1, n=2, models=("model-a",))
    admin = make_user(session, "boss", "admin")
    checker = make_user(session, "chk", "checker", 1)
    session.commit()
    with pytest.raises(PermissionDenied):
        export_judge_batch(engine, tmp_path / "refused", batch_options(), by=checker)
    assert not (tmp_path / "refused").exists(), "refused before anything is written"
    exported = export_judge_batch(engine, tmp_path / "b", batch_options(), by=admin)
    run_batch(tmp_path / "b" / "requests.jsonl", tmp_path / "r.jsonl", server.url)
    before = table_counts(session)
    with pytest.raises(PermissionDenied):
        import_batch(engine, "judge", tmp_path / "r.jsonl", tmp_path / "b", by=checker)
    assert table_counts(session) == before
    assert import_batch(engine, "judge", tmp_path / "r.jsonl", tmp_path / "b", by=admin).decisions == 2
    assert session.get(JudgeRun, exported.run).created_by == "boss"
    session.commit()


def test_generate_batch_counts_truncated_and_empty_answers_as_online(engine, session, tmp_path, server):
    from db.store.models import GenerationResult, Response
    from judge.batch import export_generate_batch
    from judge.generate import GenerateOptions
    from tests.support.factories import make_case

    for number, marker in ((1, ""), (2, "[length]"), (3, "[empty]")):
        make_case(session, f"CC-{number:04d}", n=2, clinical_context=f"病例 {number}：头痛三天。{marker}")
    session.commit()
    options = dict(base_url=[], model="cand-7b", stored_as="cand-v1")
    exported = export_generate_batch(engine, tmp_path / "g", GenerateOptions(**options))
    assert exported.requests == 3
    run_batch(tmp_path / "g" / "requests.jsonl", tmp_path / "g.jsonl", server.url)
    imported = import_batch(engine, "generate", tmp_path / "g.jsonl", tmp_path / "g")
    assert imported.new == 3 and imported.decisions == 1
    statuses = sorted(session.exec(select(GenerationResult.status)).all())
    assert statuses == ["complete", "empty", "truncated"]
    assert len(session.exec(select(Response).where(Response.model == "cand-v1")).all()) == 1
    run = session.get(JudgeRun, exported.run)
    assert (run.truncated, run.empty, run.done, run.kind) == (1, 1, 3, "generate")
    session.commit()
    assert import_batch(engine, "generate", tmp_path / "g.jsonl", tmp_path / "g").new == 0
    # The truncated and empty answers are answered for good with these parameters: nothing to export again.
    assert export_generate_batch(engine, tmp_path / "g2", GenerateOptions(**options)).run is None
