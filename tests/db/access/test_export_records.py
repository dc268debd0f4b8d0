"""An SFT export leaves its held-out models in the audit log for the judge pages; nothing else moves."""

from __future__ import annotations

import pytest

from cli.main import main
from db.access.audit import verify_chain
from db.access.export_records import newest_sft_holdout, record_export
from db.store.data_version import data_version
from db.store.engine import get_engine, session_scope
from tests.support.factories import make_case, make_label, make_response, make_user


@pytest.fixture
def labeled(engine, database_url, session, monkeypatch):
    """Four cases (N = 3) answered by three models, labeled alike by both groups (every decision has gold)."""
    g1, g2 = make_user(session, "g1", "annotator", 1), make_user(session, "g2", "annotator", 2)
    for number in range(1, 5):
        case = make_case(session, f"CC-{number:04d}", n=3)
        for model in ("alpha", "beta", "gamma"):
            response = make_response(session, case, model, f"{model} {number}")
            for position in range(1, 4):
                for user in (g1, g2):
                    make_label(session, response, f"c{position:02d}", (number + position) % 2 == 0, user)
    session.commit()
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()
    yield engine
    get_engine.cache_clear()


def test_the_newest_sft_export_names_the_heldout_models(labeled, tmp_path, capsys):
    with session_scope(labeled, read_only=True) as session:
        assert newest_sft_holdout(session) == []
    before = data_version(labeled)
    assert main(["export", "sft", str(tmp_path / "first"), "--holdout-models", "gamma"]) == 0
    assert main(["export", "sft", str(tmp_path / "second"), "--holdout-models", "beta,alpha"]) == 0
    capsys.readouterr()
    with session_scope(labeled, read_only=True) as session:
        assert newest_sft_holdout(session) == ["alpha", "beta"]
    # The record changes nothing the analysis reads: the dashboard's grid is not rebuilt for it.
    assert data_version(labeled) == before
    with session_scope(labeled, read_only=True) as session:
        chain = verify_chain(session)
    assert chain.ok and chain.entries == 2


def test_a_refused_export_records_nothing(labeled, tmp_path, capsys):
    assert main(["export", "sft", str(tmp_path / "out"), "--holdout-models", "nobody"]) == 1
    assert "nobody" in capsys.readouterr().err
    with session_scope(labeled) as session:
        assert newest_sft_holdout(session) == []
        record_export(session, actor="boss", kind="gold", details={"holdout_models": ["alpha"]})
    with session_scope(labeled, read_only=True) as session:
        assert newest_sft_holdout(session) == []  # only SFT exports say what a judge was trained without
