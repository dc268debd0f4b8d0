"""Small import files for the importer tests: release-schema cases, responses, labels, judge output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from db.importers import ImportFailed, import_file
from db.rules import config
from db.store.models import AuditLog, Case, Criterion, JudgeDecision, Label, Response, RubricVersion, User

MODELS = ("model-a", "model-b")


def case_record(case_id: str = "CC-0001", n: int | None = None, **fields) -> dict:
    n = config.RUBRIC_SIZE if n is None else n
    record = {
        "case_id": case_id,
        "difficulty": "medium",
        "task": "鉴别诊断",
        "task_labels": ["鉴别诊断", "patient_education"],
        "subject": "心内科",
        "subject_labels": ["心内科"],
        "user_role": "患者家属",
        "clinical_context": f"{case_id}：男，65岁，胸痛两小时。",
        "user_request": "请问该怎么办？",
        "rubrics": [
            {"criterion_id": f"c{i:02d}", "criterion": f"{case_id} 第 {i} 条标准", "tags": ["safety"]}
            for i in range(1, n + 1)
        ],
    }
    record.update(fields)
    return record


def response_record(case_id: str = "CC-0001", model: str = "model-a", text: str | None = None) -> dict:
    return {"case_id": case_id, "model": model, "response": text or f"{model} 对 {case_id} 的回答。"}


def label_record(
    case_id: str = "CC-0001",
    model: str = "model-a",
    criterion_id: str = "c01",
    met: bool = True,
    stage: str = "annotation",
    group: int | None = 1,
    annotator: str = "dr_a",
    **extra,
) -> dict:
    record = {
        "case_id": case_id,
        "model": model,
        "criterion_id": criterion_id,
        "met": met,
        "stage": stage,
        "group": group,
        "annotator": annotator,
    }
    record.update(extra)
    return record


def write_jsonl(path: Path, records) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write((record if isinstance(record, str) else json.dumps(record, ensure_ascii=False)) + "\n")
    return path


def write_bytes(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def table_counts(engine) -> dict[str, int]:
    """Rows of every table an import may touch: 'nothing landed' means these did not move."""
    with Session(engine) as session:
        return {
            model.__name__: session.exec(select(func.count()).select_from(model)).one()[0]
            for model in (Case, RubricVersion, Criterion, Response, Label, JudgeDecision, User, AuditLog)
        }


def foreign_key_count(engine, table: str) -> int:
    """Foreign keys `table` has now (a bulk load drops and restores them on PostgreSQL)."""
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            return connection.exec_driver_sql(
                f"SELECT count(*) FROM pg_constraint WHERE conrelid = '{table}'::regclass AND contype = 'f'"
            ).scalar()
        return len(connection.exec_driver_sql(f"PRAGMA foreign_key_list({table})").all())


def refused(engine, kind: str, path: Path, **options) -> list[str]:
    """The errors of an import that must fail, after checking that it changed nothing at all."""
    before = table_counts(engine)
    with pytest.raises(ImportFailed) as failure:
        import_file(engine, kind, path, **options)
    assert table_counts(engine) == before, "a refused file must land nothing"
    return failure.value.errors
