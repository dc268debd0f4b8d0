"""The exports of docs/REFERENCE.md §3.5, re-read and checked against a small data set whose gold is known.

The expected gold, completeness and scores are computed here straight from the label rows (a
plain loop over §4), never through `analysis.exports` or `db.rules.gold`.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import zipfile
from collections import defaultdict
from pathlib import Path
from urllib.parse import unquote

import jsonschema
import pytest
from sqlmodel import Session, select

from analysis import loader
from analysis.exports.bundle import export_bundle
from analysis.exports.export_summary import EXPORT_KINDS, ExportSummary
from analysis.exports.gold import export_gold
from analysis.exports.judge_items import export_judge_items
from analysis.exports.judgements import export_judgements, model_filename
from analysis.exports.release import OPTIONAL_RELEASE_FIELDS, RELEASE_FIELDS, RELEASE_FILES, export_release
from analysis.exports.sft import GENERIC_EXPLANATION, export_sft
from analysis.prompt import DEFAULT_TEMPLATE, fill_template
from db.importers import model_of_judgement_file
from db.rules.enums import RubricStatus, Stage
from db.rules.errors import ValidationFailed
from db.rules.records import FORBIDDEN_KEY_PARTS, is_forbidden_key
from db.store.current_rubric import current_approved_version
from db.store.models import Case, Criterion, JudgeDecision, Label, Response, RubricVersion
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_label, make_response, make_rubric, make_user
from tests.support.official_rules import CASE_SCORE_COLUMNS, eval_cacs

# These tests read §4 as written (most responses carry no checks): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")

N = 6
MODELS = ["model-a", "org/model-b", "模型C"]

# Scenarios of one decision: (kind, met). The expected gold of each, written out by hand.
AGREE, CHECKED, ADJ, SINGLE1, SINGLE2, UNRESOLVED, NONE = (
    "agree",
    "checked",
    "adj",
    "single1",
    "single2",
    "unresolved",
    "none",
)
EXPECTED = {
    # kind: (gold source, gold met given m, group1 given m, group2 given m)
    AGREE: ("agreement", lambda m: m, lambda m: m, lambda m: m),
    CHECKED: ("agreement", lambda m: m, lambda m: m, lambda m: m),
    ADJ: ("adjudicated", lambda m: m, lambda m: not m, lambda m: m),
    SINGLE1: ("single", lambda m: m, lambda m: m, lambda m: None),
    SINGLE2: ("single", lambda m: m, lambda m: None, lambda m: m),
    UNRESOLVED: (None, None, lambda m: m, lambda m: not m),
    NONE: (None, None, lambda m: None, lambda m: None),
}

PLAN = {
    # (case, model): six decisions c01..c06
    ("CC-0001", "model-a"): [
        (AGREE, True),
        (CHECKED, True),
        (ADJ, True),
        (SINGLE1, False),
        (AGREE, False),
        (SINGLE2, True),
    ],
    ("CC-0001", "org/model-b"): [(AGREE, True)] * 5 + [(ADJ, False)],
    ("CC-0001", "模型C"): [
        (AGREE, True),
        (UNRESOLVED, True),
        (AGREE, False),
        (AGREE, True),
        (AGREE, True),
        (AGREE, False),
    ],
    ("CC-0002", "model-a"): [(AGREE, False)] * 4 + [(CHECKED, True), (AGREE, True)],
    ("CC-0002", "org/model-b"): [(AGREE, True)] * 5 + [(NONE, True)],
    ("CC-0002", "模型C"): [
        (CHECKED, False),
        (AGREE, True),
        (AGREE, True),
        (SINGLE1, True),
        (AGREE, True),
        (AGREE, True),
    ],
}
NOTES = {
    # (case, model, criterion): notes by (stage, group) — only those agreeing with gold may explain it
    ("CC-0001", "model-a", "c03"): {
        ("adjudication", 0): "仲裁：回答提到了关键检查",
        ("annotation", 1): "组1认为未提及",
    },
    ("CC-0001", "model-a", "c02"): {("check", 1): "审核：确有说明", ("annotation", 2): "组2标注说明"},
    ("CC-0001", "model-a", "c01"): {("annotation", 1): "组1：有", ("annotation", 2): "组2：有"},
    ("CC-0002", "model-a", "c05"): {("annotation", 1): "未提及", ("annotation", 2): "  回答给出了用药剂量  "},
}


def build_world(session: Session) -> dict:
    """Cases, responses and labels following PLAN; returns the users and the stray case."""
    a1 = make_user(session, "ann1", "annotator", 1)
    a2 = make_user(session, "ann2", "annotator", 2)
    k1 = make_user(session, "chk1", "checker", 1)
    k2 = make_user(session, "chk2", "checker", 2)
    cases = {
        "CC-0001": make_case(
            session, "CC-0001", n=N, clinical_context="患者男，65岁，胸痛2小时。", user_request="需要做哪些检查？"
        ),
        "CC-0002": make_case(session, "CC-0002", n=N, difficulty="high", user_role="心内科医生"),
    }
    draft = make_case(session, "CC-0003", n=N, status=RubricStatus.draft)
    make_response(session, draft, "model-a", "草稿病例的回答")
    responses = {}
    for (case_id, model), plan in PLAN.items():
        response = make_response(session, cases[case_id], model, text=f"{model} 对 {case_id} 的回答：先做心电图。")
        responses[case_id, model] = response
        for position, (kind, met) in enumerate(plan, start=1):
            criterion = f"c{position:02d}"
            notes = NOTES.get((case_id, model, criterion), {})

            def label(user, m, stage=Stage.annotation, group=None, notes=notes, response=response, criterion=criterion):
                note = notes.get((stage.value, 0 if stage == Stage.adjudication else group or user.group_no))
                make_label(session, response, criterion, m, user, stage=stage, group_no=group, note=note)

            if kind in (AGREE, UNRESOLVED):
                label(a1, met)
                label(a2, met if kind == AGREE else not met)
            elif kind == CHECKED:
                label(a1, not met)
                label(k1, met, Stage.check, 1)
                label(a2, met)
            elif kind == ADJ:
                label(a1, not met)
                label(a2, met)
                label(k1, met, Stage.adjudication)
            elif kind == SINGLE1:
                label(a1, met)
            elif kind == SINGLE2:
                label(a2, met)
    # a judge: complete on two responses, one criterion short on a third
    for (case_id, model), count in [
        (("CC-0001", "model-a"), N),
        (("CC-0002", "model-a"), N),
        (("CC-0001", "org/model-b"), N - 1),
    ]:
        for position in range(1, count + 1):
            session.add(
                JudgeDecision(
                    judge="judge-x",
                    response_id=responses[case_id, model].id,
                    criterion_id=f"c{position:02d}",
                    met=position % 2 == 1,
                )
            )
    session.commit()
    return {"users": (a1, a2, k1, k2), "responses": responses}


# An independent reading of docs/REFERENCE.md §4, straight from the rows ---------------------------------------


def reference_gold(session: Session) -> dict[tuple[str, str, str], dict]:
    """(case_id, model, criterion_id) → {met, source, group1, group2} for every decision with gold."""
    keys = {
        r.id: (case_id, r.model)
        for r, case_id in session.exec(select(Response, Case.case_id).join(Case, Response.case_pk == Case.id))
    }
    by_decision: dict[tuple, dict] = defaultdict(dict)
    for label in session.exec(select(Label)):
        by_decision[(*keys[label.response_id], label.criterion_id)][(label.stage, label.group_no)] = label.met
    gold = {}
    for decision, found in by_decision.items():
        finals = {}
        for group in (1, 2):
            if ("check", group) in found:
                finals[group] = found[("check", group)]
            elif ("annotation", group) in found:
                finals[group] = found[("annotation", group)]
        g1, g2 = finals.get(1), finals.get(2)
        if ("adjudication", 0) in found:
            gold[decision] = {"met": found[("adjudication", 0)], "source": "adjudicated"}
        elif g1 is not None and g2 is not None and g1 == g2:
            gold[decision] = {"met": g1, "source": "agreement"}
        elif (g1 is None) != (g2 is None):
            gold[decision] = {"met": g1 if g1 is not None else g2, "source": "single"}
        else:
            continue
        gold[decision].update(group1=g1, group2=g2)
    return gold


def reference_group(session: Session, group: int) -> dict[tuple[str, str, str], bool]:
    keys = {
        r.id: (case_id, r.model)
        for r, case_id in session.exec(select(Response, Case.case_id).join(Case, Response.case_pk == Case.id))
    }
    annotation, check = {}, {}
    for label in session.exec(select(Label).where(Label.group_no == group)):
        (check if label.stage == "check" else annotation)[(*keys[label.response_id], label.criterion_id)] = label.met
    return {**annotation, **check}


def approved_criteria(session: Session) -> dict[str, list[str]]:
    """case_id → criterion ids of its approved rubric, in position order."""
    result: dict[str, list[str]] = defaultdict(list)
    rows = session.exec(
        select(Case.case_id, Criterion.criterion_id)
        .join(RubricVersion, Criterion.rubric_version_id == RubricVersion.id)
        .join(Case, RubricVersion.case_pk == Case.id)
        .where(RubricVersion.status == RubricStatus.approved)
        .order_by(Case.id, Criterion.position)
    )
    for case_id, criterion_id in rows:
        result[case_id].append(criterion_id)
    return dict(result)


def reference_scores(
    decisions: dict[tuple[str, str, str], bool], rubrics: dict[str, list[str]], k: int
) -> dict[str, dict]:
    """Per model, over complete responses: rubric accuracy, pass@k, CACS@k by (s-k+1)/(N-k+1)."""
    per_response: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for (case_id, model, criterion_id), met in decisions.items():
        if criterion_id in rubrics.get(case_id, []):
            per_response[case_id, model].append(met)
    scores: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for (case_id, model), values in per_response.items():
        n = len(rubrics[case_id])
        if len(values) < n:
            continue
        s = sum(values)
        scores[model].append((s / n, float(s >= k), (s - k + 1) / (n - k + 1) if s >= k else 0.0))
    return {
        model: {
            "responses": len(rows),
            "accuracy": sum(r[0] for r in rows) / len(rows),
            "pass": sum(r[1] for r in rows) / len(rows),
            "cacs": sum(r[2] for r in rows) / len(rows),
        }
        for model, rows in scores.items()
    }


def official_scores(directory: Path, k: int) -> dict[str, dict]:
    """The official scorer's overall rows (tests/official_rules.py) on an export, as fractions by model."""
    summary = eval_cacs(directory / "cases.jsonl", directory / "judgements", k)
    return {
        unquote(model): {
            "responses": row["cases"],
            "accuracy": row["rubric_accuracy_pct"] / 100,
            "pass": row["pass_at_k_pct"] / 100,
            "cacs": row["cacs_at_k_pct"] / 100,
        }
        for (model, part), row in summary.items()
        if part == "overall"
    }


