"""Round trip with the official ClinConsensus tools, checked with our own re-implementation of their rules.

tests/official_rules.py re-implements scripts/eval_cacs.py and scripts/validate_dataset.py
(--strict-contact); here they run on our exports: the official scorer must accept every
judgements export unchanged and reproduce scores.json (overall, difficulty and subject slices) for
gold, group and judge sources; a release of the 900 low cases must pass the strict validation; our
contact scan must flag whatever the official check flags. The official local judge is emulated
row by row on our judge-items (its prompt filled with `str.format`, its answer read with its
regex), and its output imported back.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score
from sqlmodel import Session, select

from analysis import metrics
from analysis.exports.judge_items import export_judge_items
from analysis.exports.judgements import export_judgements
from analysis.exports.release import export_release
from analysis.exports.sft import export_sft
from analysis.loader import load_frames
from analysis.prompt import PromptTemplate, read_template
from analysis.report import build_report, report_json
from db.importers import ImportFailed, import_file
from db.rules.errors import ValidationFailed
from db.store.models import Case, JudgeDecision, Response
from judge.runner import RunOptions, run_judge
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_label, make_response, make_user
from tests.support.official_rules import (
    CASE_SCORE_COLUMNS,
    OfficialFailure,
    case_rows,
    eval_cacs,
    validate_release,
)
from tools.llm_server import LLMServer, expected_met

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")

#: sha256 of the PROMPT string of scripts/run_local_judge.py (the text between its triple quotes).
OFFICIAL_PROMPT_SHA256 = "2adcd5b6d2b8bf9a978170383ec7c5fc65430509e9eb69851755c0a7a21a762e"
OFFICIAL_REGEX = re.compile(r'"criteria_met"\s*:\s*(true|false)', re.IGNORECASE)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# The prompt ---------------------------------------------------------------------------------------


def test_default_template_is_the_official_inference_prompt_filled_by_str_format():
    official = read_template(None)
    assert read_template("official") == official
    assert hashlib.sha256(official.encode("utf-8")).hexdigest() == OFFICIAL_PROMPT_SHA256
    tricky = {
        "user_message": '病例 {response} 引号" 反斜杠\\ {{双括号}}',
        "response": "回答含 {rubric_item} 和 {} 与 }{",
        "rubric_item": "标准：{user_message!r}",
    }
    for name in ("official", "zh"):
        template = read_template(name)
        assert PromptTemplate(template).fill(**tricky) == template.format(**tricky)
        assert "{{" not in template.format(**tricky).replace(tricky["user_message"], "")
    for text, message in (
        ("{user_message}{response}{rubric_item}{foo}", "unknown placeholder {foo}"),
        ("{user_message}{response}{rubric_item} }", "not a str.format template"),
        ("{user_message}{response!r}{rubric_item}", "must be plain"),
        ("{user_message}{response}", "lacks the placeholder(s) {rubric_item}"),
    ):
        with pytest.raises(ValidationFailed, match=re.escape(message)):
            PromptTemplate(text)


def test_sft_rows_carry_the_official_prompt(sqlite_engine, tmp_path):
    with Session(sqlite_engine) as session:
        case = make_case(session, "CC-0001", n=3, clinical_context="背景 {x}", user_request="问题？")
        response = make_response(session, case, "model-a", "回答 {response}")
        users = [make_user(session, f"u{group}", group_no=group) for group in (1, 2)]
        for i in range(1, 4):
            for user in users:
                make_label(session, response, f"c{i:02d}", i % 2 == 1, user)
        session.commit()
    export_sft(sqlite_engine, tmp_path / "sft", dev_fraction=0)
    rows = read_jsonl(tmp_path / "sft" / "train.jsonl")
    official = read_template("official")
    assert [row["instruction"] for row in rows] == [
        official.format(
            user_message="背景 {x}\n\n问题？", response="回答 {response}", rubric_item=f"CC-0001 的第 {i} 条评分标准"
        )
        for i in range(1, 4)
    ]
    assert (tmp_path / "sft" / "judge_prompt.txt").read_text(encoding="utf-8") == official
    assert json.loads((tmp_path / "sft" / "manifest.json").read_text(encoding="utf-8"))["options"]["template"] == (
        "official"
    )


# Local-judge output back in, and the official scorer on the export ---------------------------------


def build_world(session: Session, n: int = 6) -> None:
    subjects = [["心内科"], ["心内科", "急诊科"], ["呼吸科", "心内科"], ["儿科"]]
    for c in range(1, 9):
        case = make_case(
            session,
            f"CC-{c:04d}",
            n=n,
            difficulty=("low", "medium", "high")[c % 3],
            subject_labels=subjects[c % 4],
            subject=subjects[c % 4][0],
        )
        for model in ("model-a", "org/model-b", "模型C"):
            make_response(session, case, model, text=f"{model} 对病例 {c} 的回答，共 {c * 7 % 11} 条建议。")
    session.commit()


def emulate_local_judge(items: list[dict], unreadable: set[tuple[str, str]]) -> list[dict]:
    """What scripts/run_local_judge.py writes: the input row + criteria_met, parse_ok, judge_output."""
    template = read_template("official")
    out = []
    for row in items:
        prompt = template.format(**{key: row[key] for key in ("user_message", "response", "rubric_item")})
        assert row["rubric_item"] in prompt and "{{" not in prompt
        if (row["model"], row["criterion_id"]) in unreadable:
            raw = "我无法判断这条标准。"
        else:
            raw = '```json\n{"explanation": "理由", "criteria_met": %s}\n```' % (
                "true" if expected_met(row["rubric_item"], row["response"]) else "false"
            )
        match = OFFICIAL_REGEX.search(raw)
        label = (match.group(1).lower() == "true") if match else None
        out.append({**row, "criteria_met": label, "parse_ok": match is not None, "judge_output": raw})
    return out


def test_local_judge_output_imports_and_the_official_scorer_reproduces_our_scores(engine, session, tmp_path):
    build_world(session)
    export_judge_items(engine, tmp_path / "items.jsonl")
    items = read_jsonl(tmp_path / "items.jsonl")
    assert len(items) == 8 * 3 * 6
    output = emulate_local_judge(items, unreadable={("模型C", "c02")})
    path = tmp_path / "local_judge_output.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in output), encoding="utf-8")

    with pytest.raises(ImportFailed, match="line 1: judge is missing"):
        import_file(engine, "judge", path)
    summary = import_file(engine, "judge", path, judge="cc-judge-8b")
    assert summary.fmt == "local-judge" and summary.unparsed == 8
    assert summary.inserted == len(items) - 8
    assert any("skipped 8 rows" in line for line in summary.lines())
    stored = session.exec(
        select(JudgeDecision, Response).join(Response, JudgeDecision.response_id == Response.id)
    ).all()
    assert len(stored) == len(items) - 8 and all(d.judge == "cc-judge-8b" for d, _ in stored)
    assert not [d for d, r in stored if r.model == "模型C" and d.criterion_id == "c02"]
    assert all(d.extra["parse_ok"] is True and d.extra["judge_output"] for d, _ in stored)
    session.commit()

    # The unreadable criterion leaves 模型C with no complete response: it is left out, the others scored.
    out = tmp_path / "judgements"
    export_judgements(engine, out, source="judge:cc-judge-8b", k=3)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["models_left_out"] == {"模型C": "no complete response by judge:cc-judge-8b"}
    official = eval_cacs(out / "cases.jsonl", out / "judgements", threshold=3)
    ours = json.loads((out / "scores.json").read_text(encoding="utf-8"))
    assert_official_equals_ours(official, ours)
    report = report_json(build_report(load_frames(engine), k=3, source="judge:cc-judge-8b", resamples=0))
    for model in ("model-a", "org/model-b"):
        assert ours["models"][model]["cacs_at_k"] == pytest.approx(report["models"][model]["cacs_at_k"], abs=1e-12)
        # the report's subject slice is the official subject:<label> slice
        for label, by_model in report["slices"]["subject"].items():
            if model in by_model:
                assert by_model[model] == pytest.approx(ours["slices"]["subject"][label][model]["cacs_at_k"])
    # The official scorer on the old layout stopped at manifest.json; on ours nothing but judge files is read.
    assert sorted(p.suffix for p in (out / "judgements").iterdir()) == [".json", ".json"]


def assert_official_equals_ours(official: dict, ours: dict) -> None:
    """Every (model, slice) row of the official summary equals scores.json (fractions vs percent)."""
    checked = 0
    for (model, part), row in official.items():
        model = unquote(model)
        if part == "overall":
            block = ours["models"][model]
        elif part.startswith("subject:"):
            block = ours["slices"]["subject"][part[len("subject:") :]][model]
        else:
            block = ours["slices"]["difficulty"][part][model]
        assert row["cases"] == block["n_responses"]
        assert row["rubric_accuracy_pct"] / 100 == pytest.approx(block["rubric_accuracy"], abs=1e-12)
        assert row["pass_at_k_pct"] / 100 == pytest.approx(block["pass_at_k"], abs=1e-12)
        assert row["cacs_at_k_pct"] / 100 == pytest.approx(block["cacs_at_k"], abs=1e-12)
        checked += 1
    assert checked >= 3 * len(ours["models"])


@pytest.fixture
def demo_engine(sqlite_engine):
    from demo.generator import build_demo

    build_demo(sqlite_engine, scale="small", seed=7)
    return sqlite_engine


def test_official_scorer_runs_unchanged_on_gold_group_and_judge_exports_of_the_demo(demo_engine, tmp_path):
    largest_difference = 0.0
    for source in ("gold", "group1", "group2", "judge:judge-a", "judge:judge-b"):
        out = tmp_path / source.replace(":", "_")
        export_judgements(demo_engine, out, source=source, k=10)
        official = eval_cacs(out / "cases.jsonl", out / "judgements", threshold=10)
        ours = json.loads((out / "scores.json").read_text(encoding="utf-8"))
        assert_official_equals_ours(official, ours)
        for (model, part), row in official.items():
            if part == "overall":
                largest_difference = max(
                    largest_difference, abs(row["cacs_at_k_pct"] / 100 - ours["models"][model]["cacs_at_k"])
                )
    assert largest_difference < 1e-12
    # The old layout (manifest beside the files) is exactly what made the official scorer stop.
    (tmp_path / "gold" / "judgements" / "manifest.json").write_text("{}", encoding="utf-8")
    with pytest.raises(OfficialFailure, match="manifest.json has non-list rows"):
        eval_cacs(tmp_path / "gold" / "cases.jsonl", tmp_path / "gold" / "judgements")


def test_per_model_export_reproduces_the_report_of_every_model_for_every_source(demo_engine, tmp_path):
    """One `--per-model` export per source; the official rules on each folder give that model's report figures."""
    frames = load_frames(demo_engine)
    for source in ("gold", "group1", "group2", "judge:judge-a"):
        out = tmp_path / source.replace(":", "_")
        export_judgements(demo_engine, out, source=source, k=10, per_model=True)
        report = report_json(build_report(frames, k=10, source=source, resamples=0, insights=False))
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        scored = {model for model, item in report["models"].items() if item["n_responses"]}
        assert len(scored) >= 2 and set(manifest["models"]) == scored, source
        assert set(manifest["models_left_out"]) == set(report["models"]) - scored
        assert manifest["per_model"] is True and manifest["audit_head"]["count"] > 0
        for model in scored:
            folder = out / manifest["models"][model]["folder"]
            assert sorted(path.name for path in folder.iterdir()) == [
                "cases.jsonl",
                "judgements",
                "manifest.json",
                "scores.json",
            ]
            inner = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
            assert list(inner["judgement_files"].values()) == [model]
            official = eval_cacs(folder / "cases.jsonl", folder / "judgements", threshold=10)
            expected = report["models"][model]
            row = official[(folder.name, "overall")]
            assert row["cases"] == expected["n_responses"] == manifest["models"][model]["cases"]
            assert row["cacs_at_k_pct"] / 100 == pytest.approx(expected["cacs_at_k"], abs=1e-12)
            assert row["rubric_accuracy_pct"] / 100 == pytest.approx(expected["rubric_accuracy"], abs=1e-12)
            assert row["pass_at_k_pct"] / 100 == pytest.approx(expected["pass_at_k"], abs=1e-12)
            for (name, part), row in official.items():
                assert name == folder.name
                if part == "overall":
                    continue
                dimension, value = part.split(":", 1) if part.startswith("subject:") else ("difficulty", part)
                want = report["slices"][dimension][value][model]
                assert row["cacs_at_k_pct"] / 100 == pytest.approx(want, abs=1e-12), (source, model, part)
            assert_official_equals_ours(official, json.loads((folder / "scores.json").read_text(encoding="utf-8")))


