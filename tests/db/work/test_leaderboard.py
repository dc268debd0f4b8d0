"""Leaderboard snapshots: `leaderboard freeze|list|show|diff` and `export leaderboard`, on both databases."""

from __future__ import annotations

import hashlib
import json
import stat

import pytest
from sqlmodel import func, select

from analysis import leaderboard
from cli.main import main
from db.store.engine import get_engine, session_scope
from db.store.models import AuditLog, LeaderboardSnapshot
from db.work.leaderboard import payload_hash
from tests.support.factories import make_case, make_label, make_response, make_user

MODELS = ("<b>strong</b>", "weak")


@pytest.fixture
def scored_db(engine, database_url, session, monkeypatch):
    """Six cases (N = 3), two models fully labeled by both groups (the first meets more), the CLI on it."""
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
    yield engine
    get_engine.cache_clear()


#: The fixture's labels are unchecked annotations: the provisional basis reads them, every model ranked.
AS_WRITTEN = ["--gold", "provisional", "--min-responses", "1"]


def test_freeze_list_show_diff_and_export(scored_db, tmp_path, capsys):
    assert main(["leaderboard", "freeze", "2026-q1", "--k", "1", *AS_WRITTEN]) == 0
    assert "froze leaderboard 2026-q1 (2 models, 2 ranked; gold basis provisional" in capsys.readouterr().out
    assert main(["leaderboard", "freeze", "2026-q1"]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "already exists" in error
    with session_scope(scored_db, read_only=True) as session:
        stored = session.exec(select(LeaderboardSnapshot)).one()
        entry = session.exec(select(AuditLog).where(AuditLog.entity == "leaderboard_snapshot")).one()
    payload = stored.payload
    assert entry.after["payload_sha256"] == payload_hash(payload) and entry.entity_key == "2026-q1"
    assert [row["model"] for row in payload["models"]] == list(MODELS)
    assert payload["models"][0]["tier"] == 1 and {"ci_low", "ci_high", "cacs_at_k"} <= set(payload["models"][0])
    assert (
        payload["audit_head"]["count"] == 0 and len(payload["rubric_versions_sha256"]) == 64
    )  # factories audit nothing
    assert payload["data_version"]["label_id"] and payload["k"] == 1

    assert main(["leaderboard", "freeze", "2026-q2", "--k", "2", *AS_WRITTEN]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in listed] == ["2026-q1", "2026-q2"]
    assert main(["leaderboard", "show", "2026-q2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["payload"]["audit_head"]["count"] == 1  # the first freeze
    assert main(["leaderboard", "show", "2026-q1"]) == 0
    assert "tier 1" in capsys.readouterr().out
    assert main(["leaderboard", "diff", "2026-q1", "2026-q2", "--json"]) == 0
    changes = json.loads(capsys.readouterr().out)
    assert changes["from"] == "2026-q1" and [row["model"] for row in changes["models"]] == list(MODELS)
    assert main(["leaderboard", "show", "missing"]) == 1
    assert "no leaderboard snapshot named 'missing'" in capsys.readouterr().err

    out = tmp_path / "site"
    assert main(["export", "leaderboard", str(out)]) == 0
    printed = capsys.readouterr().out
    written = json.loads((out / "leaderboard.json").read_text(encoding="utf-8"))
    assert written["name"] == "2026-q2"  # the newest
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "&lt;b&gt;strong&lt;/b&gt;" in page and "<b>strong</b>" not in page
    for name in ("leaderboard.json", "index.html"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600
        assert f"{name}  sha256 {hashlib.sha256((out / name).read_bytes()).hexdigest()}" in printed


def test_export_without_a_snapshot_says_so(scored_db, tmp_path, capsys):
    assert main(["export", "leaderboard", str(tmp_path / "x")]) == 1
    assert "no leaderboard snapshot yet" in capsys.readouterr().err
    with session_scope(scored_db, read_only=True) as session:
        assert session.exec(select(func.count()).select_from(LeaderboardSnapshot)).one() == 0


def _snapshot(name: str, rows: list[tuple]) -> dict:
    models = [
        {"model": m, "cacs_at_k": c, "ci_low": lo, "ci_high": hi, "tier": t, "rubric_accuracy": c, "n_responses": 5}
        for m, c, lo, hi, t in rows
    ]
    return {"name": name, "created_at": "t", "created_by": "x", "payload": {"models": models}}


def test_diff_says_who_moved_and_whether_beyond_the_intervals():
    before = _snapshot("a", [("m1", 0.6, 0.5, 0.7, 1), ("m2", 0.4, 0.3, 0.5, 2), ("m3", 0.2, 0.1, 0.3, 2)])
    after = _snapshot("b", [("m2", 0.8, 0.75, 0.85, 1), ("m1", 0.62, 0.52, 0.72, 1), ("m4", 0.1, None, None, 2)])
    changes = leaderboard.diff(before, after)
    by_model = {row["model"]: row for row in changes["models"]}
    assert [row["model"] for row in changes["models"]] == ["m2", "m1"]
    assert by_model["m2"]["rank"] == [2, 1] and by_model["m2"]["beyond_intervals"] is True
    assert by_model["m2"]["change"] == pytest.approx(0.4)
    assert by_model["m1"]["moved"] and by_model["m1"]["beyond_intervals"] is False
    assert changes["added"] == ["m4"] and changes["removed"] == ["m3"]
    text = leaderboard.diff_text(changes)
    assert "m2: rank 2 → 1" in text and "beyond the intervals" in text and "new: m4" in text
    assert leaderboard.diff_text(leaderboard.diff(before, before)).endswith("no model moved")


def test_a_snapshot_records_its_basis_minimum_and_the_responses_it_stood_on(scored_db, capsys):
    # Unchecked labels: under the final basis no response is final, so nobody is scored, let alone ranked.
    assert main(["leaderboard", "freeze", "final-now", "--k", "1"]) == 0
    assert "0 models, 0 ranked; gold basis final, ranked with at least 20" in capsys.readouterr().out
    assert main(["leaderboard", "freeze", "thin", "--k", "1", "--gold", "provisional", "--min-responses", "7"]) == 0
    capsys.readouterr()
    with session_scope(scored_db, read_only=True) as session:
        payloads = {row.name: row.payload for row in session.exec(select(LeaderboardSnapshot))}
    assert payloads["final-now"]["gold_basis"] == "final" and payloads["final-now"]["models"] == []
    thin = payloads["thin"]
    assert thin["gold_basis"] == "provisional" and thin["min_responses"] == 7
    for row in thin["models"]:  # six responses each, fewer than seven: listed, never ranked
        assert row["ranked"] is False and row["tier"] is None and row["n_responses"] == 6
        assert len(row["response_ids"]) == 6 and row["response_ids"] == sorted(row["response_ids"])
        digest = hashlib.sha256(json.dumps(row["response_ids"], separators=(",", ":")).encode()).hexdigest()
        assert row["responses_sha256"] == digest
    assert main(["leaderboard", "show", "thin"]) == 0
    assert "not ranked: n = 6" in capsys.readouterr().out


@pytest.mark.parametrize(
    "options, message",
    [
        (["--gold", "checked"], "--gold must be final or provisional, got 'checked'"),
        (["--min-responses", "0"], "--min-responses must be a whole number of at least 1, got 0"),
        (["--min-responses", "many"], "--min-responses must be a whole number of at least 1, got 'many'"),
    ],
)
def test_bad_basis_options_are_one_line_and_freeze_nothing(scored_db, capsys, options, message):
    assert main(["leaderboard", "freeze", "bad", *options]) == 1
    error = capsys.readouterr().err.strip()
    assert error == f"clinconsensus: {message}"
    with session_scope(scored_db, read_only=True) as session:
        assert session.exec(select(func.count()).select_from(LeaderboardSnapshot)).one() == 0


def test_diff_respects_the_minimum_and_counts_responses_joined_and_left():
    def payload(rows, minimum=3):
        models = [
            {
                "model": m,
                "cacs_at_k": c,
                "ci_low": c - 0.05,
                "ci_high": c + 0.05,
                "tier": 1 if ranked else None,
                "ranked": ranked,
                "n_responses": len(ids),
                "response_ids": ids,
                "rubric_accuracy": c,
            }
            for m, c, ranked, ids in rows
        ]
        return {"models": models, "min_responses": minimum, "gold_basis": "final"}

    before = {"name": "a", "payload": payload([("m1", 0.5, True, [1, 2, 3, 4]), ("new", 0.238, False, [9])])}
    after = {"name": "b", "payload": payload([("m1", 0.52, True, [2, 3, 4, 5, 6]), ("new", 0.305, True, [9, 10, 11])])}
    changes = leaderboard.diff(before, after)
    by_model = {row["model"]: row for row in changes["models"]}
    assert by_model["m1"]["responses_joined"] == 2 and by_model["m1"]["responses_left"] == 1
    assert by_model["m1"]["beyond_intervals"] is False  # both intervals on at least three responses
    new = by_model["new"]
    assert new["ranked"] == [False, True] and new["rank"] == [None, 2]
    assert new["beyond_intervals"] is None and new["below_minimum"]  # one response before: not judged
    assert new["responses_joined"] == 2 and new["responses_left"] == 0
    text = leaderboard.diff_text(changes)
    line = next(line for line in text.splitlines() if line.strip().startswith("new:"))
    assert "now ranked" in line and "within the interval" not in line and "fewer responses than the ranking" in line
    assert "rank not ranked → 2" in line
