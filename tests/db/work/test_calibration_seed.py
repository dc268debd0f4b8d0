"""Calibration draws cannot be shopped: without `--seed` the server draws the seed (recorded in the draw's
audit entry), a seed given is audited as given, and a second draw is refused either way (DESIGN §3.7)."""

from __future__ import annotations

import random

import pytest
from sqlmodel import col, select

from cli.main import main
from db.rules.errors import ValidationFailed
from db.store.engine import get_engine, session_scope
from db.store.models import AuditLog, CalibrationSample, Case, Response, RubricVersion
from db.work import calibration
from db.work.calibration import draw_calibration_sample
from tests.db.work.test_calibration import MODEL, _admin, calibration_db  # noqa: F401  (a fixture)


def _eligible(session) -> list[tuple[int, int]]:
    """(response id, case pk) of the model's responses on cases with an approved rubric, read literally."""
    approved = set(session.exec(select(RubricVersion.case_pk).where(RubricVersion.status == "approved")).all())
    rows = session.exec(select(Response.id, Response.case_pk).where(Response.model == MODEL).order_by(Response.id))
    return [(response_id, case_pk) for response_id, case_pk in rows if case_pk in approved]


def _entry(session) -> dict:
    return session.exec(select(AuditLog.after).where(AuditLog.entity == "calibration_sample")).one()


def test_without_a_seed_the_server_draws_one_and_records_it(calibration_db, monkeypatch):  # noqa: F811
    drawn = []

    def server_seed(limit: int) -> int:
        drawn.append(limit)
        return 918_273

    monkeypatch.setattr(calibration.secrets, "randbelow", server_seed)
    with session_scope(calibration_db) as session:
        draw = draw_calibration_sample(session, actor=_admin(session), model=MODEL, n=7)
    assert drawn == [2**31] and draw.seed == 918_273
    with session_scope(calibration_db, read_only=True) as session:
        expected = sorted(response_id for response_id, _ in random.Random(918_273).sample(_eligible(session), 7))
        assert draw.response_ids == expected
        entry = _entry(session)
        assert (entry["seed"], entry["seed_source"], entry["n"]) == (918_273, "server", 7)
        assert set(session.exec(select(CalibrationSample.seed)).all()) == {918_273}
        codes = session.exec(select(Response.code).where(col(Response.id).in_(expected))).all()
        assert sorted(entry["responses"]) == sorted(codes)


def test_a_given_seed_is_audited_as_given_and_a_second_draw_is_refused_either_way(calibration_db):  # noqa: F811
    with session_scope(calibration_db) as session:
        draw_calibration_sample(session, actor=_admin(session), model=MODEL, n=5, seed=4)
    for seed in (None, 4, 5):
        with session_scope(calibration_db) as session, pytest.raises(ValidationFailed, match="already has"):
            draw_calibration_sample(session, actor=_admin(session), model=MODEL, n=5, seed=seed)
    with session_scope(calibration_db, read_only=True) as session:
        entry = _entry(session)
        assert (entry["seed"], entry["seed_source"]) == (4, "given")
        assert len(session.exec(select(CalibrationSample)).all()) == 5


@pytest.mark.parametrize("seed", [-1, 2**31, True, 1.5])
def test_a_seed_out_of_range_is_refused_and_nothing_drawn(calibration_db, seed):  # noqa: F811
    with session_scope(calibration_db) as session, pytest.raises(ValidationFailed, match="--seed must be"):
        draw_calibration_sample(session, actor=_admin(session), model=MODEL, n=5, seed=seed)
    with session_scope(calibration_db, read_only=True) as session:
        assert session.exec(select(CalibrationSample)).all() == []


def test_the_command_line_without_seed_lets_the_server_draw(calibration_db, database_url, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()
    try:
        assert main(["assign", "calibration", "--model", MODEL, "--n", "6"]) == 0
        out = capsys.readouterr().out
        assert main(["assign", "calibration", "--model", MODEL, "--n", "6", "--seed", "1"]) == 1
        assert "already has a calibration sample" in capsys.readouterr().err
    finally:
        get_engine.cache_clear()
    with session_scope(calibration_db, read_only=True) as session:
        entry = _entry(session)
        assert entry["seed_source"] == "server" and 0 <= entry["seed"] < 2**31
        assert f"(seed {entry['seed']})" in out
        assert session.exec(select(Case.id)).first() is not None
