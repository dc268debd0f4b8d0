"""A leaderboard snapshot edited in the database is refused on every read, and `export leaderboard`
writes under the rules of every export (no symbolic link, no missing parent, 0600, a manifest)."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest
from sqlalchemy import text

from cli.main import main
from db.access.audit import check_anchor
from db.access.audit_replay import anchor_from_manifest
from db.store.engine import get_engine, session_scope
from db.store.models import LeaderboardSnapshot
from tests.support.factories import make_case, make_label, make_response, make_user

MODELS = ("model-strong", "model-weak")


@pytest.fixture
def frozen(engine, database_url, session, monkeypatch, capsys):
    """Six cases (N = 3), two models labeled by both groups, two snapshots frozen by the command line."""
    g1, g2 = make_user(session, "g1", "annotator", 1), make_user(session, "g2", "annotator", 2)
    for number in range(1, 7):
        case = make_case(session, f"CC-{number:04d}", n=3)
        for model, met in zip(MODELS, ([1, 1, number % 2], [number % 3 == 0, 0, 0])):
            response = make_response(session, case, model, f"{model}{number}")
            for position, value in enumerate(met, start=1):
                for user in (g1, g2):
                    make_label(session, response, f"c{position:02d}", bool(value), user)
    session.commit()
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()
    # The labels carry no checks: the snapshots stand on the provisional basis, every scored model ranked.
    assert main(["leaderboard", "freeze", "q1", "--k", "1", "--gold", "provisional", "--min-responses", "1"]) == 0
    assert main(["leaderboard", "freeze", "q2", "--k", "1", "--gold", "provisional", "--min-responses", "1"]) == 0
    capsys.readouterr()
    yield engine
    get_engine.cache_clear()


def _tamper(engine, name: str) -> None:
    """One model's CACS set to 0.99 by SQL, the rest of the payload as it was."""
    with session_scope(engine) as session:
        snapshot = session.query(LeaderboardSnapshot).filter_by(name=name).one()
        payload = json.loads(json.dumps(snapshot.payload))
        payload["models"][1]["cacs_at_k"] = 0.99
        session.execute(
            text("UPDATE leaderboard_snapshot SET payload = :p WHERE name = :n"),
            {"p": json.dumps(payload), "n": name},
        )


def _one_line_naming(capsys, name: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert f"'{name}'" in lines[0] and "audit" in lines[0]
    assert "99.0" not in captured.out and "0.99" not in captured.out
    return lines[0]


def test_an_edited_snapshot_is_refused_by_show_diff_export_and_list(frozen, tmp_path, capsys):
    assert main(["leaderboard", "show", "q2"]) == 0
    capsys.readouterr()
    _tamper(frozen, "q2")
    assert main(["leaderboard", "show", "q2"]) == 1
    _one_line_naming(capsys, "q2")
    assert main(["leaderboard", "show", "q2", "--json"]) == 1
    _one_line_naming(capsys, "q2")
    assert main(["leaderboard", "diff", "q1", "q2"]) == 1
    _one_line_naming(capsys, "q2")
    out = tmp_path / "site"
    assert main(["export", "leaderboard", str(out)]) == 1
    _one_line_naming(capsys, "q2")
    assert not out.exists() or not any(out.iterdir())
    # The untouched snapshot still reads; the list names the edited one and fails.
    assert main(["leaderboard", "show", "q1"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "list"]) == 1
    captured = capsys.readouterr()
    assert "q1" in captured.out and "q2" not in captured.out and "'q2'" in captured.err


def test_a_renamed_snapshot_or_one_inserted_by_sql_is_refused(frozen, capsys):
    with session_scope(frozen) as session:
        session.execute(text("UPDATE leaderboard_snapshot SET name = 'q9' WHERE name = 'q1'"))
    assert main(["leaderboard", "show", "q9"]) == 1
    _one_line_naming(capsys, "q9")


def test_export_writes_a_manifest_with_the_audit_head_and_private_files(frozen, tmp_path, capsys):
    out = tmp_path / "site"
    assert main(["export", "leaderboard", str(out)]) == 0
    capsys.readouterr()
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["export"] == "leaderboard" and manifest["snapshot"] == "q2"
    assert manifest["audit_head"]["count"] == 2 and len(manifest["audit_head"]["hash"]) == 64
    for name in ("leaderboard.json", "index.html", "manifest.json"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600
    for name in ("leaderboard.json", "index.html"):
        assert manifest["sha256"][name] == hashlib.sha256((out / name).read_bytes()).hexdigest()
    written = json.loads((out / "leaderboard.json").read_text(encoding="utf-8"))
    canonical = json.dumps(written["payload"], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert manifest["payload_sha256"] == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    with session_scope(frozen, read_only=True) as session:
        assert check_anchor(session, anchor_from_manifest(manifest)) is None


@pytest.mark.parametrize("planted", ["index.html", "leaderboard.json", "manifest.json"])
def test_export_refuses_a_link_inside_the_folder_and_writes_nothing(frozen, tmp_path, capsys, planted):
    out = tmp_path / "site"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    os.chmod(victim, 0o644)
    (out / planted).symlink_to(victim)
    dangling = tmp_path / "created-by-export"
    (out / ("index.html" if planted != "index.html" else "leaderboard.json")).symlink_to(dangling)
    assert main(["export", "leaderboard", str(out)]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "symbolic link" in error
    assert victim.read_text(encoding="utf-8") == "keep me" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert not dangling.exists()
    assert sorted(path.name for path in out.iterdir() if not path.is_symlink()) == []


def test_export_refuses_a_linked_folder_and_a_missing_parent(frozen, tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert main(["export", "leaderboard", str(tmp_path / "link")]) == 1
    assert "symbolic link" in capsys.readouterr().err and not any(real.iterdir())
    assert main(["export", "leaderboard", str(tmp_path / "no" / "such" / "dir")]) == 1
    assert "no such folder" in capsys.readouterr().err and not (tmp_path / "no").exists()
