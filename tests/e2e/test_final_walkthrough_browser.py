"""A new model's calibration sample on its way to final gold, replayed in the browser at 1440×900 (docs/REFERENCE.md
§4): group 1 labels the sample, then group 2, then both groups check, then the disagreements are adjudicated.
The labels are written between page visits as tests/analysis/test_final_walkthrough.py writes them; at each step
the admin opens the New model page (admin-new-model), which shows no calibrated score before the sample is final
and says what the sample waits for, and a snapshot frozen at that step ranks no model below the ranking minimum.
Screenshots: tests/artifacts/screenshots/final-walkthrough-<step>.png.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest
from playwright.sync_api import expect
from sqlmodel import Session, select

from analysis import leaderboard
from analysis.model_pipeline import MIN_LABELED
from db.rules.enums import NO_GROUP, Stage
from db.rules.gold import DEFAULT_MIN_RESPONSES
from db.store.engine import make_engine
from db.store.models import LeaderboardSnapshot, User
from db.work.leaderboard import freeze_snapshot
from tests.analysis.test_final_walkthrough import NEW, OLD, SAMPLE, K, _add, _world
from tests.e2e.conftest import (
    ACTION_TIMEOUT_MS,
    Account,
    login,
    open_app,
    screenshot,
    served_app,
    text,
)
from tests.support.factories import DEFAULT_PASSWORD, make_user

pytestmark = pytest.mark.browser

ADMIN = "walk-admin"
#: A calibrated score as the page writes it (31.5%).
PERCENT = re.compile(r"^\d+(\.\d)?%$")
#: Criteria per rubric: more than the page's k (CACS@10), so the sampled responses' scores can differ.
CRITERIA = 14


@pytest.fixture(scope="module")
def walkthrough(chromium_path, sqlite_template, tmp_path_factory):
    """The app on its own database: two established models, final on every case, and a new model whose
    calibration sample nobody has labeled yet."""
    folder = tmp_path_factory.mktemp("e2e-final-walkthrough")
    path = folder / "studio.db"
    shutil.copyfile(sqlite_template, path)
    database_url = f"sqlite:///{path}"
    engine = make_engine(database_url)
    users, responses, versions = _world(engine, CRITERIA)
    with Session(engine) as session:
        make_user(session, ADMIN, "admin")
        session.commit()
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONUNBUFFERED": "1"}
    env.pop("STREAMLIT_SERVER_PORT", None)
    try:
        with served_app(folder, env, database_url) as server:
            yield server, engine, users, responses, versions
    finally:
        engine.dispose()


def _freeze(engine, name: str) -> dict:
    """Freezes a snapshot of the database as it is now (as the admin) and returns the payload stored."""
    with Session(engine) as session:
        admin = session.exec(select(User).where(User.username == ADMIN)).one()
        freeze_snapshot(session, actor=admin, name=name, payload=leaderboard.build_payload(engine, k=K))
        session.commit()
    with Session(engine) as session:
        return session.exec(select(LeaderboardSnapshot).where(LeaderboardSnapshot.name == name)).one().payload


def _ranks_none_below_the_minimum(payload: dict) -> None:
    assert payload["gold_basis"] == "final" and payload["min_responses"] == DEFAULT_MIN_RESPONSES
    by_model = {row["model"]: row for row in payload["models"]}
    for row in payload["models"]:
        assert row["ranked"] == (row["n_responses"] >= DEFAULT_MIN_RESPONSES), row
        if not row["ranked"]:
            assert row["tier"] is None, row
    assert {model for model, row in by_model.items() if row["ranked"]} == set(OLD)
    if NEW in by_model:
        assert by_model[NEW]["n_responses"] <= SAMPLE


def _stages(waiting_labels: int, waiting_checks: int, waiting_adjudication: int, final: int) -> str:
    return text(
        "gold_basis.sample.stages",
        waiting_labels=waiting_labels,
        waiting_checks=waiting_checks,
        waiting_adjudication=waiting_adjudication,
        final=final,
    )


def _metric(page, label: str):
    """The value shown under a metric's label on the page."""
    return (
        page.get_by_test_id("stMetric").filter(has=page.get_by_text(label, exact=True)).get_by_test_id("stMetricValue")
    )