def common_cases(decisions: dict, rubrics: dict[str, list[str]], models: list[str]) -> set[str]:
    """Cases on which every one of `models` has all criteria of the approved rubric decided."""
    have: dict[tuple[str, str], set] = defaultdict(set)
    for case_id, model, criterion_id in decisions:
        have[case_id, model].add(criterion_id)
    return {case for case, ids in rubrics.items() if all(set(ids) <= have[case, model] for model in models)}


def only_cases(decisions: dict, cases: set[str]) -> dict:
    return {key: value for key, value in decisions.items() if key[0] in cases}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# The data set itself --------------------------------------------------------------------------


def test_reference_gold_matches_the_hand_written_plan(session):
    build_world(session)
    gold = reference_gold(session)
    for (case_id, model), plan in PLAN.items():
        for position, (kind, met) in enumerate(plan, start=1):
            source, gold_met, g1, g2 = EXPECTED[kind]
            key = (case_id, model, f"c{position:02d}")
            if source is None:
                assert key not in gold
            else:
                assert gold[key] == {"met": gold_met(met), "source": source, "group1": g1(met), "group2": g2(met)}


def test_fast_label_reader_matches_load_labels(engine, session):
    build_world(session)
    labeled = session.exec(select(Label)).first()  # on a case with an approved rubric
    response = session.get(Response, labeled.response_id)
    session.add(
        Label(
            response_id=response.id,
            criterion_id="c01",
            stage="check",
            group_no=2,
            met=False,
            user_id=1,
            note="第二组审核",
            rubric_version_id=current_approved_version(session, response.case_pk).id,  # as every save stamps it
        )
    )
    session.commit()
    columns = ["response_id", "criterion_id", "stage", "group_no", "met"]
    fast = loader.load_label_decisions(engine).sort_values(columns[:4], ignore_index=True)
    plain = loader.load_labels(engine)[columns].sort_values(columns[:4], ignore_index=True)
    assert len(fast) == len(plain) > 0
    for column in columns:
        assert fast[column].tolist() == plain[column].tolist(), column
    assert fast["met"].dtype == bool and fast["response_id"].dtype.kind == "i"
    notes = loader.load_label_notes(engine)
    assert "第二组审核" in notes["note"].tolist() and notes["note"].str.len().min() > 0
    assert len(notes) == sum(1 for label in session.exec(select(Label)) if label.note)


def test_fast_label_reader_of_an_empty_table(engine):
    frame = loader.load_label_decisions(engine)
    assert list(frame.columns) == ["response_id", "criterion_id", "stage", "group_no", "met"] and frame.empty


# gold -----------------------------------------------------------------------------------------


