"""The audit log proves something: keyed chain, replay against the tables, anchors in export manifests.

A small project is built through the real writers (imports, assignments, the annotator's save,
the checker's save), then the database is tampered with the way someone with write access to it
but not the key would, and `clinconsensus audit verify` must name what changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import select

from db import labeling, labels as label_room, review
from db.access import audit, audit_key as audit_key_module, users
from db.access.audit_replay import replay, verify_audit
from db.access.audit_seal import GENESIS_HASH
from db.importers import import_file
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import Stage
from db.store.backup import libpq_environment, pg_tool
from db.store.engine import make_engine, session_scope
from db.store.models import AuditLog, Label, Response, User
from db.work.assignments import assign_labeling
from tests.support.page_save import as_sent

N = RUBRIC_SIZE
PROJECT_ROOT = Path(__file__).resolve().parents[3]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def build_project(engine, tmp_path: Path) -> dict:
    """One case, two models; group 2 labels imported, group 1 labeled in the app, then checked."""
    with session_scope(engine) as s:
        for name, role, group in (
            ("boss", "admin", None),
            ("ann1", "annotator", 1),
            ("ann2", "annotator", 2),
            ("chk1", "checker", 1),
        ):
            users.add_user(
                s, username=name, role=role, group_no=group, password="long-enough-pw", actor=users.CLI_ACTOR
            )
    case = {
        "case_id": "CC-0001",
        "difficulty": "low",
        "task": "诊断",
        "task_labels": ["differential_diagnosis"],
        "subject": "心内科",
        "subject_labels": ["心内科"],
        "user_role": "患者",
        "clinical_context": "胸痛两小时",
        "user_request": "怎么办？",
        "rubrics": [{"criterion_id": f"c{i:02d}", "criterion": f"第{i}条标准"} for i in range(1, N + 1)],
    }
    import_file(engine, "cases", _write_jsonl(tmp_path / "cases.jsonl", [case]), actor="cli")
    responses = [{"case_id": "CC-0001", "model": model, "response": f"{model} 的回答"} for model in ("m-a", "m-b")]
    import_file(engine, "responses", _write_jsonl(tmp_path / "responses.jsonl", responses), actor="cli")
    with session_scope(engine) as s:
        assign_labeling(s, actor=users.get_user(s, username="boss"), annotators=["ann1", "ann2"])
        response_ids = dict(s.exec(select(Response.model, Response.id)).all())
    labels = [
        {
            "case_id": "CC-0001",
            "model": model,
            "criterion_id": f"c{i:02d}",
            "met": i % 3 != 0,
            "stage": "annotation",
            "group": 2,
            "annotator": "ann2",
        }
        for model in ("m-a", "m-b")
        for i in range(1, N + 1)
    ]
    import_file(engine, "labels", _write_jsonl(tmp_path / "labels.jsonl", labels), actor="cli")
    for model in ("m-a", "m-b"):
        with session_scope(engine) as s:
            ann1 = users.get_user(s, username="ann1")
            view = labeling.response_for_labeling(s, ann1, response_ids[model])
            decisions = [
                labeling.LabelInput(f"c{i:02d}", i % 2 == 0, "理由" if i == 1 else None) for i in range(1, N + 1)
            ]
            label_room.save(
                s,
                ann1,
                "annotation",
                response_ids[model],
                **as_sent(decisions),
                rubric_version_id=view.rubric_version_id,
                expected_versions={},
            )
    with session_scope(engine) as s:
        chk1 = users.get_user(s, username="chk1")
        rows = review.check_view(s, chk1, response_ids["m-a"]).rows
        review.save_checks(
            s,
            chk1,
            response_id=response_ids["m-a"],
            decisions=[
                review.CheckInput(
                    row.criterion_id,
                    (not row.annotation.met) if row.criterion_id == "c02" else row.annotation.met,
                    "复核改正" if row.criterion_id == "c02" else None,
                )
                for row in rows
            ],
        )
    return response_ids


def clinconsensus(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def verify(engine, anchor=None):
    with session_scope(engine, read_only=True) as s:
        return verify_audit(s, anchor=anchor)


def execute(engine, statement: str, **values) -> None:
    with engine.begin() as connection:
        connection.execute(text(statement), values)


@pytest.fixture
def project(engine, tmp_path):
    build_project(engine, tmp_path)
    return engine


def test_untouched_project_verifies_and_replays_every_row(project, database_url):
    result = verify(project)
    assert result.ok, result.problems
    assert result.replay.labels == 4 * N + N  # two groups' annotations on two responses, one check
    assert result.replay.rubric_versions == 1 and result.replay.assignments == 4
    done = clinconsensus(database_url, "audit", "verify")
    assert done.returncode == 0, done.stderr
    assert f"replay matches {4 * N + N} labels, 1 rubric versions, 4 assignments" in done.stdout


def test_a_direct_label_edit_is_named(project, database_url):
    execute(project, "UPDATE label SET met = NOT met WHERE stage = 'check' AND criterion_id = 'c05'")
    result = verify(project)
    assert [p for p in result.problems if "c05" in p] == result.problems and len(result.problems) == 1
    assert "label CC-0001/m-a/c05/check/1" in result.problems[0]
    done = clinconsensus(database_url, "audit", "verify")
    assert done.returncode == 1 and "label CC-0001/m-a/c05/check/1" in done.stderr


@pytest.mark.parametrize("deleted", ["last", "tail", "all"])
def test_deleted_entries_are_detected(project, deleted):
    with session_scope(project, read_only=True) as s:
        ids = s.exec(select(AuditLog.id).order_by(AuditLog.id)).all()
    cut = {"last": ids[-1:], "tail": ids[-50:], "all": ids}[deleted]
    execute(project, f"DELETE FROM audit_log WHERE id >= {cut[0]}")
    result = verify(project)
    assert not result.ok
    # The last entries were the checker's saves (one per criterion): those labels are in the table
    # but not in the log any more.
    assert "label CC-0001/m-a/c30/check/1: audit log says absent, database has met=true by chk1" in result.problems
    if deleted == "last":
        assert result.problems == [
            "audit head: sealed at 47 entries, the log has 46: 1 entries missing from the end of the log",
            "label CC-0001/m-a/c30/check/1: audit log says absent, database has met=true by chk1",
        ]
    if deleted == "all":
        # every label, the rubric version, 4 assignments, 4 accounts, the case and both responses
        assert result.replay.n_differences == result.replay.labels + 1 + 4 + 4 + 3


def test_a_rebuilt_chain_fails_without_the_key(project):
    """Someone edits a label and its log entry, then recomputes every hash: without the key it cannot verify."""
    execute(project, "UPDATE label SET met = NOT met WHERE stage = 'check' AND criterion_id = 'c05'")
    with session_scope(project) as s:
        entries = s.exec(select(AuditLog).order_by(AuditLog.id)).all()
        last_check = [e for e in entries if e.entity == "check" and e.entity_key.endswith("/c05/check/1")][-1]
        after = dict(last_check.after)
        after["met"] = not after["met"]
        last_check.after = after
        prev = GENESIS_HASH
        for entry in entries:  # the old, unkeyed recipe (and a guessed key) both fail
            entry.prev_hash = prev
            entry.hash = audit.entry_hash(
                prev_hash=prev,
                at=entry.at,
                actor=entry.actor,
                action=entry.action,
                entity=entry.entity,
                entity_key=entry.entity_key,
                before=entry.before,
                after=entry.after,
                key=b"guessed",
            )
            prev = entry.hash
            s.add(entry)
    result = verify(project)
    assert not result.ok
    assert result.problems[0].startswith("audit chain broken at entry")
    assert "content does not match its hash" in result.problems[0]
    # The replay itself agrees (the attacker kept log and table consistent): only the key catches it.
    assert result.replay.ok


def test_rollback_to_before_an_anchor_is_detected(project, database_url, tmp_path, pg_server_if_postgres):
    engine = project
    backup_file = tmp_path / "before.backup"
    done = clinconsensus(database_url, "backup", str(backup_file))
    assert done.returncode == 0, done.stderr
    # More work after the backup, then an export records the audit head in its manifest.
    with session_scope(engine) as s:
        chk1 = users.get_user(s, username="chk1")
        m_b = s.exec(select(Response.id).where(Response.model == "m-b")).one()
        rows = review.check_view(s, chk1, m_b).rows
        review.save_checks(
            s, chk1, response_id=m_b, decisions=[review.CheckInput(r.criterion_id, r.annotation.met) for r in rows]
        )
    out = tmp_path / "export"
    done = clinconsensus(database_url, "export", "judgements", str(out), "--source", "group1")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    with session_scope(engine, read_only=True) as s:
        assert manifest["audit_head"] == audit.audit_head(s).as_dict()
    assert clinconsensus(database_url, "audit", "verify", "--anchor", str(out / "manifest.json")).returncode == 0

    restored_url = restore(database_url, backup_file, tmp_path, pg_server_if_postgres)
    # The restored copy is consistent in itself: the chain and the replay pass ...
    plain = clinconsensus(restored_url, "audit", "verify")
    assert plain.returncode == 0, plain.stderr
    # ... but it lacks what the export saw: the anchor names the rollback.
    anchored = clinconsensus(restored_url, "audit", "verify", "--anchor", str(out / "manifest.json"))
    assert anchored.returncode == 1 and "rolled back" in anchored.stderr
    restored = make_engine(restored_url)
    try:
        with session_scope(restored, read_only=True) as s:
            assert len(s.exec(select(Label).where(Label.stage == Stage.check)).all()) == N  # only m-a's checks
            assert s.exec(select(User).where(User.username == "chk1")).one().is_active
    finally:
        restored.dispose()


def restore(database_url: str, backup_file: Path, tmp_path: Path, pg_server) -> str:
    """The README's restore steps: SQLite, copy the file into place; PostgreSQL, pg_restore into a new database."""
    if database_url.startswith("sqlite"):
        target = tmp_path / "restored.db"
        target.write_bytes(backup_file.read_bytes())
        return f"sqlite:///{target}"
    name = f"restored_{abs(hash(str(tmp_path))) % 10**8}"
    with pg_server.admin_engine.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    url = pg_server.url(name)
    engine = make_engine(url)
    try:
        env = libpq_environment(engine)
    finally:
        engine.dispose()
    result = subprocess.run(
        [pg_tool("pg_restore"), "--no-owner", "--exit-on-error", "-d", name, str(backup_file)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return url


@pytest.fixture
def pg_server_if_postgres(request, database_url):
    return request.getfixturevalue("pg_server") if not database_url.startswith("sqlite") else None


def test_the_key_file_is_created_once_with_mode_0600(tmp_path, monkeypatch):
    monkeypatch.delenv(audit_key_module.KEY_ENV, raising=False)
    key_file = tmp_path / "keys" / "audit.key"
    monkeypatch.setenv(audit_key_module.KEY_FILE_ENV, str(key_file))
    first = audit.writer_key(chain_is_empty=True)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(first) == 64 and audit_key_module.audit_key() == first
    audit_key_module._key_cache.clear()
    assert audit_key_module.audit_key() == first == key_file.read_text().strip().encode()
    # The hash is HMAC-SHA-256 under that key (checked against hashlib, not our own helper).
    import hmac

    payload = json.dumps(
        ["0" * 64, "2026-01-01T00:00:00.000000", "a", "b", "c", "d", None, None],
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    from datetime import datetime

    expected = hmac.new(first, payload.encode(), hashlib.sha256).hexdigest()
    assert (
        audit.entry_hash(
            prev_hash="0" * 64,
            at=datetime(2026, 1, 1),
            actor="a",
            action="b",
            entity="c",
            entity_key="d",
            before=None,
            after=None,
        )
        == expected
    )


def test_replay_of_an_empty_database_is_clean(engine):
    with session_scope(engine, read_only=True) as s:
        assert replay(s).ok


#: Values whose JSON a fast writer may spell differently from `json.dumps` (the hash's definition).
AWKWARD_AFTER = {
    "small": 1e-05,
    "large": 1e16,
    "third": 1 / 3,
    "beyond_64_bits": 2**70,
    "text": '胸痛 \u0001\n\t"quoted" \\ é 😀',
    "nested": {"b": [1, 2.5, None, True], "a": {"z": "", "y": -0.0}},
}


def test_entries_the_fast_reader_spells_differently_still_verify_and_a_change_to_them_is_caught(engine):
    awkward = dict(AWKWARD_AFTER)
    if engine.dialect.name == "sqlite":  # PostgreSQL's json type refuses NaN, SQLite keeps what json.dumps wrote
        awkward["not_a_number"] = float("nan")
    with session_scope(engine) as s:
        audit.record(s, "admin", action="update", entity="case", entity_key="CC-9999", before=None, after=awkward)
        audit.record(s, "admin", action="update", entity="case", entity_key="CC-9998", after={"plain": "值"})
    result = verify(engine)
    chain_problems = [p for p in result.problems if p.startswith("audit chain")]
    assert chain_problems == [] and result.entries == 2

    # The same content one character different in the stored text: the chain breaks at that entry.
    with session_scope(engine, read_only=True) as s:
        first = s.exec(select(AuditLog).order_by(AuditLog.id)).first()
    stored = json.dumps(awkward).replace("1e-05", "2e-05")
    cast = "CAST(:after AS JSON)" if engine.dialect.name == "postgresql" else ":after"
    execute(engine, f"UPDATE audit_log SET after = {cast} WHERE id = :id", after=stored, id=first.id)
    broken = verify(engine)
    assert broken.problems[0] == f"audit chain broken at entry {first.id}: content does not match its hash"
