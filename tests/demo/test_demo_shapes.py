"""The small demo shows a finished benchmark beside work in progress, on both databases.

Every figure here is computed from the demo database's tables read with plain SQL into pandas — the current
rubric, the labels that count on it, each group's final label, gold, checked groups, final and provisional
responses written out from docs/REFERENCE.md §4 and §4.1 — never through the product's gold code. The demo's own
plan (plan.json of the same seed) is then compared response by response with what the database holds.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import pandas as pd
import pytest

from db.store.engine import make_engine
from demo import generator as demo
from tests.conftest import new_postgres_url, new_sqlite_url

N = 30
PASSWORD = "demo-Test-pass-42"


@dataclass
class DemoTables:
    cases: pd.DataFrame  # case_pk, case_id, current (version id or NA)
    responses: pd.DataFrame  # one row per response of an approved case, with its figures (see _responses)
    rubric_versions: pd.DataFrame
    assignments: pd.DataFrame
    feedback: pd.DataFrame
    calibration: pd.DataFrame
    plan: dict


def _read(engine, sql: str) -> pd.DataFrame:
    with engine.connect() as connection:
        return pd.read_sql_query(sql, connection)


def _current_versions(versions: pd.DataFrame) -> pd.Series:
    """case_pk → id of its newest approved rubric version."""
    approved = versions[versions["status"] == "approved"].sort_values(["case_pk", "version"])
    return approved.groupby("case_pk")["id"].last()


def _responses(engine, cases: pd.DataFrame) -> pd.DataFrame:
    """Per response of a case with an approved rubric: each group's annotation and check counts on the current
    rubric, adjudications, decisions where the groups' final labels differ with no adjudication, and whether the
    response is complete (every decision has gold) and final (§4.1)."""
    responses = _read(engine, "SELECT id AS response_id, case_pk, model FROM response")
    responses = responses.merge(cases, on="case_pk")
    responses = responses[responses["current"].notna()]
    labels = _read(
        engine, "SELECT response_id, criterion_id, stage, group_no, met, rubric_version_id FROM label"
    ).merge(responses[["response_id", "current"]], on="response_id")
    labels = labels[labels["rubric_version_id"] == labels["current"]]
    labels["met"] = labels["met"].astype(bool)

    grid = responses[["response_id", "case_pk"]].merge(
        _read(engine, "SELECT rubric_version_id AS current, criterion_id FROM criterion").merge(
            cases[["case_pk", "current"]], on="current"
        )[["case_pk", "criterion_id"]],
        on="case_pk",
    )
    for stage, group in (("annotation", 1), ("annotation", 2), ("check", 1), ("check", 2), ("adjudication", 0)):
        rows = labels[(labels["stage"] == stage) & (labels["group_no"] == group)]
        part = rows[["response_id", "criterion_id", "met"]].rename(columns={"met": f"{stage}{group}"})
        grid = grid.merge(part, on=["response_id", "criterion_id"], how="left")
    for g in (1, 2):
        grid[f"final{g}"] = grid[f"check{g}"].combine_first(grid[f"annotation{g}"])
    adjudicated = grid["adjudication0"].notna()
    both = grid["final1"].notna() & grid["final2"].notna()
    differ = both & (grid["final1"] != grid["final2"])
    grid["open"] = differ & ~adjudicated
    grid["has_gold"] = adjudicated | (both & ~differ) | (grid["final1"].notna() ^ grid["final2"].notna())
    per = grid.groupby("response_id").agg(
        annotation1=("annotation1", "count"),
        annotation2=("annotation2", "count"),
        check1=("check1", "count"),
        check2=("check2", "count"),
        adjudications=("adjudication0", "count"),
        open_disagreements=("open", "sum"),
        complete=("has_gold", "all"),
    )
    responses = responses.merge(per, left_on="response_id", right_index=True)
    checked = (responses["check1"] == N) & (responses["check2"] == N)
    # §4.1: every decision adjudicated, or agreed by two checked groups (then nothing is open and both are whole).
    agreed_or_adjudicated = grid.assign(ok=adjudicated | (both & ~differ)).groupby("response_id")["ok"].all()
    responses["final"] = responses["response_id"].map(agreed_or_adjudicated) & (
        checked | (responses["adjudications"] == N)
    )
    responses["finished"] = (
        (responses["annotation1"] == N)
        & (responses["annotation2"] == N)
        & checked
        & (responses["open_disagreements"] == 0)
    )
    return responses


def _state(row) -> str:
    """The plan's name (demo/plan.py) of what the database holds for one response."""
    coverage = ["all" if n == N else "part" if n else "none" for n in (row.annotation1, row.annotation2)]
    checked = (row.check1 == N, row.check2 == N)
    if coverage == ["all", "all"]:
        if all(checked):
            return "final" if row.open_disagreements == 0 else "checked_open"
        return {(True, False): "group1_checked", (False, True): "group2_checked"}.get(checked, "unchecked")
    return {
        ("all", "none"): "group1_only",
        ("none", "all"): "group2_only",
        ("all", "part"): "group2_partial",
        ("part", "all"): "group1_partial",
        ("none", "none"): "unlabeled",
    }[(coverage[0], coverage[1])]


