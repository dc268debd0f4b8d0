"""Final and provisional gold (docs/REFERENCE.md §4.1) on both databases, against a literal pandas reading.

A seeded mix of states per (response, group) — unlabeled, partly labeled, labeled but unchecked, checked,
with and without adjudication — is written to the label table. The reference reads that table with plain
SQL and applies the definitions with pandas and scikit-learn, sharing no code with `db.rules.gold`, the
grid or the report; every basis-dependent figure is compared with it.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score
from sqlalchemy import text
from sqlmodel import Session

from analysis.exports.gold import export_gold
from analysis.exports.judgements import export_judgements
from analysis.loader import load_frames
from analysis.report import build_report, report_json
from db import counts
from db.rules.enums import NO_GROUP, Stage
from db.rules.gold import FINAL, PROVISIONAL, gold_states
from db.store.current_rubric import current_approved_version
from db.store.models import JudgeDecision, Label
from tests.support.factories import make_case, make_response, make_user

N, K = 4, 2
MODELS = ("m-a", "m-b", "m-c")
CRITERIA = [f"c{i:02d}" for i in range(1, N + 1)]


def _world(engine, seed: int = 11, n_cases: int = 14) -> None:
    """Cases of N criteria, three models, labels in every state the definitions tell apart, one judge."""
    rng = np.random.default_rng(seed)
    with Session(engine, expire_on_commit=False) as session:
        annotators = {g: make_user(session, f"anno{g}", "annotator", g) for g in (1, 2)}
        checkers = {g: make_user(session, f"check{g}", "checker", g) for g in (1, 2)}
        adjudicator = make_user(session, "adjudicator", "checker", 1)
        rows, judged, response_ids = [], [], []
        for c in range(n_cases):
            case = make_case(session, f"CC-{c + 1:04d}", n=N)
            version = current_approved_version(session, case.id).id
            for model in MODELS:
                response = make_response(session, case, model)
                response_ids.append(response.id)
                truth = rng.random(N) < 0.6
                finals = {}
                for g in (1, 2):
                    # 0 none, 1 part, 2 all annotated; checks: 0 none, 1 part, 2 all (only on annotated work)
                    coverage = rng.choice([0, 1, 2, 2, 2])
                    annotated = CRITERIA if coverage == 2 else CRITERIA[: rng.integers(1, N)] if coverage else []
                    checked = rng.choice([0, 1, 2, 2]) if annotated else 0
                    finals[g] = {}
                    for i, criterion in enumerate(annotated):
                        met = bool(truth[i] ^ (rng.random() < 0.15))
                        rows.append((response.id, criterion, Stage.annotation, g, met, annotators[g].id, version))
                        finals[g][criterion] = met
                    for criterion in annotated[: len(annotated) if checked == 2 else (1 if checked else 0)]:
                        met = bool(finals[g][criterion] ^ (rng.random() < 0.1))
                        rows.append((response.id, criterion, Stage.check, g, met, checkers[g].id, version))
                        finals[g][criterion] = met
                adjudicate = rng.choice(["none", "disagreements", "all"], p=[0.5, 0.3, 0.2])
                for criterion in CRITERIA:
                    both = criterion in finals[1] and criterion in finals[2]
                    differ = both and finals[1][criterion] != finals[2][criterion]
                    if adjudicate == "all" or (adjudicate == "disagreements" and differ):
                        met = bool(rng.random() < 0.5)
                        rows.append(
                            (response.id, criterion, Stage.adjudication, NO_GROUP, met, adjudicator.id, version)
                        )
                for criterion in CRITERIA if rng.random() < 0.9 else CRITERIA[:2]:
                    judged.append(
                        JudgeDecision(
                            judge="j1", response_id=response.id, criterion_id=criterion, met=bool(rng.random() < 0.55)
                        )
                    )
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
        session.add_all(judged)
        session.flush()
        counts.refresh(session, response_ids)
        session.commit()


def _reference(engine) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(decisions, responses) by a literal reading of §4 and §4.1 over the raw tables."""
    with engine.connect() as connection:
        labels = pd.read_sql(text("SELECT response_id, criterion_id, stage, group_no, met FROM label"), connection)
        responses = pd.read_sql(text("SELECT id AS response_id, model FROM response ORDER BY id"), connection)
    labels["met"] = labels["met"].astype(bool)
    index = pd.MultiIndex.from_product([responses["response_id"], CRITERIA], names=["response_id", "criterion_id"])
    decisions = pd.DataFrame(index=index)

    def column(stage: str, group: int) -> pd.Series:
        chosen = labels[(labels["stage"] == stage) & (labels["group_no"] == group)]
        return chosen.set_index(["response_id", "criterion_id"])["met"].astype(float).reindex(index)

    for g in (1, 2):
        decisions[f"check{g}"] = column("check", g)
        decisions[f"g{g}"] = decisions[f"check{g}"].combine_first(column("annotation", g))
    decisions["adj"] = column("adjudication", NO_GROUP)

    def gold(row) -> float:
        if not np.isnan(row.adj):
            return row.adj
        if not np.isnan(row.g1) and not np.isnan(row.g2):
            return row.g1 if row.g1 == row.g2 else np.nan
        return row.g2 if np.isnan(row.g1) else row.g1

    decisions["gold"] = decisions.apply(gold, axis=1)
    by_response = decisions.groupby(level="response_id")
    responses = responses.set_index("response_id")
    responses["complete"] = by_response["gold"].apply(lambda values: values.notna().all())
    for g in (1, 2):
        responses[f"checked{g}"] = by_response[f"check{g}"].apply(lambda values: values.notna().all())
    both_checked = (responses["checked1"] & responses["checked2"]).reindex(decisions.index, level="response_id")
    settled = decisions["adj"].notna() | ((decisions["g1"] == decisions["g2"]) & both_checked)
    responses["final"] = settled.groupby(level="response_id").all()
    s = decisions["gold"].eq(1).groupby(level="response_id").sum().reindex(responses.index)
    responses["cacs"] = np.where(s >= K, (s - K + 1) / (N - K + 1), 0.0)
    return decisions, responses


