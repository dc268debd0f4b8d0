"""A new model's calibration sample on its way to final gold (docs/REFERENCE.md §4), step by step, on both
databases: group 1 labels the sample, then group 2, then both groups check, then the disagreements are
adjudicated. Before the sample is final there is no calibrated score, no rank and no tier for the model;
the new-model figures say at each step what the sample waits for; a snapshot frozen at each step ranks no
model below the ranking minimum.
"""

from __future__ import annotations

import numpy as np
from sqlmodel import Session

from analysis import leaderboard, model_pipeline
from analysis.grid import prepare
from analysis.loader import load_frames
from analysis.report import build_report, report_json
from db import counts
from db.rules.enums import NO_GROUP, Stage
from db.rules.gold import DEFAULT_MIN_RESPONSES
from db.store.current_rubric import current_approved_version
from db.store.models import CalibrationSample, JudgeDecision, Label
from tests.support.factories import make_case, make_response, make_user

N, K, CASES, SAMPLE = 3, 1, 25, 10
OLD, NEW = ("old-a", "old-b"), "new-model"


def _add(engine, rows) -> None:
    with Session(engine) as session:
        for response_id, criterion, stage, group, met, user, version in rows:
            session.add(
                Label(
                    response_id=response_id,
                    criterion_id=criterion,
                    stage=stage,
                    group_no=group,
                    met=met,
                    user_id=user,
                    rubric_version_id=version,
                )
            )
        session.flush()
        counts.refresh(session, sorted({row[0] for row in rows}))
        session.commit()


def _world(engine, n: int = N):
    """Two established models final on every case and a new model with an unlabeled sample; rubrics of `n`."""
    rng = np.random.default_rng(3)
    with Session(engine, expire_on_commit=False) as session:
        users = {
            name: make_user(session, name, role, group).id
            for name, role, group in (
                ("a1", "annotator", 1),
                ("a2", "annotator", 2),
                ("c1", "checker", 1),
                ("c2", "checker", 2),
                ("adj", "checker", 1),
            )
        }
        responses, versions, judged = {}, {}, []
        for number in range(1, CASES + 1):
            case = make_case(session, f"CC-{number:04d}", n=n)
            versions[number] = current_approved_version(session, case.id).id
            for model in (*OLD, NEW):
                response = make_response(session, case, model, f"{model}-{number}")
                responses[model, number] = response.id
                judged += [
                    JudgeDecision(
                        judge="j", response_id=response.id, criterion_id=f"c{i:02d}", met=bool(rng.random() < 0.6)
                    )
                    for i in range(1, n + 1)
                ]
        session.add_all(judged)
        sample = [responses[NEW, number] for number in range(1, SAMPLE + 1)]
        session.add_all(
            [CalibrationSample(model=NEW, response_id=response_id, seed=1, drawn_by="admin") for response_id in sample]
        )
        session.commit()
    # The established models: both groups labeled and checked alike, every response final.
    rows = []
    for model in OLD:
        for number in range(1, CASES + 1):
            for i in range(1, n + 1):
                met = bool(rng.random() < (0.7 if model == OLD[0] else 0.4))
                for stage, group, user in ((Stage.annotation, 1, "a1"), (Stage.annotation, 2, "a2")):
                    rows.append(
                        (responses[model, number], f"c{i:02d}", stage, group, met, users[user], versions[number])
                    )
                for group, user in ((1, "c1"), (2, "c2")):
                    rows.append(
                        (responses[model, number], f"c{i:02d}", Stage.check, group, met, users[user], versions[number])
                    )
    _add(engine, rows)
    return users, responses, versions


def _state(engine):
    frames = load_frames(engine)
    document = report_json(build_report(frames, K, resamples=20))
    figures = model_pipeline.model_figures(prepare(frames), NEW, K)
    payload = leaderboard.build_payload(engine, k=K)
    return document, figures, payload