def _build(url: str, tmp_path) -> DemoTables:
    engine = make_engine(url)
    try:
        demo.build_demo(engine, scale="small", seed=7)
        versions = _read(engine, "SELECT id, case_pk, version, status FROM rubric_version")
        cases = _read(engine, 'SELECT id AS case_pk, case_id FROM "case"')
        cases["current"] = cases["case_pk"].map(_current_versions(versions))
        return DemoTables(
            cases=cases,
            responses=_responses(engine, cases),
            rubric_versions=versions,
            assignments=_read(engine, "SELECT kind, case_pk, response_id, group_no, created_at FROM assignment"),
            feedback=_read(engine, "SELECT round_at, is_open FROM feedback_round"),
            calibration=_read(engine, "SELECT model, response_id, seed FROM calibration_sample"),
            plan=json.loads(demo.write_demo_files(tmp_path, scale="small", seed=7)["plan"].read_text("utf-8")),
        )
    finally:
        engine.dispose()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def small(request, sqlite_template, tmp_path_factory) -> DemoTables:
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv(demo.PASSWORD_ENV, PASSWORD)
    try:
        folder = tmp_path_factory.mktemp(f"shapes-{request.param}")
        if request.param == "sqlite":
            url = new_sqlite_url(sqlite_template, folder)
        else:
            url = new_postgres_url(request.getfixturevalue("pg_server"))
        return _build(url, folder / "plan")
    finally:
        monkeypatch.undo()


def test_forty_cases_and_at_least_28_approved_rubrics_one_submitted_and_some_waiting(small):
    assert len(small.cases) >= 40
    approved = small.cases["current"].notna()
    assert approved.sum() >= 28
    submitted = set(small.rubric_versions.loc[small.rubric_versions["status"] == "submitted", "case_pk"])
    # one submitted by the plan, one drafted by the demo's generator and submitted by its author (demo/drafts.py)
    assert len(submitted) == 2 and not set(small.cases.loc[approved, "case_pk"]) & submitted
    waiting = set(small.cases.loc[~approved, "case_pk"])
    authoring = small.assignments[small.assignments["kind"] == "rubric"]
    handed = set(authoring["case_pk"])
    # Cases waiting for authoring: handed to an author with nothing submitted yet, and some not handed out at all.
    assert len((waiting & handed) - submitted) >= 5 and waiting - handed


def test_four_models_are_finished_on_24_approved_cases_and_all_five_on_six_of_them(small):
    responses = small.responses
    finished = responses[responses["finished"]]
    per_model = finished.groupby("model")["case_pk"].nunique().sort_values(ascending=False)
    assert len(per_model) >= 4 and (per_model.iloc[:4] >= 24).all(), per_model.to_dict()
    four = set(per_model.index[:4])
    cases_of_four = finished[finished["model"].isin(four)].groupby("case_pk")["model"].nunique()
    assert (cases_of_four == 4).sum() >= 24
    n_models = responses["model"].nunique()
    assert n_models == 5
    every_model = finished.groupby("case_pk")["model"].nunique()
    assert (every_model == n_models).sum() >= 6
    # Finished means: both groups labeled all 30, both checks wrote 30 rows, nothing left open — so final (§4.1).
    assert (finished["annotation1"] == N).all() and (finished["check2"] == N).all()
    assert finished["final"].all()
    # Adjudications only where the two groups' final labels differed; a finished response with disagreements has
    # each one adjudicated.
    assert finished["adjudications"].sum() > 0


def test_the_rest_stays_in_progress_in_every_shape(small):
    responses = small.responses
    states = Counter(responses.apply(_state, axis=1))
    for shape in ("group1_only", "group2_only", "group1_partial", "group2_partial", "unchecked", "unlabeled"):
        assert states[shape] >= 1, (shape, states)
    assert states["group1_checked"] + states["group2_checked"] >= 2  # complete, unchecked in one group
    assert states["checked_open"] >= 4  # both checked, disagreements waiting for adjudication
    in_progress = responses[~responses["final"]]
    assert len(in_progress) >= 30
    # An approved case no one was handed: its responses are unlabeled, and not assigned beyond the calibration draw.
    label_work = small.assignments[small.assignments["kind"] == "label"]
    not_assigned = responses[~responses["response_id"].isin(label_work["response_id"])]
    assert len(not_assigned) >= 4 and (not_assigned.apply(_state, axis=1) == "unlabeled").all()


