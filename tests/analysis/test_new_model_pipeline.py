"""A new model from no responses to a calibrated score, on the small demo, as the README walks it.

generate over two loopback endpoints (one stopped mid-run) → judge run → `assign calibration` → the
sample labeled by the demo physicians it was assigned to, both groups agreeing, through the labeling
save → the calibrated score in report.json and on the new-model page; re-running generate and judge
sends nothing (counted on fresh servers). Expectations come from the stored rows, the servers'
fixed answers and `ppi_py`, not from the page's own code.
"""

from __future__ import annotations

import json
import re

import numpy as np
import ppi_py
import pytest
from sqlmodel import select

from cli.main import main
from db import labeling, labels as label_room
from db.access.export_records import record_export
from db.rules.enums import AssignmentKind, Stage
from db.store.engine import get_engine, session_scope
from db.store.models import Assignment, CalibrationSample, GenerationResult, JudgeDecision, Response, User
from demo import generator as demo
from i18n import translate
from judge.generate import GenerateOptions, run_generate
from judge.runner import RunOptions, run_judge
from tests.judge.test_generate_and_endpoints import stop_after
from tests.support.apptest_helpers import open_page, signed_in, texts
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_label
from tests.support.page_save import as_sent
from tools.llm_server import LLMServer, expected_met

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")

NEW = "候选模型/v3:新"
JUDGE = "loopback-judge"
SAMPLE = 12
K = 10


def _generate(engine, *servers: LLMServer) -> dict:
    options = GenerateOptions(
        base_url=[server.url for server in servers],
        model="cand-7b",
        stored_as=NEW,
        cases="released",
        concurrency=2,
        max_retries=1,
        timeout=5,
    )
    return run_generate(engine, options)


def _judge(engine, server: LLMServer) -> dict:
    options = RunOptions(base_url=[server.url], model="judge-8b", judge=JUDGE, models=[NEW], concurrency=4, timeout=10)
    return run_judge(engine, options)


def _gold(criterion: str, response: str, position: int) -> bool:
    """The physicians' decision: the loopback judge's verdict, except on every seventh criterion."""
    met = expected_met(criterion, response)
    return not met if position % 7 == 3 else met


def _label_sample(engine) -> dict[int, list[bool]]:
    """Each sampled response is labeled by the annotator of each group it was assigned to (both agree);
    returns the decisions saved, response id → met per criterion."""
    with session_scope(engine) as session:
        sampled = session.exec(select(CalibrationSample.response_id).where(CalibrationSample.model == NEW)).all()
        pairs = session.exec(
            select(Assignment.response_id, Assignment.user_id).where(
                Assignment.kind == AssignmentKind.label, Assignment.response_id.in_(sampled)
            )
        ).all()
    assert len(pairs) == 2 * len(sampled)
    saved: dict[int, list[bool]] = {}
    view_criteria: dict[int, list[str]] = {}
    for response_id, user_id in pairs:
        with session_scope(engine) as session:
            user = session.get(User, user_id)
            view = labeling.response_for_labeling(session, user, response_id)
            decisions = [
                labeling.LabelInput(c.criterion_id, _gold(c.text, view.text, i))
                for i, c in enumerate(view.criteria, start=1)
            ]
            label_room.save(
                session,
                user,
                "annotation",
                response_id,
                **as_sent(decisions),
                rubric_version_id=view.rubric_version_id,
                expected_versions=view.expected_versions,
            )
        saved[response_id] = [d.met for d in decisions]
        view_criteria[response_id] = [d.criterion_id for d in decisions]
    # Each group's checker confirms its group's labels on every criterion: the sample's gold becomes final,
    # the only gold a calibrated score reads (docs/REFERENCE.md §4).
    with session_scope(engine) as session:
        checkers = [session.exec(select(User).where(User.username == f"check{g}")).one() for g in (1, 2)]
        for response_id, mets in saved.items():
            response = session.get(Response, response_id)
            for checker in checkers:
                for position, met in enumerate(mets, start=1):
                    criterion_id = view_criteria[response_id][position - 1]
                    make_label(session, response, criterion_id, met, checker, stage=Stage.check)
    return saved


def _expected_estimate(engine, gold: dict[int, list[bool]]) -> float:
    """PPI++ CACS@k of NEW read literally from the rows: L = the labeled sample, U = the other judged responses."""
    with session_scope(engine, read_only=True) as session:
        judged: dict[int, list[bool]] = {}
        for response_id, met in session.exec(
            select(JudgeDecision.response_id, JudgeDecision.met)
            .join(Response, Response.id == JudgeDecision.response_id)
            .where(JudgeDecision.judge == JUDGE, Response.model == NEW)
        ).all():
            judged.setdefault(response_id, []).append(bool(met))
    y, yhat, unlabeled = [], [], []
    for response_id, mets in judged.items():
        score = _cacs(sum(mets), len(mets))
        if response_id in gold:
            y.append(_cacs(sum(gold[response_id]), len(gold[response_id])))
            yhat.append(score)
        else:
            unlabeled.append(score)
    return float(ppi_py.ppi_mean_pointestimate(np.array(y), np.array(yhat), np.array(unlabeled))[0])


