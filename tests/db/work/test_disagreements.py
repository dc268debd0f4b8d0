"""Where judges disagree (db/work/disagreements.py, `assign disagreements`, `export sft --only-disagreements` and the
assignments page), on both databases; the ranking against a pandas recomputation of generated judge decisions."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sqlmodel import func, select

from analysis.exports.sft import export_sft
from cli.main import main
from db.access.users import get_user
from db.rules.enums import AssignmentKind, RubricStatus
from db.rules.errors import NotFound, PermissionDenied, ValidationFailed
from db.rules.gold import PROVISIONAL
from db.store.engine import get_engine, session_scope
from db.store.models import Assignment, AuditLog, CalibrationSample, DisagreementDraw, JudgeDecision, Response
from db.work.assignments import my_queue
from db.work.disagreements import draw_disagreements, ranked_candidates
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in, texts
from tests.support.factories import make_case, make_label, make_response, make_user
from ui.widgets import plain

N = 4
JUDGE_A, JUDGE_B = "judge-alpha", "judge-beta"
MODELS = ("model-x", "model-y")
COMPLETE = {("CC-0002", "model-x"), ("CC-0005", "model-y")}  # labeled by both groups: gold on every criterion
PARTIAL = ("CC-0006", "model-x")  # gold on one criterion only: still without complete gold
CALIBRATED = ("CC-0007", "model-y")
UNGRADED = ("CC-0008", "model-x")  # judge B left one criterion out
UNAPPROVED = "CC-0013"


def _judged(case_id: str, model: str) -> dict[str, list[bool]]:
    """Each judge's decisions on the response to `case_id` by `model` (the two judges disagree at random;
    completely on the responses that must never be drawn, so they would rank first if they were)."""
    if (case_id, model) in COMPLETE or (case_id, model) == CALIBRATED or case_id == UNAPPROVED:
        return {JUDGE_A: [True] * N, JUDGE_B: [False] * N}
    rng = np.random.default_rng([int(case_id[3:]), MODELS.index(model)])
    a = (rng.random(N) < 0.5).tolist()
    b = [met if rng.random() < 0.6 else not met for met in a]
    return {JUDGE_A: a, JUDGE_B: b}


def _generate(session) -> list[dict]:
    decisions = []
    for number in range(1, 14):
        case_id = f"CC-{number:04d}"
        status = RubricStatus.submitted if case_id == UNAPPROVED else RubricStatus.approved
        case = make_case(session, case_id, n=N, status=status)
        for model in MODELS:
            response = make_response(session, case, model, f"{case_id} {model} 的回答")
            for judge, mets in _judged(case_id, model).items():
                for position, met in enumerate(mets, start=1):
                    if (case_id, model) == UNGRADED and judge == JUDGE_B and position == N:
                        continue
                    criterion = f"c{position:02d}"
                    session.add(JudgeDecision(judge=judge, response_id=response.id, criterion_id=criterion, met=met))
                    decisions.append(dict(case_id=case_id, model=model, judge=judge, criterion_id=criterion, met=met))
            labels = N if (case_id, model) in COMPLETE else 1 if (case_id, model) == PARTIAL else 0
            for position in range(1, labels + 1):
                for user in (get_user(session, username="g1a1"), get_user(session, username="g2a1")):
                    make_label(session, response, f"c{position:02d}", position % 2 == 0, user)
            if (case_id, model) == CALIBRATED:
                session.add(CalibrationSample(model=model, response_id=response.id, seed=1, drawn_by="boss"))
    return decisions


@pytest.fixture
def judged_db(engine, session):
    """13 cases (N = 4; the last without an approved rubric), two models, two judges on every response; two
    responses complete, one partly labeled, one in a calibration sample, one not fully graded by judge B."""
    make_user(session, "boss", "admin")
    make_user(session, "chk1", "checker", 1)
    for group in (1, 2):
        for i in (1, 2):
            make_user(session, f"g{group}a{i}", "annotator", group)
    session.info["decisions"] = _generate(session)
    session.commit()
    return engine


def _expected_order(decisions: list[dict]) -> list[tuple[str, str, int]]:
    """(case_id, model, criteria differing) of the drawable responses in draw order, recomputed with pandas."""
    frame = pd.DataFrame(decisions)
    wide = frame.pivot_table(index=["case_id", "model", "criterion_id"], columns="judge", values="met", aggfunc="first")
    wide = wide.dropna()
    per = (
        wide.assign(differ=(wide[JUDGE_A] != wide[JUDGE_B]).astype(int))
        .groupby(["case_id", "model"])
        .agg(graded=("differ", "size"), differ=("differ", "sum"))
        .reset_index()
    )
    excluded = COMPLETE | {CALIBRATED}
    keep = (
        (per["graded"] == N)
        & (per["differ"] > 0)
        & (per["case_id"] != UNAPPROVED)
        & ~per[["case_id", "model"]].apply(tuple, axis=1).isin(excluded)
    )
    per = per[keep].sort_values(["differ", "case_id", "model"], ascending=[False, True, True])
    return [(c, m, int(d)) for c, m, d in per[["case_id", "model", "differ"]].itertuples(index=False)]


def _counts(engine) -> tuple[int, int, int]:
    with session_scope(engine, read_only=True) as session:
        return tuple(
            session.exec(select(func.count()).select_from(table)).one()
            for table in (DisagreementDraw, Assignment, AuditLog)
        )


def test_ranking_matches_a_pandas_recomputation_and_draws_go_one_per_group(judged_db, session):
    expected = _expected_order(session.info["decisions"])
    assert len(expected) > 8 and len({d for *_, d in expected}) > 1
    with session_scope(judged_db, read_only=True) as s:
        ranked = ranked_candidates(s, JUDGE_A, JUDGE_B)
    assert [(c.case_id, c.model, c.n_differing) for c in ranked] == expected
    assert PARTIAL in {(c.case_id, c.model) for c in ranked}  # one gold decision of four: not complete

    with session_scope(judged_db) as s:
        first = draw_disagreements(s, actor=get_user(s, username="boss"), judges=[JUDGE_A, JUDGE_B], n=5)
    with session_scope(judged_db) as s:  # a second draw takes the next responses, never the same again
        second = draw_disagreements(s, actor=get_user(s, username="boss"), judges=[JUDGE_B, JUDGE_A], n=3)
    drawn = [(c.case_id, c.model, c.n_differing) for c in [*first.drawn, *second.drawn]]
    assert drawn == expected[:8]
    assert first.lines()[0] == f"drew 5 responses where {JUDGE_A} and {JUDGE_B} disagree (most: 4 of 4 criteria)"
    with session_scope(judged_db, read_only=True) as s:
        rows = s.exec(select(DisagreementDraw).order_by(DisagreementDraw.id)).all()
        assert [row.response_id for row in rows] == first.response_ids + second.response_ids
        assert {(row.judge_a, row.judge_b, row.drawn_by) for row in rows[:5]} == {(JUDGE_A, JUDGE_B, "boss")}
        assigned = s.exec(
            select(Assignment.response_id, Assignment.group_no, Assignment.user_id).where(
                Assignment.kind == AssignmentKind.label
            )
        ).all()
        assert sorted((r, g) for r, g, _ in assigned) == sorted(
            (r, g) for r in [*first.response_ids, *second.response_ids] for g in (1, 2)
        )
        entries = s.exec(select(AuditLog).where(AuditLog.entity == "disagreement_draw").order_by(AuditLog.id)).all()
        assert [len(entry.after["responses"]) for entry in entries] == [5, 3]
        assert entries[0].after["judges"] == [JUDGE_A, JUDGE_B]
        assert len(s.exec(select(AuditLog).where(AuditLog.entity == "assignment")).all()) == 16


def test_responses_with_gold_and_calibration_responses_are_never_drawn(judged_db):
    with session_scope(judged_db) as s:
        draw = draw_disagreements(s, actor=get_user(s, username="boss"), judges=[JUDGE_A, JUDGE_B], n=1000)
    drawn = {(c.case_id, c.model) for c in draw.drawn}
    assert not drawn & (COMPLETE | {CALIBRATED, UNGRADED}) and UNAPPROVED not in {c for c, _ in drawn}
    with session_scope(judged_db) as s, pytest.raises(ValidationFailed, match="no response without gold"):
        draw_disagreements(s, actor=get_user(s, username="boss"), judges=[JUDGE_A, JUDGE_B], n=1)


def test_only_an_admin_draws(judged_db):
    for name in ("g1a1", "chk1"):
        with session_scope(judged_db) as s, pytest.raises(PermissionDenied):
            draw_disagreements(s, actor=get_user(s, username=name), judges=[JUDGE_A, JUDGE_B], n=3)
    assert _counts(judged_db) == (0, 0, 0)


@pytest.mark.parametrize(
    ("judges", "n", "error", "match"),
    [
        ([JUDGE_A, "judge-gamma"], 3, NotFound, "no decisions of a judge 'judge-gamma'"),
        ([JUDGE_A, JUDGE_A], 3, ValidationFailed, "named twice"),
        ([JUDGE_A, "model-x"], 3, ValidationFailed, "'model-x' is a model with responses, not a judge"),
        ([JUDGE_A], 3, ValidationFailed, "two judge names"),
        ([JUDGE_A, JUDGE_B, "judge-gamma"], 3, ValidationFailed, "two judge names"),
        ([JUDGE_A, JUDGE_B], 0, ValidationFailed, "at least 1"),
        ([JUDGE_A, JUDGE_B], True, ValidationFailed, "at least 1"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(judged_db, judges, n, error, match):
    with session_scope(judged_db) as s, pytest.raises(error, match=match):
        draw_disagreements(s, actor=get_user(s, username="boss"), judges=judges, n=n)
    assert _counts(judged_db) == (0, 0, 0)


def test_annotators_receive_neither_model_nor_judge_names(judged_db):
    with session_scope(judged_db) as s:
        draw_disagreements(s, actor=get_user(s, username="boss"), judges=[JUDGE_A, JUDGE_B], n=6)
    with session_scope(judged_db, read_only=True) as s:
        for name in ("g1a1", "g1a2", "g2a1", "g2a2"):
            received = json.dumps(my_queue(s, get_user(s, username=name), AssignmentKind.label), default=str)
            assert not any(word in received for word in (*MODELS, JUDGE_A, JUDGE_B, "judge")), received


def test_command_line_draws_and_refuses_bad_input_in_one_line(judged_db, database_url, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()
    bad = [
        (["--judges", f"{JUDGE_A},{JUDGE_A}"], "named twice"),
        (["--judges", f"{JUDGE_A},model-y"], "is a model with responses, not a judge"),
        (["--judges", f"{JUDGE_A},nobody"], "no decisions of a judge"),
        (["--judges", JUDGE_A], "two judge names"),
        (["--judges", f"{JUDGE_A},{JUDGE_B}", "--n", "0"], "at least 1"),
        (["--model", "model-x"], "give --judges A,B"),
    ]
    try:
        for arguments, message in bad:
            assert main(["assign", "disagreements", *arguments]) == 1, arguments
            error = capsys.readouterr().err.strip()
            assert len(error.splitlines()) == 1 and message in error, (arguments, error)
        assert _counts(judged_db) == (0, 0, 0)
        assert main(["assign", "disagreements", "--judges", f"{JUDGE_A},{JUDGE_B}", "--n", "4"]) == 0
        assert f"drew 4 responses where {JUDGE_A} and {JUDGE_B} disagree" in capsys.readouterr().out
    finally:
        get_engine.cache_clear()
    with session_scope(judged_db, read_only=True) as s:
        assert s.exec(select(func.count()).select_from(DisagreementDraw)).one() == 4
        assert s.exec(select(AuditLog.actor).where(AuditLog.entity == "disagreement_draw")).all() == ["@cli"]


def test_sft_export_can_be_limited_to_the_drawn_responses(judged_db, tmp_path):
    with session_scope(judged_db) as s:
        draw = draw_disagreements(s, actor=get_user(s, username="boss"), judges=[JUDGE_A, JUDGE_B], n=3)
    with session_scope(judged_db) as s:  # physicians label the drawn responses: now they have gold
        responses = s.exec(select(Response).where(Response.id.in_(draw.response_ids))).all()
        for response in responses:
            first = 2 if response.text.startswith(PARTIAL[0]) and response.model == PARTIAL[1] else 1
            for position in range(first, N + 1):
                for name in ("g1a1", "g2a1"):
                    make_label(s, response, f"c{position:02d}", True, get_user(s, username=name))
    # The drawn responses' labels are unchecked: the export reads them on the provisional basis.
    export_sft(judged_db, tmp_path / "only", dev_fraction=0.0, only_disagreements=True, basis=PROVISIONAL)
    manifest = json.loads((tmp_path / "only" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["options"]["only_disagreements"] is True
    lines = (tmp_path / "only" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    drawn = {(c.case_id, c.model) for c in draw.drawn}
    assert {(json.loads(line)["meta"]["case_id"], json.loads(line)["meta"]["model"]) for line in lines} == drawn
    assert len(lines) == 3 * N
    export_sft(judged_db, tmp_path / "all", dev_fraction=0.0, basis=PROVISIONAL)
    manifest = json.loads((tmp_path / "all" / "manifest.json").read_text(encoding="utf-8"))
    # every gold decision: the drawn, the complete and the partly labeled responses'
    assert manifest["options"]["only_disagreements"] is False
    assert manifest["counts"]["rows"]["train.jsonl"] == 3 * N + 2 * N + (0 if PARTIAL in drawn else 1)


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


def test_assignments_page_draws_where_judges_disagree(app_database):
    with session_scope(app_database) as s:
        make_user(s, "boss", "admin")
        for group in (1, 2):
            make_user(s, f"g{group}a1", "annotator", group)
        for number in (1, 2, 3):
            case = make_case(s, f"CC-{number:04d}", n=N)
            response = make_response(s, case, "model-x", f"回答{number}")
            for position in range(1, N + 1):
                for judge, met in ((JUDGE_A, True), (JUDGE_B, position > number)):
                    s.add(JudgeDecision(judge=judge, response_id=response.id, criterion_id=f"c{position:02d}", met=met))
    app = open_page(signed_in(app_database, "boss"), "admin-assignments")
    first, second = [w for w in app.selectbox if w.form_id == "assign_disagreements"]
    assert first.options == second.options == [JUDGE_A, JUDGE_B]
    first.set_value(JUDGE_A)
    second.set_value(JUDGE_A)
    app = button(app, t("admin.assign.disagreements.submit")).click().run()
    assert app.error and t("errors.disagreement_same_judge", judge=plain(JUDGE_A)) in app.error[0].value
    first, second = [w for w in app.selectbox if w.form_id == "assign_disagreements"]
    second.set_value(JUDGE_B)
    [size] = [w for w in app.number_input if w.form_id == "assign_disagreements"]
    size.set_value(2)
    app = button(app, t("admin.assign.disagreements.submit")).click().run()
    assert not app.exception and not app.error
    drawn_text = t("admin.assign.disagreements.drawn", judge_a=plain(JUDGE_A), judge_b=plain(JUDGE_B), n=2)
    assert drawn_text in texts(app)
    assert t("admin.assign.result", created=4, existing=0) in texts(app)
    with session_scope(app_database, read_only=True) as s:
        drawn = s.exec(select(Response.text).join(DisagreementDraw, DisagreementDraw.response_id == Response.id)).all()
    assert sorted(drawn) == ["回答2", "回答3"]  # judge B differs on 2 and 3 criteria there, on 1 for case 1