def test_the_database_holds_the_state_the_plan_gives_every_response(small):
    plan = small.plan
    held = {(row.case_id, row.model): _state(row) for row in small.responses.itertuples()}
    planned = {
        (case_id, model): state
        for case_id, states in plan["states"].items()
        for model, state in zip(plan["models"], states, strict=True)
    }
    assert held == planned


def test_one_round_has_its_feedback_open_and_it_is_finished(small):
    opened = small.feedback[small.feedback["is_open"].astype(bool)]
    assert len(opened) == 1
    label_work = small.assignments[small.assignments["kind"] == "label"].copy()
    round_at = pd.Timestamp(opened["round_at"].iloc[0])
    in_round = label_work[pd.to_datetime(label_work["created_at"]) == round_at]
    assert len(in_round) >= 2 * 5  # every response of at least one case, in both groups
    responses = small.responses.set_index("response_id")
    for row in in_round.itertuples():
        assert responses.loc[row.response_id, f"annotation{row.group_no}"] == N
    # No other round labels a response of the same cases (their gold is shown to this round's annotators).
    others = label_work[pd.to_datetime(label_work["created_at"]) != round_at]
    assert not set(others["case_pk"]) & set(in_round["case_pk"])


def test_one_model_has_a_calibration_sample_with_at_least_ten_final_responses(small):
    sample = small.calibration
    assert sample["model"].nunique() == 1
    model = sample["model"].iloc[0]
    drawn = small.responses[small.responses["response_id"].isin(sample["response_id"])]
    assert len(drawn) == len(sample) and (drawn["model"] == model).all()
    assert drawn["final"].sum() >= 10
    assert (~drawn["final"]).sum() >= 1  # the New model page has stages to show
    # Outside the sample the judges graded the rest of the model's responses (U of the calibrated score).
    outside = small.responses[
        (small.responses["model"] == model) & ~small.responses["response_id"].isin(sample["response_id"])
    ]
    assert len(outside) >= 1
    assert model == small.plan["calibration"]["model"] and len(sample) == small.plan["calibration"]["size"]


def test_final_and_provisional_response_counts(small):
    responses = small.responses
    final = int(responses["final"].sum())
    provisional = int((responses["complete"] & ~responses["final"]).sum())
    planned = Counter(state for states in small.plan["states"].values() for state in states)
    assert final == planned["final"]
    # Complete but not final: one group only, unchecked groups, or agreement not yet checked.
    assert provisional > 0 and final > 100
    assert (responses["final"] <= responses["complete"]).all()


def test_the_full_scale_is_mostly_final_with_95_percent_of_groups_checked(tmp_path):
    """The full scale's files at 100 cases: both groups label every decision, a check label on every decision of
    95 % of the (response, group) pairs, adjudications only on the final part and there on every disagreement."""
    paths = demo.write_demo_files(tmp_path, scale="full", seed=7, n_cases=100, n_judges=0)
    labels = pd.read_json(paths["labels"], lines=True)
    key = ["case_id", "model"]
    per_group = labels[labels["stage"] != "adjudication"].groupby([*key, "stage", "group"]).size().unstack([2, 3])
    per_group = per_group.fillna(0).astype(int)
    n_responses = 100 * 11
    assert len(per_group) == n_responses
    assert (per_group["annotation"] == N).all().all()
    checks = per_group["check"]
    assert set(checks.stack()) <= {0, N}  # a group is checked on every decision or on none
    assert int((checks == N).sum().sum()) == round(0.95 * 2 * n_responses)

    finals = labels[labels["stage"] != "adjudication"].sort_values("stage")  # check after annotation: it wins
    finals = finals.drop_duplicates([*key, "criterion_id", "group"], keep="last")
    wide = finals.pivot_table(index=[*key, "criterion_id"], columns="group", values="met", aggfunc="first")
    adjudicated = labels[labels["stage"] == "adjudication"].set_index([*key, "criterion_id"])
    wide["differ"] = wide[1] != wide[2]
    wide["adjudicated"] = wide.index.isin(adjudicated.index)
    assert not (wide["adjudicated"] & ~wide["differ"]).any()  # adjudication only where the groups differ
    response = wide.groupby(level=[0, 1]).agg(differ=("differ", "sum"), adjudicated=("adjudicated", "sum"))
    both_checked = (checks == N).all(axis=1)
    resolved = response["differ"] == response["adjudicated"]
    final = both_checked & resolved.reindex(both_checked.index)
    assert int(final.sum()) == round(0.91 * n_responses)
    # Responses with some adjudication are final ones: nothing is adjudicated outside the finished part.
    assert (final | (response["adjudicated"].reindex(final.index) == 0)).all()
    # Checked with disagreements open: 2 % of responses, each with at least one open disagreement.
    assert int((both_checked & ~resolved.reindex(both_checked.index)).sum()) == round(0.02 * n_responses)