@pytest.fixture
def world(engine):
    _world(engine)
    return engine


def test_checked_complete_and_final_match_a_literal_reading(world):
    _, expected = _reference(world)
    # Every state is present, or the comparison proves little.
    assert expected["final"].sum() >= 3 and (expected["complete"] & ~expected["final"]).sum() >= 3
    assert (~expected["complete"]).sum() >= 3
    frames = load_frames(world)
    grid = build_report(frames, K, resamples=0, insights=False, gold_basis=PROVISIONAL).grid
    rows = expected.loc[grid.responses["response_id"].to_numpy()]
    assert grid.final.tolist() == rows["final"].tolist()
    assert grid.checked[:, 0].tolist() == rows["checked1"].tolist()
    assert grid.checked[:, 1].tolist() == rows["checked2"].tolist()
    # The per-response reading pages use says the same.
    states = gold_states(frames.labels, pd.Series(N, index=expected.index)).set_index("response_id")
    assert states["final"].tolist() == expected["final"].tolist()
    assert states["complete"].tolist() == expected["complete"].tolist()
    assert (states["state"] == "provisional").sum() == (expected["complete"] & ~expected["final"]).sum()


@pytest.mark.parametrize("basis", [FINAL, PROVISIONAL])
def test_every_basis_dependent_report_figure_matches_pandas_and_sklearn(world, basis):
    decisions, expected = _reference(world)
    counted = expected["final"] if basis == FINAL else expected["complete"]
    document = report_json(build_report(load_frames(world), K, resamples=0, gold_basis=basis, min_responses=3))
    assert document["gold_basis"] == basis and document["min_responses"] == 3
    for model in MODELS:
        mine = expected[(expected["model"] == model) & counted]
        assert document["models"][model]["n_responses"] == len(mine)
        if len(mine):
            assert document["models"][model]["cacs_at_k"] == pytest.approx(mine["cacs"].mean(), abs=1e-12)
    pending = document["pending"]
    assert pending["incomplete_responses"] == int((~expected["complete"]).sum())
    provisional = int((expected["complete"] & ~expected["final"]).sum())
    assert pending["provisional_responses"] == (provisional if basis == FINAL else 0)
    # Ranked: at least min_responses counted responses.
    for row in document["leaderboard"]:
        assert row["ranked"] == (row["n_responses"] >= 3)
        assert row["n_responses"] == int(((expected["model"] == row["model"]) & counted).sum())
    # Agreement: aligned pairs with both groups' finals on all N, and under final on checked groups only.
    g1, g2 = decisions["g1"].notna(), decisions["g2"].notna()
    aligned = (g1 & g2).groupby(level="response_id").all()
    if basis == FINAL:
        aligned &= expected["checked1"] & expected["checked2"]
    for model in MODELS:
        ids = expected.index[(expected["model"] == model) & aligned]
        pooled = document["agreement"][model]["pooled_mf1"]
        assert document["agreement"][model]["n_aligned"] == len(ids)
        if len(ids):
            chosen = decisions.loc[ids]
            assert pooled == pytest.approx(f1_score(chosen["g1"], chosen["g2"], average="macro"), abs=1e-12)
    # Judge against gold: the decisions with gold (under final: of final responses) and a judge decision.
    with world.connect() as connection:
        judge = pd.read_sql(text("SELECT response_id, criterion_id, met FROM judge_decision"), connection)
    judge = judge.set_index(["response_id", "criterion_id"])["met"].astype(float)
    on_basis = (expected["final"] if basis == FINAL else expected["model"].notna()).reindex(
        decisions.index, level="response_id"
    )
    both = decisions.loc[on_basis & decisions["gold"].notna()].join(judge.rename("judge"), how="inner")
    assert document["judges"]["j1"]["mf1_gold"] == pytest.approx(
        f1_score(both["gold"], both["judge"], average="macro"), abs=1e-12
    )
    # Judge against group 1: its finals, under final only where group 1 is checked.
    group1 = decisions.loc[decisions["g1"].notna()]
    if basis == FINAL:
        group1 = group1.loc[expected["checked1"].reindex(group1.index, level="response_id").to_numpy()]
    joined = group1.join(judge.rename("judge"), how="inner")
    assert document["judges"]["j1"]["mf1_group1"] == pytest.approx(
        f1_score(joined["g1"], joined["judge"], average="macro"), abs=1e-12
    )