def test_export_gold_rows_order_and_values(engine, session, tmp_path):
    build_world(session)
    expected = reference_gold(session)
    progress_calls = []
    summary = export_gold(
        engine, tmp_path / "gold.jsonl", progress=lambda done, total=None, note="": progress_calls.append((done, total))
    )
    text = (tmp_path / "gold.jsonl").read_text(encoding="utf-8")
    assert "模型C" in text  # Chinese written as is
    rows = read_jsonl(tmp_path / "gold.jsonl")
    keys = ["case_id", "model", "criterion_id", "met", "source", "group1", "group2", "final"]
    assert all(list(row) == keys for row in rows)
    assert not any(row["final"] for row in rows)  # nothing here is checked by both groups or wholly adjudicated
    got = {
        (r["case_id"], r["model"], r["criterion_id"]): {k: r[k] for k in ("met", "source", "group1", "group2")}
        for r in rows
    }
    assert len(got) == len(rows)
    assert got == expected
    # case order (import order), then model, then criterion position
    order = [(r["case_id"], r["model"], r["criterion_id"]) for r in rows]
    assert order == sorted(order, key=lambda key: (key[0], key[1], int(key[2][1:])))
    assert rows[0]["case_id"] == "CC-0001" and rows[-1]["case_id"] == "CC-0002"
    assert summary.counts["rows"] == len(expected) == 6 * 6 - 2
    assert summary.files["gold.jsonl"] == hashlib.sha256((tmp_path / "gold.jsonl").read_bytes()).hexdigest()
    assert progress_calls and progress_calls[-1][0] == len(rows)
    assert "gold" in str(summary)


def test_export_gold_of_an_empty_database_is_an_empty_file(engine, tmp_path):
    (tmp_path / "sub").mkdir()  # an export creates no missing parent folder (tests/db/importers/test_input_safety.py)
    summary = export_gold(engine, tmp_path / "sub" / "gold.jsonl")
    assert (tmp_path / "sub" / "gold.jsonl").read_bytes() == b""
    assert summary.counts["rows"] == 0


# judgements -----------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, N])
def test_official_scoring_of_gold_judgements_reproduces_scores_from_the_rows(engine, session, tmp_path, k):
    tmp_path = tmp_path / "out"  # the SQLite test database lives in tmp_path itself
    build_world(session)
    chosen = ["model-a", "org/model-b"]
    summary = export_judgements(engine, tmp_path, source="gold", models=chosen, k=k)
    gold = {key: value["met"] for key, value in reference_gold(session).items()}
    rubrics = approved_criteria(session)
    kept = common_cases(gold, rubrics, chosen)
    assert kept == {"CC-0001"}
    expected = reference_scores(only_cases(gold, kept), rubrics, k)
    got = official_scores(tmp_path, k)
    scores = json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))
    assert set(got) == set(expected) == set(chosen) == set(scores["models"])
    for model in chosen:
        assert got[model]["responses"] == expected[model]["responses"] == scores["models"][model]["n_responses"]
        for key, ours in (("accuracy", "rubric_accuracy"), ("pass", "pass_at_k"), ("cacs", "cacs_at_k")):
            assert got[model][key] == pytest.approx(expected[model][key], abs=1e-12), (model, key)
            assert scores["models"][model][ours] == pytest.approx(expected[model][key], abs=1e-12), (model, key)
    assert summary.counts["cases"] == 1 and scores["k"] == k


def test_judgements_layout_manifest_and_left_out_cases(engine, session, tmp_path):
    tmp_path = tmp_path / "out"  # the SQLite test database lives in tmp_path itself
    build_world(session)
    # Every model has a complete response somewhere, but no case has all three: say so, write nothing.
    with pytest.raises(ValidationFailed, match="no case on which every one of 3 model"):
        export_judgements(engine, tmp_path, source="gold")
    assert not tmp_path.exists()
    (tmp_path / "judgements").mkdir(parents=True)
    (tmp_path / "model-a_judge.json").write_text("[]", encoding="utf-8")  # the old layout's file: removed
    export_judgements(engine, tmp_path, source="gold", models=["模型C", "model-a"])
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "cases.jsonl",
        "judgements",
        "manifest.json",
        "scores.json",
    ]
    files = sorted(path.name for path in (tmp_path / "judgements").iterdir())
    assert files == ["model-a_judge.json", "模型C_judge.json"]
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["models"] == {"model-a": "model-a_judge.json", "模型C": "模型C_judge.json"}
    for name in files:
        digest = hashlib.sha256((tmp_path / "judgements" / name).read_bytes()).hexdigest()
        assert manifest["sha256"][f"judgements/{name}"] == digest
    assert manifest["cases_left_out"] == [{"case_id": "CC-0001", "reason": "no complete response of 模型C"}]
    left = {(item["case_id"], item["model"]): item["reason"] for item in manifest["responses_left_out"]}
    assert set(left) == {("CC-0001", "模型C"), ("CC-0003", "model-a")}
    assert left["CC-0003", "model-a"] == "no approved rubric" and "5 of 6" in left["CC-0001", "模型C"]
    cases = read_jsonl(tmp_path / "cases.jsonl")
    assert [case["case_id"] for case in cases] == ["CC-0002"]
    assert [item["criterion_id"] for item in cases[0]["rubrics"]] == [f"c{i:02d}" for i in range(1, N + 1)]
    a = json.loads((tmp_path / "judgements" / "model-a_judge.json").read_text(encoding="utf-8"))
    assert [item["case_id"] for item in a] == ["CC-0002"]
    assert [entry["criterion_id"] for entry in a[0]["criteria_results"]] == [f"c{i:02d}" for i in range(1, N + 1)]
    assert [entry["criteria_met"] for entry in a[0]["criteria_results"]] == [False] * 4 + [True, True]
    assert all(set(item) == {"case_id", "criteria_results"} for item in a)
    with pytest.raises(ValidationFailed, match="no case on which every one of 2 model"):
        export_judgements(engine, tmp_path / "x", source="gold", models=["org/model-b", "模型C"])
    with pytest.raises(ValidationFailed, match="no complete response by judge:judge-x for org/model-b"):
        export_judgements(engine, tmp_path / "x", source="judge:judge-x", models=["org/model-b"])
    with pytest.raises(ValidationFailed, match="no responses of nobody"):
        export_judgements(engine, tmp_path / "x", source="gold", models=["nobody"])


@pytest.mark.parametrize("group", [1, 2])
def test_group_judgements_use_the_group_final_labels(engine, session, tmp_path, group):
    tmp_path = tmp_path / "out"  # the SQLite test database lives in tmp_path itself
    tmp_path.mkdir()
    build_world(session)
    finals = reference_group(session, group)
    rubrics = approved_criteria(session)
    complete = [m for m in MODELS if common_cases(finals, rubrics, [m])]
    assert complete
    for index, model in enumerate(complete):
        out = tmp_path / f"m{index}"
        export_judgements(engine, out, source=f"group{group}", models=[model], k=3)
        kept = common_cases(finals, rubrics, [model])
        expected = reference_scores(only_cases(finals, kept), rubrics, 3)
        got = official_scores(out, 3)
        assert got.keys() == {model} and got[model] == pytest.approx(expected[model])


