"""Importing judge decisions (docs/REFERENCE.md §3.4).

All three shapes: plain rows, local-judge output, official files.
"""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session, func, select

from db import counts
from db.importers import ImportFailed, import_file, import_stream, model_of_judgement_file
from db.rules.config import RUBRIC_SIZE
from db.store.models import AuditLog, Case, JudgeDecision, Response
from db.work.status import judge_decision_count
from tests.support import official_rules, recount
from tests.support.import_samples import MODELS, case_record, refused, response_record, table_counts, write_jsonl


@pytest.fixture
def prepared(engine, tmp_path):
    cases = [case_record("CC-0001"), case_record("CC-0002")]
    import_file(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", cases))
    responses = [response_record(case["case_id"], model) for case in cases for model in MODELS]
    responses.append(response_record("CC-0001", "vendor/model:v2"))
    import_file(engine, "responses", write_jsonl(tmp_path / "responses.jsonl", responses))
    return engine


def _decisions(engine) -> dict[tuple, tuple]:
    with Session(engine) as session:
        rows = session.exec(
            select(
                JudgeDecision.judge,
                Case.case_id,
                Response.model,
                JudgeDecision.criterion_id,
                JudgeDecision.met,
                JudgeDecision.extra,
            )
            .join(Response, JudgeDecision.response_id == Response.id)
            .join(Case, Response.case_pk == Case.id)
        ).all()
    return {
        (judge, case_id, model, criterion_id): (met, extra) for judge, case_id, model, criterion_id, met, extra in rows
    }


def _official(tmp_path, model: str, items: list, name: str | None = None):
    path = tmp_path / (name or f"{model}_judge.json")
    path.write_text(json.dumps(items, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def _results(n: int = RUBRIC_SIZE) -> list[dict]:
    return [{"criterion_id": f"c{i:02d}", "criteria_met": i % 3 == 0} for i in range(1, n + 1)]


def test_plain_decisions_round_trip_and_replacement(prepared, tmp_path):
    rows = [
        {"judge": "gpt-judge", "case_id": "CC-0001", "model": "model-a", "criterion_id": "c01", "met": True},
        {
            "judge": "gpt-judge",
            "case_id": "CC-0001",
            "model": "model-a",
            "criterion_id": "c02",
            "met": False,
            "confidence": 0.4,
        },
        {"judge": "ds-judge", "case_id": "CC-0002", "model": "model-b", "criterion_id": "c01", "met": False},
    ]
    path = write_jsonl(tmp_path / "judge.jsonl", rows)
    summary = import_file(prepared, "judge", path)
    assert (summary.fmt, summary.records, summary.inserted) == ("decisions", 3, 3)
    assert _decisions(prepared) == {
        ("gpt-judge", "CC-0001", "model-a", "c01"): (True, None),
        ("gpt-judge", "CC-0001", "model-a", "c02"): (False, {"confidence": 0.4}),
        ("ds-judge", "CC-0002", "model-b", "c01"): (False, None),
    }
    before = table_counts(prepared)
    again = import_file(prepared, "judge", path)
    assert (again.inserted, again.replaced, again.unchanged) == (0, 0, 3)
    assert table_counts(prepared) == before

    rows[0]["met"] = False
    changed = import_file(prepared, "judge", write_jsonl(tmp_path / "judge-v2.jsonl", rows))
    assert (changed.replaced, changed.unchanged) == (1, 2)
    assert _decisions(prepared)[("gpt-judge", "CC-0001", "model-a", "c01")] == (False, None)
    with Session(prepared) as session:
        entry = session.exec(select(AuditLog).where(AuditLog.entity == "judge_decision")).one()
    assert entry.entity_key == "gpt-judge/CC-0001/model-a/c01"
    assert entry.before["met"] is True and entry.after["met"] is False


def test_local_judge_output_rows(prepared, tmp_path):
    item = {
        "user_message": "病情……",
        "response": "回答……",
        "rubric_item": "应建议就医",
        "case_id": "CC-0001",
        "model": "model-b",
        "criterion_id": "c07",
        "explanation": "回答明确建议就医。",
        "criteria_met": True,
        "judge_model": "qwen-judge-7b",
        "latency_ms": 812,
    }
    summary = import_file(prepared, "judge", write_jsonl(tmp_path / "local.jsonl", [item]))
    assert (summary.fmt, summary.inserted) == ("local-judge", 1)
    met, extra = _decisions(prepared)[("qwen-judge-7b", "CC-0001", "model-b", "c07")]
    assert met is True
    assert extra == {"explanation": "回答明确建议就医。", "latency_ms": 812}, "the echoed inputs are not copied"

    # no judge name in the rows: taken from the option, refused without it
    bare = {k: v for k, v in item.items() if k != "judge_model"} | {"criterion_id": "c08"}
    path = write_jsonl(tmp_path / "bare.jsonl", [bare])
    errors = refused(prepared, "judge", path)
    assert errors[0] == "bare.jsonl line 1: judge is missing (give the judge's name in the file or with --judge NAME)"
    assert import_file(prepared, "judge", path, judge="local-7b").inserted == 1
    assert ("local-7b", "CC-0001", "model-b", "c08") in _decisions(prepared)


def test_official_per_model_files(prepared, tmp_path):
    items = [
        {"case_id": "CC-0001", "criteria_results": _results()},
        {"case_id": "CC-0002", "criteria_results": _results(), "score": 0.33},
    ]
    path = _official(tmp_path, "model-a", items)
    summary = import_file(prepared, "judge", path, judge="gold-judge")
    assert (summary.fmt, summary.records, summary.inserted) == ("official", 2 * RUBRIC_SIZE, 2 * RUBRIC_SIZE)
    decisions = _decisions(prepared)
    assert decisions[("gold-judge", "CC-0001", "model-a", "c03")] == (True, None)
    assert decisions[("gold-judge", "CC-0001", "model-a", "c04")] == (False, None)
    assert decisions[("gold-judge", "CC-0002", "model-a", "c01")] == (False, {"case": {"score": 0.33}})
    assert import_file(prepared, "judge", path, judge="gold-judge").unchanged == 2 * RUBRIC_SIZE

    # the model name comes from the file name, percent-escapes undone as the export writes them
    assert model_of_judgement_file("vendor%2Fmodel%3Av2_judge.json") == "vendor/model:v2"
    escaped = _official(
        tmp_path, "x", [{"case_id": "CC-0001", "criteria_results": _results(2)}], name="vendor%2Fmodel%3Av2_judge.json"
    )
    assert import_file(prepared, "judge", escaped, judge="gold-judge").inserted == 2
    assert ("gold-judge", "CC-0001", "vendor/model:v2", "c02") in _decisions(prepared)


def test_official_file_needs_a_judge_name_and_a_model(prepared, tmp_path):
    path = _official(tmp_path, "model-a", [{"case_id": "CC-0001", "criteria_results": _results()}])
    assert refused(prepared, "judge", path)[0] == (
        "model-a_judge.json: the judge's name is needed for an official judgement file (--judge NAME)"
    )
    unnamed = _official(tmp_path, "x", [{"case_id": "CC-0001", "criteria_results": _results()}], name="scores.json")
    assert refused(prepared, "judge", unnamed, judge="j")[0].startswith("scores.json line 2: model is missing")


def test_bad_official_files_name_the_line_and_field(prepared, tmp_path):
    results = _results()
    results[4]["criterion_id"] = 5
    items = [
        {"case_id": "CC-0001", "criteria_results": _results()},
        {"case_id": "CC-0002", "rubric_results": results},
    ]
    path = _official(tmp_path, "model-a", items)
    errors = refused(prepared, "judge", path, judge="j")
    line = path.read_text(encoding="utf-8").splitlines().index("  {", 2) + 1  # the second item's first line
    assert errors[0].startswith(f"model-a_judge.json line {line}: rubric_results[4].criterion_id must be "), errors

    beyond = _official(
        tmp_path, "model-a", [{"case_id": "CC-0001", "criteria_results": [{"criteria_met": True}] * (RUBRIC_SIZE + 1)}]
    )
    assert refused(prepared, "judge", beyond, judge="j")[0] == (
        f"model-a_judge.json line 2: criteria_results[{RUBRIC_SIZE}].criterion_id is missing and case_id 'CC-0001' "
        f"has no criterion at place {RUBRIC_SIZE + 1} of its current rubric"
    )

    unknown = _official(tmp_path, "model-z", [{"case_id": "CC-0001", "criteria_results": _results()}])
    assert "model 'model-z' has no response to case_id 'CC-0001'" in refused(prepared, "judge", unknown, judge="j")[0]

    broken = tmp_path / "model-a_judge.json"
    broken.write_text('[\n  {"case_id": "CC-0001", "criteria_results": []},\n  {"case_id": \n]', encoding="utf-8")
    assert refused(prepared, "judge", broken, judge="j")[0].startswith("model-a_judge.json line 4: not valid JSON")

    not_a_list = tmp_path / "model-b_judge.json"
    not_a_list.write_text('{"case_id": "CC-0001"}', encoding="utf-8")
    errors = refused(prepared, "judge", not_a_list, judge="j", fmt="official")
    assert errors[0] == (
        "model-b_judge.json line 1: an official judgement file must be a JSON list of cases at its top level, "
        "found an object"
    )

    twice = _official(
        tmp_path,
        "model-b",
        [
            {"case_id": "CC-0001", "criteria_results": _results(1)},
            {"case_id": "CC-0001", "criteria_results": _results(1)},
        ],
    )
    assert "case_id 'CC-0001' repeats line 2" in refused(prepared, "judge", twice, judge="j")[0]


@pytest.mark.parametrize(
    "bad_row, expected",
    [
        (
            {"judge": "j", "case_id": "CC-0001", "model": "model-a", "criterion_id": "c01", "met": "no"},
            "judge.jsonl line 2: met must be true or false, found a string",
        ),
        (
            {"judge": "j", "case_id": "CC-0001", "model": "model-a", "criterion_id": "c31", "met": True},
            "judge.jsonl line 2: criterion_id 'c31' is not in the current rubric of case 'CC-0001'",
        ),
        (
            {"judge": "", "case_id": "CC-0001", "model": "model-a", "criterion_id": "c01", "met": True},
            "judge.jsonl line 2: judge is blank",
        ),
        (
            {"judge": "j", "case_id": "CC-0001", "model": "model-a", "criterion_id": "c02", "met": True},
            "judge.jsonl line 2: criterion_id 'c02': a second decision of judge 'j'",
        ),
        (
            {"judge": "j", "case_id": "CC-0001", "model": "model-a", "criterion_id": "c03", "criteria_met": True},
            "judge.jsonl line 2: met is missing (this looks like local-judge output",
        ),
    ],
)
def test_bad_decision_rows_are_refused(prepared, tmp_path, bad_row, expected):
    first = {"judge": "j", "case_id": "CC-0001", "model": "model-a", "criterion_id": "c02", "met": False}
    errors = refused(prepared, "judge", write_jsonl(tmp_path / "judge.jsonl", [first, bad_row]))
    assert errors[0].startswith(expected), errors


def test_format_option_is_checked_and_shapes_recognised_from_uploads(prepared, tmp_path):
    with pytest.raises(ImportFailed, match="--format must be one of decisions, local-judge, official"):
        import_file(prepared, "judge", write_jsonl(tmp_path / "judge.jsonl", []), fmt="csv")
    with pytest.raises(ImportFailed, match="applies to judge files only"):
        import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", []), fmt="official")
    body = json.dumps([{"case_id": "CC-0002", "criteria_results": _results(3)}]).encode()
    summary = import_stream(prepared, "judge", "model-b_judge.json", body, judge="uploaded")
    assert (summary.fmt, summary.inserted) == ("official", 3)


def test_judge_from_the_option_keeps_extra_keys(prepared, tmp_path):
    row = {"case_id": "CC-0001", "model": "model-a", "criterion_id": "c09", "met": True, "seed": 3}
    summary = import_file(prepared, "judge", write_jsonl(tmp_path / "judge.jsonl", [row]), judge="opt-judge")
    assert summary.inserted == 1
    assert _decisions(prepared)[("opt-judge", "CC-0001", "model-a", "c09")] == (True, {"seed": 3})


def test_lenient_official_files_import_with_the_official_scorers_meaning(prepared, tmp_path):
    """What scripts/eval_cacs.py accepts imports too, met where it counts met (tests/support/official_rules)."""
    values = [True, "true", " YES ", "Met", 1, 2.5, "1", False, "false", "no", 0, 0.0, "maybe", None]
    first = [{"criterion_id": f"c{i:02d}", "criteria_met": values[i % len(values)]} for i in range(1, RUBRIC_SIZE + 1)]
    # the second case: no criterion ids (matched by place), another results key, a non-object entry passed over
    second = [{"criteria_met": values[(i * 5) % len(values)], "why": f"r{i}"} for i in range(RUBRIC_SIZE)]
    second.insert(3, "not an object")
    items = [
        {"id": "CC-0001", "rubric_judgments": first},
        {"prompt_id": "2", "rubric_results": second},
    ]
    path = _official(tmp_path, "model-b", items)
    summary = import_file(prepared, "judge", path, judge="lenient")
    nulls = sum(entry["criteria_met"] is None for entry in first) + sum(
        isinstance(entry, dict) and entry["criteria_met"] is None for entry in second
    )
    assert nulls > 0 and summary.unparsed == nulls  # a null is skipped and counted, never stored
    assert summary.inserted == 2 * RUBRIC_SIZE - nulls

    decisions = _decisions(prepared)
    stored = {
        case_id: sum(met for (judge, c, model, _), (met, _) in decisions.items() if c == case_id and judge == "lenient")
        for case_id in ("CC-0001", "CC-0002")
    }
    assert stored == official_rules.case_positives(path) and 0 < stored["CC-0001"] < RUBRIC_SIZE
    # by place: the fourth entry of the list was passed over, so the fifth result is the rubric's fourth criterion
    assert decisions[("lenient", "CC-0002", "model-b", "c04")] == (
        _met_by_scorer(second[4]["criteria_met"]),
        {"why": "r3", "case": {"prompt_id": "2"}},
    )
    assert decisions[("lenient", "CC-0001", "model-b", "c02")][0] is True  # " YES "
    assert decisions[("lenient", "CC-0001", "model-b", "c12")][0] is False  # "maybe": not met, as the scorer reads it
    # an item without any case key is the case at its place in the file
    placed = _official(tmp_path, "model-a", [{"criteria_results": _results(2)}])
    assert import_file(prepared, "judge", placed, judge="by-place").inserted == 2
    assert ("by-place", "CC-0001", "model-a", "c02") in _decisions(prepared)


def _met_by_scorer(value) -> bool:
    return official_rules._truthy(value)


def _decision_counts(engine) -> tuple[list, list, int, int]:
    with Session(engine) as session:
        by_judge = session.exec(
            select(JudgeDecision.judge, func.count()).group_by(JudgeDecision.judge).order_by(JudgeDecision.judge)
        ).all()
        total = session.exec(select(func.count()).select_from(JudgeDecision)).one()
        return (
            recount.kept_judge_totals(session),
            [tuple(row) for row in by_judge],
            judge_decision_count(session),
            total,
        )


def test_the_kept_judge_totals_follow_inserts_and_ignore_replacements_and_refusals(prepared, tmp_path):
    def row(judge, case_id, model, criterion, met):
        return {"judge": judge, "case_id": case_id, "model": model, "criterion_id": criterion, "met": met}

    first = [row("gpt-judge", "CC-0001", m, f"c{i:02d}", i % 2 == 0) for m in MODELS for i in range(1, 6)]
    first += [row("ds-judge", "CC-0002", "model-a", f"c{i:02d}", True) for i in range(1, 4)]
    import_file(prepared, "judge", write_jsonl(tmp_path / "first.jsonl", first))
    kept, recounted, shown, total = _decision_counts(prepared)
    assert kept == recounted == [("ds-judge", 3), ("gpt-judge", 5 * len(MODELS))]
    assert shown == total == 3 + 5 * len(MODELS)

    # Two answers changed (replacements: no new decision), two new ones, the rest unchanged.
    again = [dict(r) for r in first]
    again[0]["met"] = not again[0]["met"]
    again[-1]["met"] = False
    again += [row("gpt-judge", "CC-0002", "model-b", "c07", True), row("new-judge", "CC-0001", "model-a", "c01", False)]
    summary = import_file(prepared, "judge", write_jsonl(tmp_path / "again.jsonl", again))
    assert (summary.inserted, summary.replaced) == (2, 2)
    kept, recounted, shown, total = _decision_counts(prepared)
    assert kept == recounted and shown == total == 5 + 5 * len(MODELS)

    # An official file of another judge adds its decisions; a refused file adds nothing.
    import_file(
        prepared,
        "judge",
        _official(tmp_path, "model-b", [{"case_id": "CC-0001", "criteria_results": _results()}]),
        judge="off-judge",
    )
    bad = [row("gpt-judge", "CC-0002", "model-a", "c09", True), row("gpt-judge", "CC-0002", "model-a", "c99", True)]
    with pytest.raises(ImportFailed):
        import_file(prepared, "judge", write_jsonl(tmp_path / "bad.jsonl", bad))
    kept, recounted, shown, total = _decision_counts(prepared)
    assert kept == recounted and ("off-judge", RUBRIC_SIZE) in kept
    assert shown == total == 5 + 5 * len(MODELS) + RUBRIC_SIZE

    with Session(prepared) as session:  # a repair rewrites the same totals
        counts.rebuild_all(session)
        session.commit()
        assert recount.kept_judge_totals(session) == recounted