def _nothing_published(document, figures, payload) -> None:
    row = next((row for row in document["leaderboard"] if row["model"] == NEW), None)
    assert row is None or (row["ranked"] is False and row["tier"] is None)
    entry = figures.calibrated["j"]
    assert entry["cacs_at_k"]["estimate"] is None and entry["cacs_at_k"]["ci_low"] is None
    assert "too_few_labeled" in model_pipeline.what_is_missing(entry, figures.sample)
    assert document["calibrated"]["j"][NEW]["cacs_at_k"]["estimate"] is None
    _snapshot_ranks_none_below_the_minimum(payload)


def _snapshot_ranks_none_below_the_minimum(payload) -> None:
    assert payload["gold_basis"] == "final" and payload["min_responses"] == DEFAULT_MIN_RESPONSES
    for row in payload["models"]:
        assert row["ranked"] == (row["n_responses"] >= DEFAULT_MIN_RESPONSES)
        if not row["ranked"]:
            assert row["tier"] is None
    assert {row["model"] for row in payload["models"] if row["ranked"]} == set(OLD)


def test_no_calibrated_score_rank_or_tier_before_the_sample_is_final(engine):
    users, responses, versions = _world(engine)
    sample = [(responses[NEW, number], number) for number in range(1, SAMPLE + 1)]
    truth = {response_id: [bool(i % 2) for i in range(1, N + 1)] for response_id, _ in sample}

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
            for i in range(1, N + 1)
        ]

    document, figures, payload = _state(engine)
    assert figures.sample.stages == {
        "waiting_labels": SAMPLE,
        "waiting_checks": 0,
        "waiting_adjudication": 0,
        "final": 0,
    }
    _nothing_published(document, figures, payload)

    # 1. Group 1 labels the whole sample: complete (single-group gold) but provisional, nothing final.
    _add(engine, rows(Stage.annotation, 1, "a1"))
    document, figures, payload = _state(engine)
    assert (figures.sample.complete, figures.sample.provisional) == (0, SAMPLE)
    assert figures.sample.stages["waiting_labels"] == SAMPLE
    assert document["pending"]["provisional_responses"] == SAMPLE
    _nothing_published(document, figures, payload)

    # 2. Group 2 labels it, disagreeing with group 1 on two responses.
    disputed = {sample[0][0], sample[1][0]}
    _add(engine, rows(Stage.annotation, 2, "a2", flip=disputed))
    document, figures, payload = _state(engine)
    assert figures.sample.stages["waiting_checks"] == SAMPLE and figures.sample.complete == 0
    assert figures.sample.provisional == SAMPLE - len(disputed)  # the disputed ones have no gold at all
    _nothing_published(document, figures, payload)

    # 3. Both groups check (confirming their labels): agreed responses final, the disputed wait for adjudication.
    _add(engine, rows(Stage.check, 1, "c1") + rows(Stage.check, 2, "c2", flip=disputed))
    document, figures, payload = _state(engine)
    assert figures.sample.stages == {
        "waiting_labels": 0,
        "waiting_checks": 0,
        "waiting_adjudication": len(disputed),
        "final": SAMPLE - len(disputed),
    }
    assert figures.calibrated["j"]["n_labeled"] == SAMPLE - len(disputed)
    assert figures.calibrated["j"]["n_pending"] == len(disputed)
    _nothing_published(document, figures, payload)

    # 4. The disagreements are adjudicated: the whole sample is final and the calibrated score appears.
    adjudications = [
        (response_id, "c01", Stage.adjudication, NO_GROUP, truth[response_id][0], users["adj"], versions[number])
        for response_id, number in sample
        if response_id in disputed
    ]
    _add(engine, adjudications)
    document, figures, payload = _state(engine)
    assert figures.sample.complete == SAMPLE and figures.sample.stages["final"] == SAMPLE
    entry = figures.calibrated["j"]
    assert entry["n_labeled"] == SAMPLE and entry["cacs_at_k"]["estimate"] is not None
    assert model_pipeline.what_is_missing(entry, figures.sample) == []
    # Ten final responses calibrate, but ten are fewer than the ranking minimum: still no rank, no tier.
    row = next(row for row in document["leaderboard"] if row["model"] == NEW)
    assert row["n_responses"] == SAMPLE and row["ranked"] is False and row["tier"] is None
    _snapshot_ranks_none_below_the_minimum(payload)
