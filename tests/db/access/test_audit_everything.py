"""`audit verify` sees everything: accounts, sessions, texts, rubrics, assignments, labels, judge decisions.

A small project is built through the real writers, then tampered with by raw SQL the way someone with
write access to the database but not the key would; `audit verify` must fail and name what changed.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import select

from analysis.exports.gold import export_gold
from db.access import audit_key as audit_key_module, users
from db.access.audit_key import AuditKeyMissing, _key_cache
from db.importers import import_file
from db.rules.config import DATA_DIR_AT_START, Settings
from db.store.engine import session_scope
from db.store.models import AuditLog, AuditSeal, User, utcnow
from demo.generator import build_demo
from tests.db.access.test_audit_proof import PROJECT_ROOT, N, _write_jsonl, build_project, execute, verify


@pytest.fixture
def project(engine, tmp_path):
    build_project(engine, tmp_path)
    judged = [
        {"judge": "judge-x", "case_id": "CC-0001", "model": model, "criterion_id": f"c{i:02d}", "met": i % 4 == 0}
        for model in ("m-a", "m-b")
        for i in range(1, N + 1)
    ]
    import_file(engine, "judge", _write_jsonl(tmp_path / "judge.jsonl", judged), actor="cli")
    with session_scope(engine) as s:
        ann1 = users.get_user(s, username="ann1")
        users.open_session(s, user=ann1)
        users.close_session(s, token=users.open_session(s, user=ann1))
    return engine


def problems_after(engine, statement: str, **values) -> list[str]:
    execute(engine, statement, **values)
    result = verify(engine)
    assert not result.ok
    return result.problems


def test_untampered_project_verifies_every_kind(project):
    result = verify(project)
    assert result.ok, result.problems
    assert result.replay.counts == {
        "users": 4,
        "sessions": 1,
        "texts": 1 + 2,
        "judge_decisions": 2 * N,
        # the rows the rules read, replayed too; this project has none of them yet
        "adjudication_openings": 0,
        "calibration_samples": 0,
        "disagreement_draws": 0,
        "feedback_rounds": 0,
        "leaderboard_snapshots": 0,
        "reference_answers": 0,
    }


def test_role_changed_to_admin_is_named(project):
    problems = problems_after(project, """UPDATE "user" SET role = 'admin', group_no = NULL WHERE username = 'ann1'""")
    assert "user ann1: role: audit log says annotator, database has admin" in problems
    assert "user ann1: group: audit log says 1, database has absent" in problems


def test_copied_password_hash_is_named(project):
    problems = problems_after(
        project,
        """UPDATE "user" SET password_hash = (SELECT password_hash FROM "user" WHERE username = 'boss')
           WHERE username = 'ann1'""",
    )
    assert len(problems) == 1 and problems[0].startswith("user ann1: password: audit log says ")
    with session_scope(project, read_only=True) as s:
        stored_hash = s.exec(select(User.password_hash).where(User.username == "ann1")).one()
        logged = " ".join(str(row.after) for row in s.exec(select(AuditLog)).all())
    assert stored_hash not in logged  # the log holds a digest of the hash, never the hash


def test_inserted_session_row_is_named(project):
    with session_scope(project, read_only=True) as s:
        boss_id = s.exec(select(User.id).where(User.username == "boss")).one()
    now = utcnow()
    problems = problems_after(
        project,
        "INSERT INTO login_session (token_hash, user_id, created_at, expires_at, last_seen_at) "
        "VALUES (:token, :user, :now, :later, :now)",
        token="f" * 64,
        user=boss_id,
        now=now,
        later=now + timedelta(hours=12),
    )
    assert len(problems) == 1
    assert problems[0].startswith("session ffffffffffff…: audit log says absent, database has user boss from ")


def test_rewritten_case_text_is_named(project):
    problems = problems_after(project, """UPDATE "case" SET clinical_context = '胸痛三天' WHERE case_id = 'CC-0001'""")
    assert len(problems) == 1 and problems[0].startswith("case CC-0001: text differs: audit log digest ")


def test_rewritten_response_text_is_named(project):
    problems = problems_after(project, "UPDATE response SET text = '改过的回答' WHERE model = 'm-b'")
    assert len(problems) == 1 and problems[0].startswith("response CC-0001/m-b: text differs: audit log digest ")


def test_flipped_judge_decision_is_named(project):
    problems = problems_after(
        project,
        "UPDATE judge_decision SET met = NOT met WHERE criterion_id = 'c07' AND response_id = "
        "(SELECT id FROM response WHERE model = 'm-a')",
    )
    assert len(problems) == 1 and problems[0].startswith(
        "judge decisions judge-x/CC-0001/m-a: differ from the audit log"
    )


def test_deleted_trailing_entries_are_named(project):
    with session_scope(project, read_only=True) as s:
        last_ids = s.exec(select(AuditLog.id).order_by(AuditLog.id.desc()).limit(3)).all()
    problems = problems_after(project, "DELETE FROM audit_log WHERE id >= :first", first=min(last_ids))
    assert problems[0].endswith("3 entries missing from the end of the log")
    # the three were the session entries: open, open, close
    assert any(problem.startswith("session ") and "audit log says absent" in problem for problem in problems)


def test_a_lowered_seal_is_named(project):
    problems = problems_after(project, "UPDATE audit_seal SET entries = entries - 1")
    assert problems == ["audit head: the seal does not match its count and hash (rewritten without the key)"]


def test_label_change_is_named(project):
    problems = problems_after(
        project,
        "UPDATE label SET met = NOT met WHERE criterion_id = 'c03' AND stage = 'annotation' AND group_no = 2 "
        "AND response_id = (SELECT id FROM response WHERE model = 'm-b')",
    )
    assert problems == [
        "label CC-0001/m-b/c03/annotation/2: audit log says met=false by ann2, database has met=true by ann2"
    ]


def test_rubric_criterion_text_change_is_named(project):
    problems = problems_after(project, "UPDATE criterion SET text = '改过的标准' WHERE criterion_id = 'c04'")
    assert problems == ["rubric CC-0001 v1: criteria differ from the audit log (c04)"]


def test_assignment_change_is_named(project):
    problems = problems_after(
        project,
        """UPDATE assignment SET user_id = (SELECT id FROM "user" WHERE username = 'chk1')
           WHERE group_no = 1 AND response_id = (SELECT id FROM response WHERE model = 'm-a')""",
    )
    assert len(problems) == 1 and problems[0].startswith("assignment label:CC-0001/")
    assert problems[0].endswith("/group1: audit log says ann1, database has chk1")


def test_a_database_restored_to_before_an_export_fails_its_anchor(project, tmp_path):
    """A restore brings back an older log, seal and tables together: only the export's anchor can tell."""
    with session_scope(project, read_only=True) as s:
        last_id = s.exec(select(func.max(AuditLog.id))).one()
        seal = s.get(AuditSeal, 1)
        older_seal = {"entries": seal.entries, "hash": seal.hash, "seal": seal.seal}
    with session_scope(project) as s:
        boss = s.exec(select(User).where(User.username == "boss")).one()
        users.update_account(s, username="ann2", role="checker", group_no=2, actor=boss)
    export_gold(project, tmp_path / "gold.jsonl")
    manifest = tmp_path / "gold.jsonl.manifest.json"
    assert manifest.exists()
    # the older copy: the account as it was, the log and its seal as they were
    execute(project, """UPDATE "user" SET role = 'annotator' WHERE username = 'ann2'""")
    execute(project, "DELETE FROM audit_log WHERE id > :last", last=last_id)
    execute(project, "UPDATE audit_seal SET entries = :entries, hash = :hash, seal = :seal", **older_seal)
    assert verify(project).ok  # consistent in itself
    import json

    from db.access.audit_replay import anchor_from_manifest

    anchor = anchor_from_manifest(json.loads(manifest.read_text(encoding="utf-8")))
    problems = verify(project, anchor=anchor).problems
    assert len(problems) == 1 and problems[0].startswith("anchor: the log has ")