def test_judge_source_judgements_and_bad_sources(engine, session, tmp_path):
    tmp_path = tmp_path / "out"  # the SQLite test database lives in tmp_path itself
    build_world(session)
    summary = export_judgements(engine, tmp_path, source="judge:judge-x")
    assert sorted(p.name for p in (tmp_path / "judgements").glob("*.json")) == ["model-a_judge.json"]
    items = json.loads((tmp_path / "judgements" / "model-a_judge.json").read_text(encoding="utf-8"))
    assert [item["case_id"] for item in items] == ["CC-0001", "CC-0002"]
    assert [e["criteria_met"] for e in items[0]["criteria_results"]] == [True, False] * 3
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["models_left_out"] == {
        "org/model-b": "no complete response by judge:judge-x",
        "模型C": "no complete response by judge:judge-x",
    }
    assert summary.counts["models"] == 1
    for bad in ("judge:nobody", "group3", "judge:"):
        with pytest.raises(ValidationFailed):
            export_judgements(engine, tmp_path / "bad", source=bad)


def test_model_filenames_are_readable_and_reversible():
    models = ["a/b", ".", "..", "x%2Fy", "50%", "%%41/", "名字:1", "gpt-4o", "trailing.", "back\\slash", "tab\tname"]
    for model in models:
        name = model_filename(model)
        assert "/" not in name and "\\" not in name and not name.startswith(".") and name.isprintable()
        assert model_of_judgement_file(name) == model
    # Only what a file system refuses is encoded: the official summary shows the rest as is.
    assert model_filename("Qwen/Qwen3-8B:v1") == "Qwen%2FQwen3-8B:v1_judge.json"
    assert model_filename("名字:1") == "名字:1_judge.json"
    assert model_filename("50%") == "50%_judge.json"
    assert model_filename("x%2Fy") == "x%252Fy_judge.json"
    assert model_filename("..") == "%2E%2E_judge.json"


def test_per_model_export_keeps_model_names_readable_and_exact(engine, session, tmp_path):
    tmp_path = tmp_path / "out"  # the SQLite test database lives in tmp_path itself
    users = [make_user(session, f"dr{group}", "annotator", group) for group in (1, 2)]
    for c in range(1, 4):
        case = make_case(session, f"CC-{c:04d}", n=N, subject_labels=["心内科", "急诊科"][: c % 2 + 1])
        for model in ("Qwen/Qwen3-8B:v1", "model-a"):
            if model == "model-a" and c == 3:
                continue  # model-a has two complete cases, the Qwen model three: each folder its own
            response = make_response(session, case, model, text=f"{model} {c}")
            for i in range(1, N + 1):
                for user in users:
                    make_label(session, response, f"c{i:02d}", (i + c) % 3 != 0, user)
    session.commit()
    summary = export_judgements(engine, tmp_path, source="gold", k=2, per_model=True)
    qwen = tmp_path / "Qwen%2FQwen3-8B:v1"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["Qwen%2FQwen3-8B:v1", "manifest.json", "model-a"]
    assert [path.name for path in (qwen / "judgements").iterdir()] == ["Qwen%2FQwen3-8B:v1_judge.json"]
    inner = json.loads((qwen / "manifest.json").read_text(encoding="utf-8"))
    assert inner["judgement_files"] == {"judgements/Qwen%2FQwen3-8B:v1_judge.json": "Qwen/Qwen3-8B:v1"}
    assert inner["models"] == {"Qwen/Qwen3-8B:v1": "Qwen%2FQwen3-8B:v1_judge.json"}
    top = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert top["models"] == {
        "Qwen/Qwen3-8B:v1": {"folder": "Qwen%2FQwen3-8B:v1", "cases": 3},
        "model-a": {"folder": "model-a", "cases": 2},
    }
    for name, digest in top["sha256"].items():
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == digest
    assert "Qwen%2FQwen3-8B:v1/judgements/Qwen%2FQwen3-8B:v1_judge.json" in top["sha256"]
    # The official summary names the model after the file: readable, `:` as is.
    summary_rows = eval_cacs(qwen / "cases.jsonl", qwen / "judgements", 2)
    assert {model for model, _ in summary_rows} == {"Qwen%2FQwen3-8B:v1"}
    assert summary_rows["Qwen%2FQwen3-8B:v1", "overall"]["cases"] == 3
    assert model_of_judgement_file("Qwen%2FQwen3-8B:v1_judge.json") == "Qwen/Qwen3-8B:v1"
    assert summary.counts["models"] == 2 and "Qwen%2FQwen3-8B:v1/: Qwen/Qwen3-8B:v1, 3 case(s)" in str(summary)


def test_per_model_export_refuses_bad_targets_and_writes_nothing(sqlite_url, tmp_path, monkeypatch, capsys):
    from cli.main import main
    from db.store.engine import make_engine

    engine = make_engine(sqlite_url)
    with Session(engine) as session:
        build_world(session)
    engine.dispose()
    monkeypatch.setenv("DATABASE_URL", sqlite_url)

    work = tmp_path / "work"  # the SQLite test database lives in tmp_path itself
    work.mkdir()

    def refused(target: Path, *options: str) -> str:
        before = sorted((str(path), path.is_dir() or path.read_bytes()) for path in work.rglob("*"))
        assert main(["export", "judgements", str(target), "--per-model", *options]) == 1
        assert sorted((str(p), p.is_dir() or p.read_bytes()) for p in work.rglob("*")) == before, "nothing written"
        lines = capsys.readouterr().err.splitlines()  # progress lines first, then the reason on one line
        assert [line for line in lines if line.startswith("clinconsensus: ")] == lines[-1:]
        return lines[-1]

    assert "no responses of nobody" in refused(work / "new", "--models", "model-a,nobody")
    (work / "file").write_text("x", encoding="utf-8")
    assert "is a file" in refused(work / "file")
    (work / "elsewhere").mkdir()
    (work / "link").symlink_to(work / "elsewhere")
    assert "symbolic link" in refused(work / "link")
    # Inside the target: a link where a model's folder goes, or a stray file the scorer would read.
    (work / "out").mkdir()
    (work / "out" / "model-a").symlink_to(work / "elsewhere")
    assert "symbolic link" in refused(work / "out")
    (work / "out" / "model-a").unlink()
    (work / "out" / "模型C" / "judgements").mkdir(parents=True)
    (work / "out" / "模型C" / "judgements" / "notes.json").write_text("{}", encoding="utf-8")
    assert "notes.json" in refused(work / "out")
    (work / "out" / "模型C" / "judgements" / "notes.json").unlink()
    assert main(["export", "judgements", str(work / "out"), "--per-model"]) == 0
    folders = sorted(path.name for path in (work / "out").iterdir())
    assert folders == ["manifest.json", "model-a", "org%2Fmodel-b", "模型C"]


