"""`clinconsensus export healthbench-meta FILE`: our physicians' final labels in HealthBench's meta-evaluation
shape, on SQLite and PostgreSQL, checked field by field against the small database."""

from __future__ import annotations

import json

from cli.main import main
from tests.analysis.test_report import small_database  # noqa: F401  (fixture)
from tests.analysis.test_report_insights import GROUP1, GROUP2, MODEL

RESPONSE_TEXT = {"1a": "abcd", "1b": "ab", "2a": "abcdef", "2b": "a"}
META_KEYS = {
    "prompt",
    "prompt_id",
    "completion",
    "completion_id",
    "rubric",
    "category",
    "binary_labels",
    "anonymized_physician_ids",
}


def test_healthbench_meta_rows(small_database, tmp_path, capsys):  # noqa: F811
    path = tmp_path / "meta.jsonl"
    assert main(["export", "healthbench-meta", str(path), "--gold", "provisional"]) == 0
    assert "rows" in capsys.readouterr().out
    text = path.read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines()]
    assert len(rows) == 12
    seen = set()
    for row in rows:
        assert set(row) >= META_KEYS and {"case_id", "model", "criterion_id", "groups"} <= set(row)
        key = next(k for k in RESPONSE_TEXT if row["case_id"].endswith(k[0]) and MODEL[k] == row["model"])
        index = int(row["criterion_id"][1:]) - 1
        assert row["prompt"] == [{"role": "user", "content": f"{row['case_id']} 的临床背景\n\n请问该怎么办？"}]
        assert row["prompt_id"] == row["case_id"] and row["completion"] == RESPONSE_TEXT[key]
        assert row["completion_id"] == f"{row['case_id']}:{row['model']}"
        assert row["rubric"] == f"{row['case_id']} 的第 {index + 1} 条评分标准"
        assert row["category"] == "differential_diagnosis"
        assert row["binary_labels"] == [bool(GROUP1[key][index]), bool(GROUP2[key][index])]
        assert row["groups"] == [1, 2] and len(row["anonymized_physician_ids"]) == 2
        # what the meta-evaluation builds from a row: the conversation with the completion appended
        conversation = row["prompt"] + [{"content": row["completion"], "role": "assistant"}]
        assert [m["role"] for m in conversation] == ["user", "assistant"]
        seen.add((key, row["criterion_id"]))
    assert len(seen) == 12
    ids = {tuple(row["anonymized_physician_ids"]) for row in rows}
    # ann-1 and ann-2 label everything; the group-1 check on 2a c03 is chk-1's label
    assert ids == {("physician-001", "physician-002"), ("physician-003", "physician-002")}
    checked = [r for r in rows if r["case_id"] == "CC-0002" and r["model"] == "model-a" and r["criterion_id"] == "c03"]
    assert checked[0]["anonymized_physician_ids"][0] == "physician-003"
    for name in ("ann-1", "ann-2", "chk-1", "chk-2"):
        assert name not in text


def test_healthbench_meta_of_an_empty_database_is_an_empty_file(engine, tmp_path):
    from analysis.exports.healthbench_meta import export_healthbench_meta

    summary = export_healthbench_meta(engine, tmp_path / "meta.jsonl")
    assert (tmp_path / "meta.jsonl").read_bytes() == b""
    assert summary.counts == {"rows": 0, "rows with both groups' labels": 0, "physicians": 0}


def test_healthbench_meta_writes_lines_in_blocks_without_changing_them(small_database, tmp_path, monkeypatch):  # noqa: F811
    """Decisions are turned into lines a block at a time; a block boundary inside a case changes no byte."""
    from analysis.exports import healthbench_meta

    assert main(["export", "healthbench-meta", str(tmp_path / "whole.jsonl"), "--gold", "provisional"]) == 0
    monkeypatch.setattr(healthbench_meta, "LINES_PER_BLOCK", 5)
    assert main(["export", "healthbench-meta", str(tmp_path / "blocks.jsonl"), "--gold", "provisional"]) == 0
    whole = (tmp_path / "whole.jsonl").read_bytes()
    assert whole and (tmp_path / "blocks.jsonl").read_bytes() == whole