def test_gold_export_writes_final_responses_and_checked_groups_only(world, tmp_path):
    decisions, expected = _reference(world)
    with world.connect() as connection:
        keys = pd.read_sql(
            text('SELECT r.id AS response_id, c.case_id, r.model FROM response r JOIN "case" c ON c.id = r.case_pk'),
            connection,
        ).set_index("response_id")
    for basis in (FINAL, PROVISIONAL):
        path = tmp_path / f"gold-{basis}.jsonl"
        export_gold(world, path, basis=basis)
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        manifest = json.loads((tmp_path / f"gold-{basis}.jsonl.manifest.json").read_text(encoding="utf-8"))
        assert manifest["gold_basis"] == basis
        has_gold = decisions["gold"].notna()
        if basis == FINAL:
            has_gold &= expected["final"].reindex(decisions.index, level="response_id")
        wanted = decisions.loc[has_gold]
        assert len(rows) == len(wanted)
        by_key = {(row["case_id"], row["model"], row["criterion_id"]): row for row in rows}
        for (response_id, criterion), decision in wanted.iterrows():
            case_id, model = keys.loc[response_id, "case_id"], keys.loc[response_id, "model"]
            row = by_key[(case_id, model, criterion)]
            assert row["final"] == bool(expected.loc[response_id, "final"])
            assert row["met"] == bool(decision["gold"])
            for g in (1, 2):
                shown = decision[f"g{g}"]
                if basis == FINAL and not expected.loc[response_id, f"checked{g}"]:
                    shown = np.nan
                assert row[f"group{g}"] == (None if np.isnan(shown) else bool(shown))
        if basis == FINAL:
            assert {row["source"] for row in rows} <= {"agreement", "adjudicated"}


def test_judgements_export_under_final_scores_final_responses_only(world, tmp_path):
    _, expected = _reference(world)
    final_models = sorted(set(expected.loc[expected["final"], "model"]))
    summary = export_judgements(world, tmp_path / "out", source="gold", per_model=True)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["gold_basis"] == FINAL
    assert sorted(manifest["models"]) == final_models
    for model in final_models:
        folder = tmp_path / "out" / manifest["models"][model]["folder"]
        scores = json.loads((folder / "scores.json").read_text(encoding="utf-8"))
        mine = expected[(expected["model"] == model) & expected["final"]]
        assert scores["cases"] == len(mine)
        inner = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        assert inner["gold_basis"] == FINAL
    assert summary.counts["models"] == len(final_models)
