"""Time on task against agreement: the core checked against a literal pandas reading, scipy and scikit-learn;
the loader reads the stored timings; the report's section with and without timings."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import f1_score
from sqlmodel import select

from analysis.figures import html_report
from analysis.grid import prepare
from analysis.loader import load_frames, load_timings
from analysis.report import build_report, report_json, tables, write_json
from analysis.time_agreement import spearman, time_agreement
from db.rules.enums import Stage
from db.store.models import Label, LabelTiming, User
from tests.analysis.test_metrics import make_frames
from tests.analysis.test_report import populate_small_database
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)

# These tests read §4 as written (their labels are mostly unchecked): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")

A, C = Stage.annotation, Stage.check
USERS = pd.DataFrame(
    {
        "user_id": [1, 2, 3, 4, 5],
        "username": ["ann-a", "ann-b", "ann-c", "ann-d", "chk-a"],
        "role": ["annotator"] * 4 + ["checker"],
        "group_no": [1, 1, 2, 2, 1],
    }
)


def random_frames(seed: int = 7):
    """Five cases (N = 6, one N = 5) × 3 models; annotators 1, 2 (group 1) and 3, 4 (group 2), checker 5 in group 1;
    labels on a criterion outside the rubric; a response only group 1 labelled; distinct active times."""
    rng = np.random.default_rng(seed)
    cases = [{"case_pk": pk, "n": 5 if pk == 3 else 6} for pk in range(1, 6)]
    responses, labels, timings = [], [], []
    response_id = 0
    for case in cases:
        for model in ("m1", "m2", "m3"):
            response_id += 1
            responses.append((response_id, case["case_pk"], model, 100))
            u1, u2 = int(rng.choice([1, 2])), int(rng.choice([3, 4]))
            only_group1 = response_id == 7
            for i in range(1, case["n"] + 2):  # one criterion beyond the rubric: never counted
                first = bool(rng.random() < 0.6)
                second = first if rng.random() < 0.75 else not first
                labels.append((response_id, f"c{i}", A, 1, first, u1))
                if not only_group1:
                    labels.append((response_id, f"c{i}", A, 2, second, u2))
                if rng.random() < 0.2:
                    labels.append((response_id, f"c{i}", C, 1, not first, 5))
            for user in (u1,) if only_group1 else (u1, u2):
                for _ in range(int(rng.integers(1, 3))):
                    timings.append((user, response_id, "annotation", int(rng.integers(2_000, 400_000)), case["n"]))
            timings.append((5, response_id, "check", 999_999, case["n"]))  # not an annotation: ignored
    frames = make_frames(cases, responses, labels)
    frames.users = USERS
    frames.timings = pd.DataFrame(timings, columns=["user_id", "response_id", "stage", "active_ms", "n_criteria"])
    return frames


def literal(frames) -> pd.DataFrame:
    """The definition read literally: per (annotator, response) with annotation timings, seconds per criterion and
    the annotator's labels against the other group's final labels (check, else annotation) on current criteria."""
    current = frames.responses[["response_id", "case_pk"]].merge(frames.criteria[["case_pk", "criterion_id"]])
    labels = frames.labels.merge(current, on=["response_id", "criterion_id"])
    group_of = dict(zip(frames.users["user_id"], frames.users["group_no"]))
    timed = frames.timings[frames.timings["stage"] == "annotation"]
    rows = []
    for (user, response), part in timed.groupby(["user_id", "response_id"]):
        group = group_of[user]
        other = 3 - group
        own = labels[
            (labels["stage"] == "annotation")
            & (labels["user_id"] == user)
            & (labels["response_id"] == response)
            & (labels["group_no"] == group)
        ]
        theirs = labels[(labels["response_id"] == response) & (labels["group_no"] == other)]
        final = {}
        for row in theirs[theirs["stage"] == "annotation"].itertuples():
            final[row.criterion_id] = row.met
        for row in theirs[theirs["stage"] == "check"].itertuples():
            final[row.criterion_id] = row.met
        pairs = [(final[row.criterion_id], row.met) for row in own.itertuples() if row.criterion_id in final]
        rows.append(
            {
                "user_id": user,
                "group": group,
                "response_id": response,
                "seconds_per_criterion": part["active_ms"].sum() / 1000 / part["n_criteria"].max(),
                "pairs": pairs,
                "n_decisions": len(pairs),
                "agreement": np.mean([a == b for a, b in pairs]) if pairs else np.nan,
            }
        )
    return pd.DataFrame(rows)


def test_time_agreement_against_a_literal_reading():
    frames = random_frames()
    result = time_agreement(prepare(frames), frames.timings, frames.users)
    expected = literal(frames)
    compared = expected[expected["n_decisions"] > 0].reset_index(drop=True)
    assert result.n_timed == len(expected) and result.n_without_decisions == 1
    got = result.responses.sort_values(["user_id", "response_id"], ignore_index=True)
    assert got["response_id"].tolist() == compared["response_id"].tolist()
    assert got["user_id"].tolist() == compared["user_id"].tolist()
    assert got["n_decisions"].tolist() == compared["n_decisions"].tolist()
    np.testing.assert_allclose(got["seconds_per_criterion"], compared["seconds_per_criterion"])
    np.testing.assert_allclose(got["agreement"], compared["agreement"])
    assert (compared["agreement"] < 1).any() and (compared["agreement"] == 1).any()
    n_of_case = {
        response: 5 if case_pk == 3 else 6 for response, case_pk in frames.responses[["response_id", "case_pk"]].values
    }
    assert all(row.n_decisions == n_of_case[row.response_id] for row in got.itertuples())  # c7 never counted

    # Per annotator: median seconds per criterion, pooled agreement, macro-F1 by scikit-learn.
    for row in result.annotators.itertuples(index=False):
        user = int(USERS.loc[USERS["username"] == row.username, "user_id"].iloc[0])
        mine = compared[compared["user_id"] == user]
        pairs = [pair for pairs in mine["pairs"] for pair in pairs]
        assert row.n_responses == len(mine) and row.n_decisions == len(pairs)
        assert row.median_seconds_per_criterion == pytest.approx(float(np.median(mine["seconds_per_criterion"])))
        assert row.agreement == pytest.approx(np.mean([a == b for a, b in pairs]))
        truth, own = zip(*pairs)
        assert row.pooled_mf1 == pytest.approx(f1_score(list(truth), list(own), average="macro"))
    assert sorted(result.annotators["username"]) == ["ann-a", "ann-b", "ann-c", "ann-d"]

    # Buckets: quartiles as pandas cuts them, pooled agreement per bucket, counts adding up.
    quartile = pd.qcut(compared["seconds_per_criterion"], 4, labels=False)
    assert result.buckets["n_responses"].tolist() == quartile.value_counts().sort_index().tolist()
    for row in result.buckets.itertuples(index=False):
        part = compared[quartile == row.bucket - 1]
        pairs = [pair for pairs in part["pairs"] for pair in pairs]
        assert row.n_decisions == len(pairs)
        assert row.agreement == pytest.approx(np.mean([a == b for a, b in pairs]))
        assert row.low_seconds <= part["seconds_per_criterion"].min() <= part["seconds_per_criterion"].max()
        assert part["seconds_per_criterion"].max() <= row.high_seconds
    assert result.buckets["n_decisions"].sum() == compared["n_decisions"].sum()

    # Spearman with its n, against scipy.
    rho = spearmanr(compared["seconds_per_criterion"], compared["agreement"]).statistic
    assert result.spearman_responses == {"rho": pytest.approx(rho), "n": len(compared)}
    annotators = result.annotators
    rho_annotators = spearmanr(annotators["median_seconds_per_criterion"], annotators["agreement"]).statistic
    assert result.spearman_annotators == {"rho": pytest.approx(rho_annotators), "n": 4}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_spearman_with_ties_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.integers(0, 5, 40), rng.integers(0, 4, 40)
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)
    assert np.isnan(spearman([1.0], [2.0])) and np.isnan(spearman([1, 2, 3], [5, 5, 5]))


def test_no_timings_gives_an_empty_result():
    frames = random_frames()
    for timings in (None, frames.timings.iloc[0:0]):
        result = time_agreement(prepare(frames), timings, frames.users)
        assert not result.has_data and result.n_timed == 0
        assert result.buckets.empty and result.annotators.empty
        assert result.spearman_responses["n"] == 0 and np.isnan(result.spearman_responses["rho"])


# Loader and report, on both databases ----------------------------------------------------------


def _add_timings(session) -> list[tuple[str, int, int]]:
    """One timing per annotation of the small database: (username, response id, active ms)."""
    rows = session.exec(
        select(Label.user_id, Label.response_id, User.username)
        .join(User, User.id == Label.user_id)
        .where(Label.stage == Stage.annotation)
        .distinct()
    ).all()
    added = []
    for index, (user_id, response_id, username) in enumerate(sorted(rows)):
        active_ms = 1_500 + 4_000 * index
        session.add(
            LabelTiming(user_id=user_id, response_id=response_id, stage="annotation", active_ms=active_ms, n_criteria=3)
        )
        added.append((username, response_id, active_ms))
    session.commit()
    return added


def test_loader_reads_timings_and_the_report_relates_them(engine, session, tmp_path):
    populate_small_database(session)
    added = _add_timings(session)
    timings = load_timings(engine)
    assert len(timings) == len(added) == 8
    assert sorted(timings["active_ms"].tolist()) == sorted(ms for _, _, ms in added)
    assert set(timings["stage"]) == {"annotation"} and set(timings["n_criteria"]) == {3}

    report = build_report(load_frames(engine), k=2, resamples=0)
    section = report_json(report)["time_agreement"]
    assert section["n_timed_responses"] == 8 and section["n_responses"] == 8
    assert section["spearman_responses"]["n"] == 8 and section["spearman_annotators"]["n"] == 2
    assert sum(bucket["n_responses"] for bucket in section["buckets"]) == 8
    # ann-1's own annotations against group 2's finals: only 1b c02 differs (the check on 2a c03 changed group
    # 1's final, not ann-1's label): 11 of 12. ann-2 against group 1's finals: 1b c02 and 2a c03 differ: 10 of 12.
    assert section["annotators"]["ann-1"]["agreement"] == pytest.approx(11 / 12)
    assert section["annotators"]["ann-2"]["agreement"] == pytest.approx(10 / 12)
    assert section["annotators"]["ann-1"]["n_decisions"] == 12
    write_json(report, tmp_path / "report.json")
    assert "time_agreement" in json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert {"time_by_annotator", "time_buckets"} <= set(tables(report))

    page = html_report(report, tables(report), lang="en")
    assert "Time on task and agreement" in page and "No timings" not in page
    assert "91.7%" in page and "83.3%" in page  # 11/12 and 10/12 as percentages with one decimal
    assert "n = 8" in page and "Per annotator" in page and "By time bucket" in page
    assert "用时与一致性" in html_report(report, tables(report), lang="zh")


def test_report_without_timings_says_so(engine, session):
    populate_small_database(session)
    report = build_report(load_frames(engine), k=2, resamples=0)
    assert report_json(report)["time_agreement"]["n_responses"] == 0
    page = html_report(report, tables(report), lang="en")
    assert "Time on task and agreement" in page
    assert "No timings: no annotation save carries its active time yet" in page
    assert "Per annotator" not in page and "nan" not in page.split('id="time-agreement"')[1].split("<script")[0]
