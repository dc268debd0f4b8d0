"""`clinconsensus judge|generate batch export|import` and `plan calibration` (docs/REFERENCE.md §3.7, §3.8, §4.4).

Exit codes, the one-line refusals and "0 new decisions" on a re-import; the plan's JSON keys and values
against `analysis.calibration_plan` on the same database (its formula is checked against scipy elsewhere).
"""

from __future__ import annotations

import io
import json
import sys

import pytest
from sqlmodel import Session, func, select

from analysis import calibration_plan
from analysis.grid import prepare
from analysis.loader import load_frames
from analysis.metrics import DEFAULT_K
from cli.main import main
from db.store.engine import get_engine, make_engine
from db.store.models import JudgeDecision, Response
from demo import generator as demo
from tests.judge.test_judge_runner import build_world
from tools.batch_runner import run_batch
from tools.llm_server import LLMServer


@pytest.fixture
def cli(sqlite_url, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    get_engine.cache_clear()

    def run(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    run.url = sqlite_url
    yield run
    get_engine().dispose()
    get_engine.cache_clear()


def _count(url: str, table) -> int:
    engine = make_engine(url)
    with Session(engine) as session:
        found = session.exec(select(func.count()).select_from(table)).one()
    engine.dispose()
    return found


def test_judge_batch_round_trip_on_the_command_line(cli, tmp_path):
    engine = make_engine(cli.url)
    with Session(engine) as session:
        build_world(session, n_cases=2, n=3)
    engine.dispose()
    batch = tmp_path / "batch"
    code, out, err = cli("judge", "batch", "export", str(batch), "--model", "judge-8b", "--judge", "offline")
    assert code == 0 and "12 requests" in out, err
    with LLMServer() as server:
        run_batch(batch / "requests.jsonl", tmp_path / "results.jsonl", server.url)
    code, out, err = cli("judge", "batch", "import", str(tmp_path / "results.jsonl"), "--batch", str(batch))
    assert code == 0 and "12 new decisions" in out, err
    assert _count(cli.url, JudgeDecision) == 12
    code, out, err = cli("judge", "batch", "import", str(tmp_path / "results.jsonl"), "--batch", str(batch))
    assert code == 0 and "0 new decisions" in out
    code, out, _err = cli("judge", "batch", "import", str(tmp_path / "results.jsonl"), "--batch", str(batch), "--json")
    assert code == 0 and json.loads(out)["new_decisions"] == 0 and json.loads(out)["already"] == 12
    code, out, _err = cli("judge", "batch", "export", str(tmp_path / "again"), "--model", "judge-8b", "--judge", "x")
    assert code == 0 and "nothing to export" in out, "answered items are in the shared cache, whatever the judge name"
    assert "12 decisions written from answers already cached" in out, "as an online run writes its cache hits"
    engine = make_engine(cli.url)
    with Session(engine) as session:
        named = session.exec(select(func.count()).select_from(JudgeDecision).where(JudgeDecision.judge == "x")).one()
    engine.dispose()
    assert named == 12
    code, out, _err = cli("judge", "batch", "export", str(tmp_path / "third"), "--model", "judge-8b", "--judge", "x")
    assert code == 0 and out.strip() == "nothing to export: every item is answered (the cache)"
    # The same folder imported as a generate batch: one line, exit 1, nothing stored.
    code, out, err = cli("generate", "batch", "import", str(tmp_path / "results.jsonl"), "--batch", str(batch))
    assert code == 1 and "a judge batch, not a generate batch" in err and len(err.strip().splitlines()) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"custom_id": "j-nope", "response": null, "error": {"message": "x"}}\n', encoding="utf-8")
    code, out, err = cli("judge", "batch", "import", str(bad), "--batch", str(batch))
    assert code == 1 and "bad.jsonl line 1: custom_id 'j-nope' is not a request of this batch" in err
    assert _count(cli.url, JudgeDecision) == 24
    code, _out, err = cli("judge", "batch", "export", str(tmp_path / "x"), "--model", "j", "--max-tokens", "0")
    assert code == 1 and "--max-tokens 0" in err
    code, _out, err = cli("judge", "resume", "1")
    assert code == 1 and "is a batch" in err


def test_generate_batch_round_trip_on_the_command_line(cli, tmp_path):
    engine = make_engine(cli.url)
    with Session(engine) as session:
        build_world(session, n_cases=3, n=2, models=("model-a",))
    engine.dispose()
    before = _count(cli.url, Response)
    code, out, err = cli("generate", "batch", "export", str(tmp_path / "g"), "--model", "cand", "--as", "cand-v1")
    assert code == 0 and "3 requests" in out, err
    with LLMServer() as server:
        run_batch(tmp_path / "g" / "requests.jsonl", tmp_path / "g.jsonl", server.url)
    code, out, err = cli("generate", "batch", "import", str(tmp_path / "g.jsonl"), "--batch", str(tmp_path / "g"))
    assert code == 0 and "3 new responses" in out, err
    assert _count(cli.url, Response) == before + 3


def test_plan_calibration_prints_the_plan(cli, tmp_path):
    engine = make_engine(cli.url)
    demo.build_demo(engine, scale="small", seed=7)
    expected = calibration_plan.plan(prepare(load_frames(engine)), "judge-a", "model-gamma", DEFAULT_K, 0.2, 0.05)
    engine.dispose()
    code, out, err = cli(
        "plan", "calibration", "--judge", "judge-a", "--model", "model-gamma", "--half-width", "0.2", "--json"
    )
    assert code == 0, err
    printed = json.loads(out)
    assert list(printed) == ["n", "half_width", "classical_half_width", "sigma_y", "rho", "n_unlabeled", "n_basis"]
    assert printed == pytest.approx(expected.as_json())
    code, out, err = cli("plan", "calibration", "--judge", "judge-a", "--model", "model-gamma", "--half-width", "0.2")
    assert code == 0 and f"label n = {expected.n} responses" in out and f"{expected.n * 60:,} physician" in out
    code, out, err = cli("plan", "calibration", "--judge", "judge-a", "--model", "model-gamma", "--half-width", "0.001")
    assert code == 0 and "no sample reaches" in out
    code, out, err = cli("plan", "calibration", "--judge", "nobody", "--model", "model-gamma")
    assert code == 1 and err.strip() == "clinconsensus: --judge nobody: this judge has no decisions"
    code, out, err = cli("plan", "calibration", "--judge", "judge-a", "--model", "model-gamma", "--alpha", "2")
    assert code == 1 and "--alpha 2.0" in err and len(err.strip().splitlines()) == 1