def test_report_case_scores_csv_recomputed_from_the_rows(engine, session, tmp_path):
    """case_scores.csv of report --out: the official per-case columns, values recomputed from the label rows."""
    import csv

    from analysis.report import run_report

    build_world(session)
    gold = {key: value["met"] for key, value in reference_gold(session).items()}
    rubrics = approved_criteria(session)
    cases = {case.case_id: case for case in session.exec(select(Case)).all()}
    k = 3
    expected = []
    for case_id, model in sorted({key[:2] for key in gold}, key=lambda key: (key[1], key[0])):
        ids = rubrics.get(case_id, [])
        if not ids or any((case_id, model, criterion) not in gold for criterion in ids):
            continue
        s, n = sum(gold[case_id, model, criterion] for criterion in ids), len(ids)
        case = cases[case_id]
        expected.append(
            [
                model,
                case_id,
                case.difficulty,
                "|".join(case.subject_labels),
                "|".join(case.task_labels),
                n,
                n,
                s,
                100 * s / n,
                int(s >= k),
                100 * (s - k + 1) / (n - k + 1) if s >= k else 0.0,
            ]
        )
    run_report(engine, k=k, out_dir=tmp_path / "report", stream=io.StringIO())
    with open(tmp_path / "report" / "case_scores.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == list(CASE_SCORE_COLUMNS)
    assert len(rows) - 1 == len(expected) > 0
    for got, want in zip(rows[1:], expected):
        assert got[:5] == want[:5]
        assert [int(value) for value in got[5:8]] == want[5:8] and int(got[9]) == want[9]
        assert float(got[8]) == pytest.approx(want[8]) and float(got[10]) == pytest.approx(want[10])


# judge items ----------------------------------------------------------------------------------


def test_judge_items_rows(engine, session, tmp_path):
    build_world(session)
    summary = export_judge_items(engine, tmp_path / "items.jsonl")
    rows = read_jsonl(tmp_path / "items.jsonl")
    assert len(rows) == 2 * 3 * N == summary.counts["rows"]  # CC-0003 has no approved rubric
    assert all(
        list(row) == ["user_message", "response", "rubric_item", "case_id", "model", "criterion_id"] for row in rows
    )
    first = rows[0]
    assert first["user_message"] == "患者男，65岁，胸痛2小时。\n\n需要做哪些检查？"
    assert first["response"] == "model-a 对 CC-0001 的回答：先做心电图。"
    assert first["rubric_item"] == "CC-0001 的第 1 条评分标准"
    assert (first["case_id"], first["model"], first["criterion_id"]) == ("CC-0001", "model-a", "c01")
    assert {(r["case_id"], r["model"]) for r in rows} == set(PLAN)
    assert summary.counts["responses left out (no approved rubric)"] == 1


def test_judge_items_round_trip_through_the_judge_importer(engine, session, tmp_path):
    from db import importers

    build_world(session)
    export_judge_items(engine, tmp_path / "items.jsonl")
    fabricated = {}
    with open(tmp_path / "judge_out.jsonl", "w", encoding="utf-8") as out:
        for index, row in enumerate(read_jsonl(tmp_path / "items.jsonl")):
            met = (index * 7) % 3 == 0
            fabricated[row["case_id"], row["model"], row["criterion_id"]] = met
            out.write(
                json.dumps(
                    {**row, "criteria_met": met, "judge": "local-judge-1", "latency_ms": index}, ensure_ascii=False
                )
                + "\n"
            )
    importers.import_file(engine, "judge", tmp_path / "judge_out.jsonl")
    session.expire_all()
    keys = {
        r.id: (case_id, r.model)
        for r, case_id in session.exec(select(Response, Case.case_id).join(Case, Response.case_pk == Case.id))
    }
    stored = {
        (*keys[d.response_id], d.criterion_id): d.met
        for d in session.exec(select(JudgeDecision).where(JudgeDecision.judge == "local-judge-1"))
    }
    assert stored == fabricated


# release --------------------------------------------------------------------------------------


def build_release_world(session: Session):
    make_case(
        session,
        "CC-0101",
        n=30,
        clinical_context="患者女，30岁。联系电话 13812345678。",
        extra={
            "source_file": "batch3.xlsx",
            "hospital_level": "三甲",
            "meta": {"doctor_name": "王医生", "year": 2024, "items": [{"qc_status": "ok", "kept": 1}]},
            "Internal_Notes": "x",
            "rows": 3,
        },
    )
    make_case(
        session,
        "CC-0102",
        n=30,
        difficulty="low",
        task_labels=["patient_education", "follow_up_monitoring"],
        subject_labels=["儿科"],
        user_role="心内科医生",
        register_override="lay",
        user_request="邮箱 someone@example.com 能否收到报告？",
    )
    make_case(session, "CC-0103", n=30, status=RubricStatus.draft)  # left out
    revised = make_case(session, "CC-0104", n=30, difficulty="high")
    second = make_rubric(session, revised, n=30, version=2)  # current approved version
    for criterion in session.exec(select(Criterion).where(Criterion.rubric_version_id == second.id)):
        criterion.text = "第二版：" + criterion.text
        criterion.tags = ["safety"] if criterion.position == 1 else []
        session.add(criterion)
    make_case(session, "CC-0105", n=0)  # no rubric at all
    response = make_response(
        session, session.exec(select(Case).where(Case.case_id == "CC-0101")).one(), "model-a", "保密的回答文本"
    )
    make_label(session, response, "c01", True, make_user(session, "dr_secret_name"))
    session.commit()


def test_release_files_validate_and_verify(engine, session, tmp_path):
    tmp_path = tmp_path / "out"  # the SQLite test database lives in tmp_path itself
    build_release_world(session)
    summary = export_release(engine, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "README.md",
        "SHA256SUMS",
        "cases.jsonl",
        "counts.json",
        "manifest.json",
        "schema.json",
    ]
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count(": OK") == 4
    schema = json.loads((tmp_path / "schema.json").read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    cases = read_jsonl(tmp_path / "cases.jsonl")
    for case in cases:
        jsonschema.Draft202012Validator(schema).validate(case)
    assert [c["case_id"] for c in cases] == ["CC-0101", "CC-0102", "CC-0104"]
    assert all(len(c["rubrics"]) == 30 for c in cases)
    revised = cases[2]
    assert revised["rubrics"][0] == {
        "criterion_id": "c01",
        "criterion": "第二版：CC-0104 的第 1 条评分标准",
        "tags": ["safety"],
    }
    assert revised["rubrics"][1] == {"criterion_id": "c02", "criterion": "第二版：CC-0104 的第 2 条评分标准"}
    assert cases[1]["register"] == "lay" and "register" not in cases[0]
    # no forbidden key at any depth; allowed extras carried
    forbidden = FORBIDDEN_KEY_PARTS

    def keys(value):
        if isinstance(value, dict):
            for key, item in value.items():
                yield key
                yield from keys(item)
        elif isinstance(value, list):
            for item in value:
                yield from keys(item)

    assert not [key for case in cases for key in keys(case) if any(part in key.lower() for part in forbidden)]
    assert cases[0]["hospital_level"] == "三甲"
    assert cases[0]["meta"] == {"year": 2024, "items": [{"kept": 1}]}
    raw = (tmp_path / "cases.jsonl").read_text(encoding="utf-8")
    assert "保密的回答文本" not in raw and "dr_secret_name" not in raw and "王医生" not in raw
    assert "三甲" in raw  # Chinese as is
    counts = json.loads((tmp_path / "counts.json").read_text(encoding="utf-8"))
    assert counts["cases"] == 3 and counts["rubrics"] == 90 and counts["rubrics_per_case"] == 30
    assert counts["difficulty"] == {"high": 1, "low": 1, "medium": 1}
    assert counts["task_labels"] == {"differential_diagnosis": 2, "follow_up_monitoring": 1, "patient_education": 1}
    assert counts["subject_labels"] == {"儿科": 1, "心内科": 2}
    card = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "CC BY 4.0" in card and "sha256sum -c SHA256SUMS" in card and "cases: 3" in card
    # the summary: left-out cases, stripped keys, contact-like strings
    text = str(summary)
    assert "CC-0103" in text and "CC-0105" in text
    assert "source_file" in text and "meta.doctor_name" in text and "meta.items[0].qc_status" in text
    assert "Internal_Notes" in text and "CC-0101: rows" in text
    kinds = " ".join(summary.warnings)
    assert "mobile_phone 138******78" in kinds and "email s***@example.com" in kinds
    assert "13812345678" not in text


def test_release_records_without_the_contact_scan_are_the_same_records(engine, session):
    from analysis.exports.release import release_records

    build_release_world(session)
    scanned = release_records(engine)
    unscanned = release_records(engine, contact_warnings=False)
    assert any("mobile_phone" in warning for warning in scanned[3])
    assert unscanned[3] == []
    assert unscanned[:3] == scanned[:3] and len(scanned[0]) == 3


def test_release_is_byte_identical_when_run_twice(engine, session, tmp_path):
    build_release_world(session)
    export_release(engine, tmp_path / "one")
    export_release(engine, tmp_path / "two")
    for name in RELEASE_FILES:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_release_refuses_a_rubric_of_the_wrong_size_and_writes_nothing(engine, session, tmp_path):
    make_case(session, "CC-0201", n=30)
    make_case(session, "CC-0202", n=29)
    make_case(session, "CC-0203", n=30, difficulty="extreme")
    session.commit()
    with pytest.raises(ValidationFailed) as failure:
        export_release(engine, tmp_path / "release")
    message = str(failure.value)
    assert "'CC-0202'" in message and "rubrics" in message and "29" in message
    assert "'CC-0203'" in message and "difficulty" in message
    assert not (tmp_path / "release").exists()


def test_release_field_names_never_match_the_forbidden_parts():
    for name in (*RELEASE_FIELDS, *OPTIONAL_RELEASE_FIELDS, "criterion_id", "criterion", "tags"):
        assert not is_forbidden_key(name)
    assert is_forbidden_key("Reference_Answer") and is_forbidden_key("arrow")


# sft ------------------------------------------------------------------------------------------


def build_sft_world(session: Session, n_cases: int = 12):
    """More cases, so a split has something to split: two models, all agreeing, plus PLAN's world."""
    world = build_world(session)
    a1, a2, _, _ = world["users"]
    for i in range(n_cases):
        case = make_case(session, f"CC-1{i:03d}", n=3)
        for model in ("model-a", "model-d"):
            response = make_response(session, case, model, f"{model} 的回答 {i}")
            for position in range(1, 4):
                met = (i + position) % 2 == 0
                make_label(session, response, f"c{position:02d}", met, a1)
                make_label(session, response, f"c{position:02d}", met, a2)
    session.commit()
    return world


def test_sft_rows_split_holdout_and_labels_equal_gold(engine, session, tmp_path):
    tmp_path = tmp_path / "out"  # the SQLite test database lives in tmp_path itself
    build_sft_world(session)
    gold = reference_gold(session)
    summary = export_sft(engine, tmp_path, seed=5, holdout_models=["模型C"], dev_fraction=0.25)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dev.jsonl",
        "heldout.jsonl",
        "judge_prompt.txt",
        "manifest.json",
        "train.jsonl",
    ]
    parts = {name: read_jsonl(tmp_path / f"{name}.jsonl") for name in ("train", "dev", "heldout")}
    every = [row for rows in parts.values() for row in rows]
    keys = [(r["meta"]["case_id"], r["meta"]["model"], r["meta"]["criterion_id"]) for r in every]
    assert len(keys) == len(set(keys)) and set(keys) == set(gold)  # one row per gold decision
    template = (tmp_path / "judge_prompt.txt").read_text(encoding="utf-8")
    assert template == DEFAULT_TEMPLATE.read_text(encoding="utf-8")
    for row in every:
        key = (row["meta"]["case_id"], row["meta"]["model"], row["meta"]["criterion_id"])
        assert list(row) == ["instruction", "output", "meta"]
        assert row["output"].startswith("```json\n") and row["output"].endswith("\n```")
        answer = json.loads(row["output"][len("```json\n") : -len("\n```")])
        assert list(answer) == ["explanation", "criteria_met"]
        assert answer["criteria_met"] is gold[key]["met"]
        assert answer["explanation"].strip()
        assert "{user_message}" not in row["instruction"] and "{rubric_item}" not in row["instruction"]
    assert {r["meta"]["model"] for r in parts["heldout"]} == {"模型C"}
    assert "模型C" not in {r["meta"]["model"] for r in parts["train"] + parts["dev"]}
    train_cases = {r["meta"]["case_id"] for r in parts["train"]}
    dev_cases = {r["meta"]["case_id"] for r in parts["dev"]}
    assert train_cases and dev_cases and not train_cases & dev_cases
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["seed"] == 5 and manifest["options"]["holdout_models"] == ["模型C"]
    for name in ("train", "dev", "heldout"):
        entry = manifest["files"][f"{name}.jsonl"]
        assert entry["rows"] == len(parts[name])
        assert entry["sha256"] == hashlib.sha256((tmp_path / f"{name}.jsonl").read_bytes()).hexdigest()
    assert manifest["files"]["judge_prompt.txt"]["sha256"] == hashlib.sha256(template.encode()).hexdigest()
    assert manifest["counts"]["cases"]["dev.jsonl"] == len(dev_cases)
    assert summary.counts["rows"]["heldout.jsonl"] == len(parts["heldout"])


def test_sft_prompt_is_the_filled_template_and_notes_explain(engine, session, tmp_path):
    tmp_path = tmp_path / "out"  # the SQLite test database lives in tmp_path itself
    build_world(session)
    export_sft(engine, tmp_path, seed=1, dev_fraction=0)
    rows = {
        (r["meta"]["case_id"], r["meta"]["model"], r["meta"]["criterion_id"]): r
        for r in read_jsonl(tmp_path / "train.jsonl")
    }
    assert read_jsonl(tmp_path / "dev.jsonl") == [] and not (tmp_path / "heldout.jsonl").exists()
    template = DEFAULT_TEMPLATE.read_text(encoding="utf-8")
    first = rows["CC-0001", "model-a", "c01"]
    assert first["instruction"] == (
        template.format(
            user_message="患者男，65岁，胸痛2小时。\n\n需要做哪些检查？",
            response="model-a 对 CC-0001 的回答：先做心电图。",
            rubric_item="CC-0001 的第 1 条评分标准",
        )
    )

    def explanation(key):
        return json.loads(rows[key]["output"][len("```json\n") : -len("\n```")])["explanation"]

    assert explanation(("CC-0001", "model-a", "c03")) == "仲裁：回答提到了关键检查"  # adjudication note first
    assert explanation(("CC-0001", "model-a", "c02")) == "审核：确有说明"  # check note over annotation
    assert explanation(("CC-0001", "model-a", "c01")) == "组1：有"  # group 1 before group 2
    assert explanation(("CC-0002", "model-a", "c05")) == "回答给出了用药剂量"  # group 1's note disagrees
    assert explanation(("CC-0001", "model-a", "c04")) == GENERIC_EXPLANATION[False]
    assert explanation(("CC-0001", "model-a", "c06")) == GENERIC_EXPLANATION[True]


def test_sft_is_byte_identical_for_the_same_seed_and_splits_by_seed(engine, session, tmp_path):
    build_sft_world(session)
    for name in ("one", "two"):
        export_sft(engine, tmp_path / name, seed=42, holdout_models=["org/model-b"], dev_fraction=0.3)
    for name in ("train.jsonl", "dev.jsonl", "heldout.jsonl", "manifest.json", "judge_prompt.txt"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    dev_sets = set()
    for seed in range(6):
        export_sft(engine, tmp_path / f"s{seed}", seed=seed, dev_fraction=0.3)
        dev_sets.add(frozenset(r["meta"]["case_id"] for r in read_jsonl(tmp_path / f"s{seed}" / "dev.jsonl")))
    assert len(dev_sets) > 1


def test_sft_written_a_few_rows_at_a_time_is_the_same_bytes(engine, session, tmp_path, monkeypatch):
    """Rows become lines a block at a time; blocks that split a case and a file change no byte."""
    from analysis.exports import sft

    build_sft_world(session)
    export_sft(engine, tmp_path / "whole", seed=42, holdout_models=["org/model-b"], dev_fraction=0.3)
    monkeypatch.setattr(sft, "ROWS_PER_BLOCK", 3)
    export_sft(engine, tmp_path / "blocks", seed=42, holdout_models=["org/model-b"], dev_fraction=0.3)
    for name in ("train.jsonl", "dev.jsonl", "heldout.jsonl", "manifest.json"):
        whole = (tmp_path / "whole" / name).read_bytes()
        assert whole and (tmp_path / "blocks" / name).read_bytes() == whole, name


@pytest.mark.parametrize("fmt", ["instruction", "messages"])
def test_sft_lines_are_canonical_json(sqlite_engine, tmp_path, fmt):
    with Session(sqlite_engine) as session:
        build_world(session)
        case = session.exec(select(Case).where(Case.case_id == "CC-0001")).one()
        case.clinical_context = '引号"反斜杠\\换行\n制表\t控制\x01 {response} 😀'
        session.add(case)
        session.commit()
    template = tmp_path / "t.txt"
    template.write_text(
        '前"缀\\ {user_message}\n{response}\t{rubric_item} 后缀 {{"criteria_met": true}}', encoding="utf-8"
    )
    export_sft(sqlite_engine, tmp_path / "out", fmt=fmt, template_path=template, dev_fraction=0)
    lines = (tmp_path / "out" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines
    for line in lines:
        record = json.loads(line)
        assert line == json.dumps(record, ensure_ascii=False)
        prompt = record["instruction"] if fmt == "instruction" else record["messages"][0]["content"]
        if record["meta"]["case_id"] == "CC-0001":
            assert prompt.startswith('前"缀\\ 引号"反斜杠\\换行\n制表\t控制\x01 {response} 😀\n\n')


def test_sft_messages_format_and_custom_template(engine, session, tmp_path):
    build_world(session)
    custom = tmp_path / "my_prompt.txt"
    custom.write_text(
        '问：{user_message}\n答：{response}\n标准：{rubric_item}\n输出 {{"criteria_met": …}}', encoding="utf-8"
    )
    export_sft(engine, tmp_path / "out", fmt="messages", template_path=custom, dev_fraction=0)
    rows = read_jsonl(tmp_path / "out" / "train.jsonl")
    assert rows and all(list(row) == ["messages", "meta"] for row in rows)
    user, assistant = rows[0]["messages"]
    assert user["role"] == "user" and assistant["role"] == "assistant"
    assert user["content"].startswith("问：患者男，65岁") and user["content"].endswith('输出 {"criteria_met": …}')
    assert assistant["content"].startswith("```json\n")
    assert (tmp_path / "out" / "judge_prompt.txt").read_text(encoding="utf-8") == custom.read_text(encoding="utf-8")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["options"]["format"] == "messages" and manifest["options"]["template"] == "my_prompt.txt"


def test_sft_refuses_bad_options(engine, session, tmp_path):
    build_world(session)
    bad_template = tmp_path / "bad.txt"
    bad_template.write_text("只有 {response}", encoding="utf-8")
    with pytest.raises(ValidationFailed, match="user_message"):
        export_sft(engine, tmp_path / "a", template_path=bad_template)
    with pytest.raises(ValidationFailed, match="no-such-model"):
        export_sft(engine, tmp_path / "b", holdout_models=["no-such-model"])
    with pytest.raises(ValidationFailed):
        export_sft(engine, tmp_path / "c", dev_fraction=1.5)
    with pytest.raises(ValidationFailed):
        export_sft(engine, tmp_path / "d", fmt="chatml")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_fill_template_does_not_refill_placeholders_inside_values():
    filled = fill_template(
        "{user_message}|{response}|{rubric_item}",
        user_message="写 {response}",
        response="R",
        rubric_item="{user_message}",
    )
    assert filled == "写 {response}|R|{user_message}"


# downloads ------------------------------------------------------------------------------------


@pytest.mark.parametrize("what", EXPORT_KINDS)
def test_export_bundle_zips_each_export(sqlite_engine, tmp_path, what):
    with Session(sqlite_engine) as session:
        build_world(session)
    options = {"source": "gold", "models": ["model-a", "模型C"]} if what == "judgements" else {}
    if what == "release":
        options = {"size": N}  # the world's rubrics have N criteria
    filename, data = export_bundle(sqlite_engine, what, **options)
    assert filename == f"clinconsensus-{what}.zip"
    archive = zipfile.ZipFile(io.BytesIO(data))
    names = archive.namelist()
    assert "SUMMARY.txt" in names and len(names) >= 2
    assert archive.testzip() is None
    summary = archive.read("SUMMARY.txt").decode("utf-8")
    assert f"export {what}" in summary and "/tmp" not in summary
    # The files it names are named as the zip names them: no leading "/" (the temporary folder cut away).
    assert not re.search(r"(^|[\s(:])/\w", summary), summary
    named = [name for name in names if name != "SUMMARY.txt" and name.rsplit("/", 1)[-1] in summary]
    assert named, summary
    assert export_bundle(sqlite_engine, what, **options)[1] == data  # deterministic
    with pytest.raises(ValidationFailed):
        export_bundle(sqlite_engine, "everything")


# command line ---------------------------------------------------------------------------------


def test_command_line_exports(sqlite_url, tmp_path, monkeypatch, capsys):
    from cli.main import main
    from db.store.engine import make_engine

    engine = make_engine(sqlite_url)
    with Session(engine) as session:
        build_world(session)
    engine.dispose()
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    assert main(["export", "gold", str(tmp_path / "gold.jsonl")]) == 0
    assert "export gold" in capsys.readouterr().out
    assert len(read_jsonl(tmp_path / "gold.jsonl")) == 34
    assert main(["export", "judgements", str(tmp_path / "j"), "--source", "gold", "--models", "model-a,模型C"]) == 0
    assert (tmp_path / "j" / "manifest.json").exists() and (tmp_path / "j" / "judgements" / "模型C_judge.json").exists()
    assert main(["export", "judgements", str(tmp_path / "k"), "--source", "gold"]) == 1
    assert "no case on which every one of 3 model(s)" in capsys.readouterr().err
    assert (
        main(
            [
                "export",
                "sft",
                str(tmp_path / "sft"),
                "--seed",
                "3",
                "--holdout-models",
                "模型C,model-a",
                "--format",
                "messages",
                "--dev-fraction",
                "0.5",
            ]
        )
        == 0
    )
    manifest = json.loads((tmp_path / "sft" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["seed"] == 3 and manifest["options"]["holdout_models"] == ["model-a", "模型C"]
    capsys.readouterr()
    assert main(["export", "judgements", str(tmp_path / "bad"), "--source", "group3"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("clinconsensus: ") and "group3" in error
    assert main(["export", "sft", str(tmp_path / "bad"), "--template", str(tmp_path / "missing.txt")]) == 1
    assert "missing.txt" in capsys.readouterr().err


def test_summary_lists_at_most_a_few_items():
    summary = ExportSummary("release", Path("out"), warnings=[f"w{i}" for i in range(120)])
    text = str(summary)
    assert "w49" in text and "w50" not in text and "and 70 more" in text and "warnings (120)" in text


@pytest.mark.parametrize("source", ["gold", "group1", "judge:judge-x"])
def test_official_scoring_of_the_export_equals_the_report(engine, session, tmp_path, source):
    """Exported one model at a time, the judgement files reproduce the report's model scores (same source)."""
    from analysis.loader import load_frames
    from analysis.report import build_report, report_json

    build_world(session)
    report = report_json(build_report(load_frames(engine), k=3, source=source, resamples=0))
    scored = [model for model, item in report["models"].items() if item["n_responses"]]
    assert scored
    for index, model in enumerate(scored):
        out = tmp_path / f"out{index}"
        export_judgements(engine, out, source=source, models=[model], k=3)
        got = official_scores(out, 3)[model]
        expected = report["models"][model]
        ours = json.loads((out / "scores.json").read_text(encoding="utf-8"))["models"][model]
        assert got["responses"] == expected["n_responses"] == ours["n_responses"]
        for key, name in (("cacs", "cacs_at_k"), ("accuracy", "rubric_accuracy"), ("pass", "pass_at_k")):
            assert got[key] == pytest.approx(expected[name], abs=1e-12)
            assert ours[name] == pytest.approx(expected[name], abs=1e-12)


def test_release_of_imported_cases_strips_forbidden_keys(engine, tmp_path):
    """Cases as an importer stores them (extra keys kept whole) come out clean in the release."""
    from db.importers import import_file

    rubric = [{"criterion_id": f"r{i}", "criterion": f"标准 {i}"} for i in range(1, 31)]
    records = [
        {
            "case_id": "CC-9001",
            "difficulty": "low",
            "task": "患者教育",
            "task_labels": ["patient_education"],
            "subject": "心内科",
            "subject_labels": ["心内科"],
            "user_role": "患者家属",
            "clinical_context": "背景，邮箱 a.b@example.org",
            "user_request": "问题",
            "rubrics": rubric,
            "reference_answer": "参考答案",
            "source_file": "raw.xlsx",
            "physician_comments": "内部",
            "license_note": "ok",
            "nested": {"qc_flag": 1, "keep": "yes"},
        },
        {
            "case_id": "CC-9002",
            "difficulty": "high",
            "task": "鉴别诊断",
            "task_labels": ["differential_diagnosis"],
            "subject": "儿科",
            "subject_labels": ["儿科"],
            "user_role": "医生",
            "clinical_context": "背景",
            "user_request": "问题",
            "rubrics": [],
        },
    ]
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    import_file(engine, "cases", path)
    summary = export_release(engine, tmp_path / "release")
    cases = read_jsonl(tmp_path / "release" / "cases.jsonl")
    assert [c["case_id"] for c in cases] == ["CC-9001"]
    case = cases[0]
    assert [item["criterion_id"] for item in case["rubrics"]] == [f"r{i}" for i in range(1, 31)]
    for key in ("reference_answer", "source_file", "physician_comments"):
        assert key not in case
    assert case["license_note"] == "ok" and case["nested"] == {"keep": "yes"}
    text = str(summary)
    assert "CC-9002" in text and "source_file" in text and "nested.qc_flag" in text
    # The reference answer is stored apart as the case's reference (never among its extra keys): nothing to strip.
    assert "reference_answer" not in text
    assert any("email" in warning for warning in summary.warnings)