def test_report_case_scores_equal_the_official_per_case_rows(demo_engine, tmp_path):
    """report --out writes case_scores.csv: the official scorer's per-case rows of a --per-model export."""
    from analysis.report import write_tables

    export_judgements(demo_engine, tmp_path / "export", source="gold", k=10, per_model=True)
    manifest = json.loads((tmp_path / "export" / "manifest.json").read_text(encoding="utf-8"))
    expected = []
    for model in sorted(manifest["models"]):
        folder = tmp_path / "export" / manifest["models"][model]["folder"]
        expected += [{**row, "model": model} for row in case_rows(folder / "cases.jsonl", folder / "judgements", 10)]
    write_tables(build_report(load_frames(demo_engine), k=10, resamples=0, insights=False), tmp_path / "out")
    with open(tmp_path / "out" / "case_scores.csv", encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == list(CASE_SCORE_COLUMNS)
        got = list(reader)
    assert len(got) == len(expected) > 0
    for ours, official in zip(got, expected):
        for column in CASE_SCORE_COLUMNS:
            if column.endswith("_pct"):
                assert float(ours[column]) == pytest.approx(official[column], abs=1e-9), column
            elif column in ("rubric_count", "expected_rubric_count", "positive_count", "pass_at_k"):
                assert int(ours[column]) == official[column], column
            else:
                assert ours[column] == official[column], column


def test_judge_run_grades_the_demo_and_its_fidelity_is_in_the_report(demo_engine):
    with LLMServer() as server:
        summary = run_judge(
            demo_engine,
            RunOptions(base_url=server.url, model="judge-8b", judge="loopback-judge", concurrency=16, timeout=30),
        )
        with Session(demo_engine) as session:
            n_items = sum(30 for _ in session.exec(select(Response.id)).all())
        assert summary["status"] == "finished" and summary["parse_failures"] == 0 and summary["errors"] == 0
        assert summary["done"] == summary["items"] == server.requests
        first = server.requests
        again = run_judge(
            demo_engine,
            RunOptions(base_url=server.url, model="judge-8b", judge="loopback-judge", concurrency=16, timeout=30),
        )
        assert server.requests == first and again["cached"] == again["items"] == summary["items"]
    assert 0 < summary["items"] <= n_items
    frames = load_frames(demo_engine)
    report = build_report(frames, k=10, resamples=0)
    judge = frames.judge[frames.judge["judge"] == "loopback-judge"]
    assert len(judge) == summary["items"]
    labels = frames.labels
    finals = {}
    for row in labels.sort_values("stage", key=lambda s: s.map({"annotation": 0, "check": 1})).itertuples():
        if row.stage in ("annotation", "check"):
            finals[(row.group_no, row.response_id, row.criterion_id)] = row.met
    decided = dict(zip(zip(judge["response_id"], judge["criterion_id"]), judge["met"]))
    for group in (1, 2):
        keys = [key for key in decided if (group, *key) in finals]
        want = f1_score([finals[(group, *key)] for key in keys], [decided[key] for key in keys], average="macro")
        assert report.judges.loc["loopback-judge", f"mf1_group{group}"] == pytest.approx(want, abs=1e-12)


# The release --------------------------------------------------------------------------------------


def release_cases(n_low: int, n_other: int, contacts: dict[str, str] | None = None) -> list[dict]:
    records = []
    for i in range(1, n_low + n_other + 1):
        case_id = f"CC-{i:04d}"
        records.append(
            {
                "case_id": case_id,
                "difficulty": "low" if i <= n_low else ("medium", "high")[i % 2],
                "task": "鉴别诊断",
                "task_labels": ["differential_diagnosis"],
                "subject": "心内科",
                "subject_labels": ["心内科"],
                "user_role": "患者家属",
                "clinical_context": (contacts or {}).get(case_id, f"患者{i}，胸闷三天。"),
                "user_request": "怎么办？",
                "rubrics": [{"criterion_id": f"r{j:02d}", "criterion": f"第 {j} 条标准"} for j in range(1, 31)],
            }
        )
    return records


def import_cases(engine, tmp_path: Path, records: list[dict], name: str = "cases.jsonl") -> None:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    import_file(engine, "cases", path)


def test_release_of_the_low_tier_passes_the_strict_official_validation(sqlite_engine, tmp_path):
    import_cases(sqlite_engine, tmp_path, release_cases(900, 12))
    summary = export_release(sqlite_engine, tmp_path / "public", difficulties=["low"])
    assert summary.counts["cases"] == 900 and not summary.warnings
    report, errors = validate_release(tmp_path / "public" / "cases.jsonl", strict_contact=True)
    assert errors == [] and report["difficulty_counts"] == {"low": 900} and report["total_rubrics"] == 27000
    export_release(sqlite_engine, tmp_path / "all")
    _, errors = validate_release(tmp_path / "all" / "cases.jsonl")
    assert "release must contain only 900 low-tier cases" in errors
    export_release(sqlite_engine, tmp_path / "two", difficulties=["medium", "high"])
    assert {r["difficulty"] for r in read_jsonl(tmp_path / "two" / "cases.jsonl")} == {"medium", "high"}
    with pytest.raises(ValidationFailed, match="--difficulty 'easy'"):
        export_release(sqlite_engine, tmp_path / "bad", difficulties=["easy"])


CONTACT_TEXTS = {
    "CC-0001": "联系人邮箱 user@localhost，请勿外传。",
    "CC-0002": "住院号 123456789012345678，入院三天。",
    "CC-0003": "身份证 11010519491231002X。",
    "CC-0004": "家属电话13812345678。",
    "CC-0005": "家属电话 138-1234-5678。",
    "CC-0006": "血压 135/85 mmHg，心率 78 次/分，肌钙蛋白 0.03 ng/ml。",
    "CC-0007": "编号 1234567890123456789012 的化验单。",
    "CC-0008": "\x01" + "23456789012345" + " 控制字符后的数字。",
}


def test_our_contact_scan_flags_everything_the_strict_official_check_flags(sqlite_engine, tmp_path):
    import_cases(sqlite_engine, tmp_path, release_cases(len(CONTACT_TEXTS), 0, CONTACT_TEXTS))
    summary = export_release(sqlite_engine, tmp_path / "out")
    flagged_by_us = {warning.split()[5] for warning in summary.warnings}
    rows = read_jsonl(tmp_path / "out" / "cases.jsonl")
    flagged_officially = set()
    for row in rows:
        path = tmp_path / f"{row['case_id']}.jsonl"
        path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
        report, _ = validate_release(path)
        if report["contacts"]:
            flagged_officially.add(row["case_id"])
    assert flagged_officially == {"CC-0001", "CC-0002", "CC-0003", "CC-0004", "CC-0008"}
    assert flagged_officially <= flagged_by_us, "a release we call clean must pass --strict-contact"
    assert "CC-0005" in flagged_by_us and "CC-0006" not in flagged_by_us and "CC-0007" not in flagged_by_us


# Metrics of §4 and §3.6 the issue named --------------------------------------------------------------


def test_top_k_overlap_is_over_min_k_and_the_number_of_models():
    identical = pd.Series({"m1": 0.9, "m2": 0.7, "m3": 0.5, "m4": 0.2})
    assert metrics.top_overlap(identical, identical, 5) == 1.0
    assert metrics.top_overlap(identical, identical, 3) == 1.0
    reversed_ = pd.Series({"m1": 0.1, "m2": 0.3, "m3": 0.5, "m4": 0.8})
    # top-3 sets {m1,m2,m3} and {m4,m3,m2} share 2 of 3
    assert metrics.top_overlap(identical, reversed_, 3) == pytest.approx(2 / 3)
    assert metrics.top_overlap(identical, reversed_, 5) == 1.0
    scores = pd.DataFrame({f"cacs@{k}": identical for k in range(1, 31)})
    table = metrics.threshold_sensitivity(scores, 10, n=30)
    assert (table["top5"] == 1.0).all() and (table["top3"] == 1.0).all()


def test_subject_slice_covers_every_subject_label(engine, session):
    build_world(session)
    responses = session.exec(select(Response)).all()
    for response in responses:
        for i in range(1, 7):
            session.add(
                JudgeDecision(
                    judge="j", response_id=response.id, criterion_id=f"c{i:02d}", met=(response.id * i) % 5 < 3
                )
            )
    session.commit()
    report = report_json(build_report(load_frames(engine), k=2, source="judge:j", resamples=0))
    cases = {case.id: case for case in session.exec(select(Case)).all()}
    expected: dict[str, dict[str, list[float]]] = {}
    for response in responses:
        s = sum((response.id * i) % 5 < 3 for i in range(1, 7))
        value = sum(s >= level for level in range(2, 7)) / 5
        for label in cases[response.case_pk].subject_labels:
            expected.setdefault(label, {}).setdefault(response.model, []).append(value)
    assert set(report["slices"]["subject"]) == {"心内科", "急诊科", "呼吸科", "儿科"}
    for label, by_model in expected.items():
        for model, values in by_model.items():
            assert report["slices"]["subject"][label][model] == pytest.approx(np.mean(values), abs=1e-12)