def _cacs(s: int, n: int) -> float:
    return (s - K + 1) / (n - K + 1) if s >= K else 0.0


@pytest.fixture
def demo_database(app_database, monkeypatch):
    monkeypatch.setenv(demo.PASSWORD_ENV, "demo-Test-pass-42")
    demo.build_demo(app_database, scale="small", seed=7)
    return app_database


def test_a_new_model_from_generate_to_a_calibrated_score(demo_database, tmp_path, capsys):
    engine = demo_database
    with session_scope(engine, read_only=True) as session:
        assert not session.exec(select(Response.id).where(Response.model == NEW)).first()
    with LLMServer(latency=0.02) as first, LLMServer(latency=0.02) as second:
        watcher = stop_after(second, 4)
        made = _generate(engine, first, second)
        watcher.join()
        assert made["status"] == "finished" and made["errors"] == 0
        shares = {share["base_url"]: share for share in made["endpoints"]}
        assert shares[second.url]["left_out"] and 0 < shares[second.url]["done"] < made["items"]
        judged = _judge(engine, first)
        assert judged["status"] == "finished" and judged["done"] == judged["items"] > 0
    with session_scope(engine, read_only=True) as session:
        responses = session.exec(select(Response).where(Response.model == NEW)).all()
        answered = session.exec(select(GenerationResult.case_pk).where(GenerationResult.status == "complete")).all()
    assert len(responses) == made["items"] == len(set(answered))

    # re-running both sends nothing
    with LLMServer() as first, LLMServer() as second:
        again = _generate(engine, first, second)
        rejudged = _judge(engine, first)
        assert first.requests == second.requests == 0
    assert again["cached"] == again["items"] and rejudged["cached"] == rejudged["items"]

    get_engine.cache_clear()
    assert main(["assign", "calibration", "--model", NEW, "--n", str(SAMPLE), "--seed", "5"]) == 0
    assert f"{SAMPLE} responses" in capsys.readouterr().out
    pending = open_page(signed_in(engine, "admin"), "admin-new-model")
    pending.selectbox(key="new_model_pick").set_value(NEW).run()
    assert not pending.exception and pending.warning, "no score before the sample is labeled"
    warnings = [warning.value for warning in pending.warning]
    assert any("0 条，至少需要 10 条" in warning for warning in warnings), warnings
    # The judge has graded nothing with gold yet: its agreement is unknown, and the page says so.
    assert any("一致性未知" in warning for warning in warnings), warnings
    gold = _label_sample(engine)

    report_path = tmp_path / "report.json"
    assert main(["report", "--json", str(report_path), "--k", str(K)]) == 0
    get_engine.cache_clear()
    report = json.loads(report_path.read_text(encoding="utf-8"))
    entry = report["calibrated"][JUDGE][NEW]
    assert entry["n_labeled"] == SAMPLE and entry["n_pending"] == 0
    assert entry["n_unlabeled"] == len(responses) - SAMPLE
    assert entry["cacs_at_k"]["estimate"] == pytest.approx(_expected_estimate(engine, gold), abs=1e-9)
    assert entry["cacs_at_k"]["ci_low"] <= entry["cacs_at_k"]["estimate"] <= entry["cacs_at_k"]["ci_high"]
    assert sorted(report["calibration_samples"][NEW]) == report["calibration_samples"][NEW]

    app = open_page(signed_in(engine, "admin"), "admin-new-model")
    assert not app.exception, [e.value for e in app.exception]
    app.selectbox(key="new_model_pick").set_value(NEW).run()
    assert not app.exception, [e.value for e in app.exception]
    shown = texts(app)
    assert "PPI++" in shown and f"{entry['cacs_at_k']['ci_low']:.1%}" in shown
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["校准估计（PPI++）"] == f"{entry['cacs_at_k']['estimate']:.1%}"
    assert metrics["已有回答的病例"] == str(len(responses))
    assert metrics[translate("gold_basis.sample.final", "zh")] == str(SAMPLE)  # the whole sample is final
    judges = app.dataframe[1].value.set_index("评审模型")
    assert judges.loc[JUDGE, "对此模型的判定"] == judged["items"]
    mf1 = judges.loc[JUDGE, "与金标准的宏 F1"]
    assert re.fullmatch(r"\d\.\d{3}", mf1) and 0 <= float(mf1) <= 1  # a score written as 0.512, not a rate
    assert "全部模型" in shown  # no SFT export names held-out models
    assert judges.loc[JUDGE, "比较的判定数"] == sum(len(mets) for mets in gold.values())
    assert translate("new_model.judges.basis.provisional", "zh") in shown  # the basis these tests read, stated

    # an SFT export holding the new model out: fidelity is measured on it, and the page says so
    with session_scope(engine) as session:
        record_export(session, actor="admin", kind="sft", details={"holdout_models": [NEW, "no-such-model"]})
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert f"最近一次 SFT 导出留出的模型上计算：{NEW}" in texts(app).replace("\\", "")  # names are escaped for Markdown
