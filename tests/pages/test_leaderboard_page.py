"""The admin's leaderboard page (admin-leaderboard) through AppTest: freeze, list, read, compare."""

from __future__ import annotations

import json

import pytest
from sqlmodel import func, select

from admin.leaderboard import diff_frame, snapshot_frame
from analysis import leaderboard
from db.store.engine import session_scope
from db.store.models import LeaderboardSnapshot
from i18n import translate
from tests.support.apptest_helpers import app_database, button, open_page, signed_in, texts  # noqa: F401
from tests.support.factories import make_case, make_label, make_response, make_user


@pytest.fixture
def scored(app_database):  # noqa: F811
    """Four cases (N = 3) with two models labeled and checked by both groups alike (final gold); the first
    model meets more criteria."""
    with session_scope(app_database) as session:
        make_user(session, "boss", "admin")
        make_user(session, "anno", "annotator", 1)
        g1, g2 = make_user(session, "g1", "annotator", 1), make_user(session, "g2", "annotator", 2)
        c1, c2 = make_user(session, "c1", "checker", 1), make_user(session, "c2", "checker", 2)
        for number in range(1, 5):
            case = make_case(session, f"CC-{number:04d}", n=3)
            for model, met in (("model-strong", [1, 1, number % 2]), ("model-weak", [number % 3 == 0, 0, 0])):
                response = make_response(session, case, model, f"{model}{number}")
                for position, value in enumerate(met, start=1):
                    for user in (g1, g2):
                        make_label(session, response, f"c{position:02d}", bool(value), user)
                    for checker in (c1, c2):
                        make_label(session, response, f"c{position:02d}", bool(value), checker, stage="check")
    return app_database


def _freeze(app, name: str, lang: str):
    app.text_input(key="leaderboard_name").set_value(name)
    app.number_input(key="leaderboard_k").set_value(1)
    return button(app, translate("leaderboard.freeze.button", lang)).click().run()


def _count(engine) -> int:
    with session_scope(engine, read_only=True) as session:
        return session.exec(select(func.count()).select_from(LeaderboardSnapshot)).one()


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_an_admin_freezes_reads_and_compares_snapshots(scored, lang):
    app = open_page(signed_in(scored, "boss", lang=lang), "admin-leaderboard")
    assert not app.exception and app.title[0].value == translate("leaderboard.title", lang)
    assert translate("leaderboard.none", lang) in texts(app)

    app = _freeze(app, "2026-q1", lang)
    assert not app.exception and not app.error, [e.value for e in app.error]
    assert translate("leaderboard.freeze.done", lang, name="2026-q1", n=2) in texts(app)
    assert _count(scored) == 1
    shown = app.dataframe[-1].value  # no calibrated scores here: the snapshot table is the last
    assert list(shown["model"]) == ["model-strong", "model-weak"]
    # Final gold, four responses each: listed, best first, but not ranked below the minimum of 20.
    assert translate("gold_basis.snapshot.final", lang, m=20) in texts(app)
    assert list(shown[translate("leaderboard.col.tier", lang)]) == [translate("gold_basis.not_ranked", lang, m=20)] * 2

    # A taken name is refused on the page and nothing is stored.
    app = _freeze(app, "2026-q1", lang)
    assert app.error and _count(scored) == 1

    app = _freeze(app, "2026-q2", lang)
    assert _count(scored) == 2
    assert translate("leaderboard.diff", lang) in texts(app)
    assert translate("leaderboard.diff.caption", lang, moved=0, total=2) in texts(app)


def test_other_roles_have_no_leaderboard_page(scored):
    app = open_page(signed_in(scored, "anno"), "admin-leaderboard")
    assert translate("leaderboard.title", "zh") not in texts(app)


def test_the_tables_read_the_stored_payload():
    before = {"name": "a", "payload": {"models": [_row("x", 0.5, 1), _row("y", 0.4, 1)]}}
    after = {"name": "b", "payload": {"models": [_row("y", 0.7, 1, low=0.6), _row("x", 0.5, 2)]}}
    frame = snapshot_frame(after["payload"])
    assert list(frame["rank"]) == [1, 2] and list(frame["model"]) == ["y", "x"] and list(frame["tier"]) == [1, 2]
    changes = diff_frame(leaderboard.diff(before, after))
    y = changes[changes["model"] == "y"].iloc[0]
    assert (y["rank_before"], y["rank_after"]) == (2, 1)
    assert y["change_points"] == pytest.approx(30.0)
    assert bool(y["beyond_intervals"]) is True  # [0.35, 0.45] against [0.6, 0.8]


def _row(model: str, cacs: float, tier: int, low: float | None = None) -> dict:
    low = cacs - 0.05 if low is None else low
    return {
        "model": model,
        "cacs_at_k": cacs,
        "ci_low": low,
        "ci_high": cacs + 0.1 if low > cacs - 0.05 else cacs + 0.05,
        "tier": tier,
    }


def test_after_a_new_freeze_the_page_compares_the_newest_pair_in_one_format(scored):
    app = open_page(signed_in(scored, "boss", lang="zh"), "admin-leaderboard")
    for name in ("2026-q1", "2026-q2"):
        app = _freeze(app, name, "zh")
    assert [box.value for box in app.selectbox][-2:] == ["2026-q1", "2026-q2"]
    app = _freeze(app, "2026-q3", "zh")
    assert not app.exception
    # The snapshot shown and the comparison follow the newest freeze, not the pair picked before it.
    assert [box.value for box in app.selectbox] == ["2026-q3", "2026-q2", "2026-q3"]
    # Both tables show CACS as percentages with one decimal; the change is in points with one decimal.
    shown, compared = (json.loads(table.proto.columns) for table in app.dataframe[-2:])
    assert shown["cacs_at_k"]["type_config"]["format"] == "percent"
    for column in ("cacs_before", "cacs_after"):
        assert compared[translate(f"leaderboard.col.{column}", "zh")]["type_config"]["format"] == "percent"
    assert compared[translate("leaderboard.col.change_points", "zh")]["type_config"]["format"] == "%+.1f"