def test_untampered_small_demo_verifies(engine, database_url):
    build_demo(engine, scale="small")
    result = verify(engine)
    assert result.ok, result.problems[:5]
    assert result.replay.counts["judge_decisions"] > 0 and result.replay.counts["texts"] > 0
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "audit", "verify"],
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


# The key file ------------------------------------------------------------------------------------------


@pytest.fixture
def key_file(tmp_path, monkeypatch):
    monkeypatch.delenv(audit_key_module.KEY_ENV, raising=False)
    path = tmp_path / "keys" / "audit.key"
    monkeypatch.setenv(audit_key_module.KEY_FILE_ENV, str(path))
    _key_cache.clear()
    yield path
    _key_cache.clear()


def _counts(engine) -> tuple[int, int]:
    with session_scope(engine, read_only=True) as s:
        return (
            s.exec(select(func.count()).select_from(User)).one(),
            s.exec(select(func.count()).select_from(AuditLog)).one(),
        )


def test_a_missing_key_with_a_chain_refuses_to_write_and_writes_nothing(engine, key_file, database_url):
    with session_scope(engine) as s:
        users.add_user(
            s, username="first", role="admin", group_no=None, password="long-enough-pw", actor=users.SYSTEM_ACTOR
        )
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600  # made for the empty chain
    key_file.unlink()
    _key_cache.clear()
    before = _counts(engine)
    with pytest.raises(AuditKeyMissing) as refused, session_scope(engine) as s:
        users.add_user(
            s, username="second", role="admin", group_no=None, password="long-enough-pw", actor=users.SYSTEM_ACTOR
        )
    assert refused.value.key == "errors.audit_key_missing"
    assert _counts(engine) == before and not key_file.exists()
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "users", "add", "third", "--role", "admin", "--password-stdin"],
        input="long-enough-pw\n",
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "audit key file" in lines[0] and "is missing" in lines[0]
    assert _counts(engine) == before and not key_file.exists()


def test_the_default_key_file_is_absolute_beside_the_database(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    relative = Settings(database_url="sqlite:///sub/app.db").audit_key_path()
    assert relative == tmp_path / "sub" / "audit.key" and relative.is_absolute()
    absolute = Settings(database_url=f"sqlite:///{tmp_path / 'elsewhere' / 'x.db'}").audit_key_path()
    assert absolute == tmp_path / "elsewhere" / "audit.key"
    # any other database: the data folder of the directory the process started in, whatever the cwd now
    server = Settings(database_url="postgresql+psycopg://u@localhost/db").audit_key_path()
    assert server == DATA_DIR_AT_START / "audit.key" and server.is_absolute()
    assert Path(os.getcwd()) == tmp_path and tmp_path / "data" != DATA_DIR_AT_START
    chosen = Settings(database_url="sqlite:///sub/app.db", audit_key_file=Path("k/my.key")).audit_key_path()
    assert chosen == tmp_path / "k" / "my.key"
