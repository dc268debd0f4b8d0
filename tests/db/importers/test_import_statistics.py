"""A large import on PostgreSQL leaves statistics of the tables it wrote, so what it reads back it reads by key.

Without statistics PostgreSQL took a judge's name (judge_decision) or a group and stage (label_tally) for a
key that picks out a few rows, and read every such row for each look-up by the whole key: an import grew
with the square of the data (benchmarks/bench_growth.py: one judge's decisions at 1,000 cases took 5 s and
at 2,500 cases 64 s; with statistics 11 s). The chunks are made small here, so a few rows count as large.
"""

from __future__ import annotations

import pytest
from sqlmodel import Session

from db import importers
from db.counts import write as counts_write
from db.importers import import_file
from db.store.engine import make_engine
from tests.support import recount
from tests.support.import_samples import MODELS, case_record, label_record, response_record, write_jsonl

CASES = ("CC-0001", "CC-0002")
CRITERIA = [f"c{i:02d}" for i in range(1, 11)]
WRITTEN = ("label", "label_tally", "judge_decision")


def _rows_known(engine) -> dict[str, float]:
    """reltuples of the written tables: -1 until statistics are taken (0 on an empty table)."""
    with engine.connect() as connection:
        return dict(
            connection.exec_driver_sql(
                "SELECT relname, reltuples FROM pg_class WHERE relname IN ('label', 'label_tally', 'judge_decision')"
            ).all()
        )


@pytest.mark.postgres
def test_a_large_import_leaves_statistics_of_what_it_wrote(postgres_url, tmp_path, monkeypatch):
    monkeypatch.setattr(importers.import_summary, "ROW_CHUNK", 40)
    monkeypatch.setattr(importers.import_summary, "BULK_ROWS", 20)
    monkeypatch.setattr(counts_write, "REFRESH_CHUNK", 2)
    engine = make_engine(postgres_url)
    import_file(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", [case_record(case_id) for case_id in CASES]))
    responses = [response_record(case_id, model) for case_id in CASES for model in MODELS]
    import_file(engine, "responses", write_jsonl(tmp_path / "responses.jsonl", responses))
    assert all(_rows_known(engine)[table] <= 0 for table in WRITTEN)

    labels = [
        label_record(case_id, model, criterion, met=i % 3 == 0, group=group, annotator=f"g{group}_reader")
        for case_id in CASES
        for model in MODELS
        for i, criterion in enumerate(CRITERIA)
        for group in (1, 2)
    ]
    import_file(engine, "labels", write_jsonl(tmp_path / "labels.jsonl", labels))
    decisions = [
        {"judge": "judge-a", "case_id": case_id, "model": model, "criterion_id": criterion, "met": i % 2 == 0}
        for case_id in CASES
        for model in MODELS
        for i, criterion in enumerate(CRITERIA)
    ]
    import_file(engine, "judge", write_jsonl(tmp_path / "judge.jsonl", decisions))

    assert all(_rows_known(engine)[table] > 0 for table in WRITTEN), _rows_known(engine)
    with Session(engine) as session:
        assert recount.kept_tally(session) == recount.recount_tally(session)
    engine.dispose()