def _visit(page, server, step: str, *, final: int, provisional: int, stages: str, calibrated: bool) -> None:
    open_app(page, server, "admin-new-model")
    # The page opens on the newest model: the one whose answers arrived last.
    expect(page.get_by_role("combobox", name=text("new_model.pick"), exact=True)).to_have_value(NEW)
    expect(page.get_by_text(stages, exact=True)).to_be_visible(timeout=ACTION_TIMEOUT_MS)
    # The app scrolls inside its main frame: bring the sample and the score to the top of the window first.
    page.get_by_role("heading", name=text("new_model.sample.title")).evaluate("node => node.scrollIntoView()")
    screenshot(page, f"final-walkthrough-{step}")
    expect(_metric(page, text("new_model.sample.drawn"))).to_have_text(str(SAMPLE))
    expect(_metric(page, text("gold_basis.sample.final"))).to_have_text(str(final))
    expect(_metric(page, text("gold_basis.sample.provisional"))).to_have_text(str(provisional))
    expect(page.get_by_text(text("gold_basis.sample.progress", done=final, n=SAMPLE))).to_be_visible()
    note = page.get_by_text(text("gold_basis.sample.provisional_note", n=provisional), exact=True)
    if provisional:
        expect(note).to_be_visible()
    else:
        expect(note).to_have_count(0)
    why = text("new_model.missing.too_few_labeled", labeled=final, need=MIN_LABELED)
    # Every "why no calibrated score" message opens with the same words.
    no_score_yet = text("new_model.missing.no_sample").split("：")[0]
    estimate = page.get_by_test_id("stMetric").filter(has=page.get_by_text(text("new_model.score.estimate")))
    if calibrated:
        expect(estimate).to_have_count(1)
        expect(estimate.get_by_test_id("stMetricValue")).to_have_text(PERCENT)
        expect(page.get_by_text(no_score_yet)).to_have_count(0)
    else:
        # The why, with how many sampled responses are final so far; and no score, interval or table.
        expect(page.get_by_text(why, exact=True)).to_be_visible()
        expect(estimate).to_have_count(0)


def test_the_new_model_page_and_snapshots_follow_the_sample_to_final_gold(browser, walkthrough):
    server, engine, users, responses, versions = walkthrough
    sample = [(responses[NEW, number], number) for number in range(1, SAMPLE + 1)]
    # Gold that differs between the sampled responses, so their scores vary and the estimate is finite.
    truth = {response_id: [i <= 9 + number % 5 for i in range(1, CRITERIA + 1)] for response_id, number in sample}
    disputed = {sample[0][0], sample[1][0]}

    def rows(stage, group, user, flip=()):
        return [
            (
                response_id,
                f"c{i:02d}",
                stage,
                group,
                truth[response_id][i - 1] ^ (response_id in flip and i == 1),
                users[user],
                versions[number],
            )
            for response_id, number in sample
            for i in range(1, CRITERIA + 1)
        ]

    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN", timezone_id="Asia/Shanghai")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    try:
        page = context.new_page()
        login(page, server, Account(ADMIN, "admin", None, ADMIN, DEFAULT_PASSWORD))

        # 0. The sample is drawn, nobody has labeled it.
        _visit(page, server, "0-drawn", final=0, provisional=0, stages=_stages(SAMPLE, 0, 0, 0), calibrated=False)
        _ranks_none_below_the_minimum(_freeze(engine, "step-0"))

        # 1. Group 1 labels the whole sample: single-group gold, provisional, still waiting for group 2's labels.
        _add(engine, rows(Stage.annotation, 1, "a1"))
        _visit(page, server, "1-group1", final=0, provisional=SAMPLE, stages=_stages(SAMPLE, 0, 0, 0), calibrated=False)
        _ranks_none_below_the_minimum(_freeze(engine, "step-1"))

        # 2. Group 2 labels it, disagreeing on two responses (which then have no gold at all).
        _add(engine, rows(Stage.annotation, 2, "a2", flip=disputed))
        _visit(
            page,
            server,
            "2-group2",
            final=0,
            provisional=SAMPLE - len(disputed),
            stages=_stages(0, SAMPLE, 0, 0),
            calibrated=False,
        )
        _ranks_none_below_the_minimum(_freeze(engine, "step-2"))

        # 3. Both groups check: the agreed responses are final, the two disputed wait for adjudication.
        _add(engine, rows(Stage.check, 1, "c1") + rows(Stage.check, 2, "c2", flip=disputed))
        final = SAMPLE - len(disputed)
        _visit(
            page,
            server,
            "3-checked",
            final=final,
            provisional=0,
            stages=_stages(0, 0, len(disputed), final),
            calibrated=False,
        )
        _ranks_none_below_the_minimum(_freeze(engine, "step-3"))

        # 4. The disagreements are adjudicated: the whole sample is final and the calibrated score appears,
        # while the model, with fewer final responses than the ranking minimum, is still not ranked.
        _add(
            engine,
            [
                (response_id, "c01", Stage.adjudication, NO_GROUP, truth[response_id][0], users["adj"], versions[at])
                for response_id, at in sample
                if response_id in disputed
            ],
        )
        _visit(page, server, "4-final", final=SAMPLE, provisional=0, stages=_stages(0, 0, 0, SAMPLE), calibrated=True)
        payload = _freeze(engine, "step-4")
        _ranks_none_below_the_minimum(payload)
        row = next(row for row in payload["models"] if row["model"] == NEW)
        assert (row["n_responses"], row["ranked"], row["tier"]) == (SAMPLE, False, None)
    finally:
        context.close()
