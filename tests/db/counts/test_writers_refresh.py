"""Every writer refreshes the kept figures (db.counts) itself, inside its own transaction: right after each one
commits, the label tally, the response status and every labeling assignment's state equal a recount from the
label rows. A writer that forgot its `counts.refresh*` call leaves them behind and fails here.

The writers, in the order an installation meets them: the case, response, label and judge importers (a
renewed rubric by import too), labeling assignment, the annotator's save, the checker's save (one label and a
page's batch), adjudication (one cell and a batch), a criterion sent back to its author, a rubric approval,
and the disagreement and calibration draws that assign labeling work. The engine itself keeps nothing behind
the writers' backs: it registers no session hook and brings no db.counts.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from sqlalchemy import select, text
from sqlmodel import Session

from db import counts, labeling, labels as label_room, review, rubrics
from db.importers import import_file
from db.review.criterion_return import send_back_criteria
from db.rules import config
from db.rules.enums import AssignmentKind, Stage
from db.store.current_rubric import counts_on_current_rubric, current_rubric_sizes, current_version_ids
from db.store.engine import session_scope
from db.store.models import Assignment, Label, LabelTally, Response, ResponseStatus, User
from db.work import assignments
from db.work.calibration import draw_calibration_sample
from db.work.disagreements import draw_disagreements
from tests.support import recount
from tests.support.factories import make_user
from tests.support.import_samples import case_record, label_record, response_record, write_jsonl
from tests.support.page_save import as_sent

ROOT = Path(__file__).resolve().parents[3]
N = config.RUBRIC_SIZE
CRITERIA = [f"c{i:02d}" for i in range(1, N + 1)]


def _recounted_states(s) -> dict[int, tuple[str, int, int]]:
    """Labeling assignment id -> (state, labels that count, rubric size), from the label rows themselves."""
    rows = s.execute(
        select(Assignment.id, Assignment.case_pk, Assignment.response_id, Assignment.group_no).where(
            Assignment.kind == AssignmentKind.label
        )
    ).all()
    case_pks = {case_pk for _, case_pk, _, _ in rows}
    versions = current_version_ids(s, case_pks)
    sizes = current_rubric_sizes(s, case_pks)
    stamps = defaultdict(list)
    for response_id, group_no, version_id in s.execute(
        select(Label.response_id, Label.group_no, Label.rubric_version_id).where(Label.stage == Stage.annotation)
    ).all():
        stamps[(response_id, group_no)].append(version_id)
    out = {}
    for assignment_id, case_pk, response_id, group_no in rows:
        current = versions.get(case_pk)
        fresh = sum(counts_on_current_rubric(v, current) for v in stamps[(response_id, group_no)])
        stale = len(stamps[(response_id, group_no)]) - fresh
        size = sizes.get(case_pk, 0) if current is not None else 0
        out[assignment_id] = (counts.label_status(current, size, fresh, stale), fresh, size)
    return out


def _recounted_owner_totals(s) -> list[tuple[int, int, int, int]]:
    """(user_id, group_no, assigned, done) per person, from every labeling assignment and the recounted states."""
    states = _recounted_states(s)
    per_owner: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    for assignment_id, user_id, group_no in s.execute(
        select(Assignment.id, Assignment.user_id, Assignment.group_no).where(Assignment.kind == AssignmentKind.label)
    ).all():
        per_owner[(user_id, group_no)][0] += 1
        per_owner[(user_id, group_no)][1] += states[assignment_id][0] == counts.DONE
    return sorted((user_id, group_no, n, done) for (user_id, group_no), (n, done) in per_owner.items())


def _kept_rows(s) -> tuple[list, list, dict, list, list, list]:
    """Every kept row: the tally, the response status, the labeling assignments' state, the responses ready
    for adjudication, the per-person label totals and the per-person assignment totals."""
    tally = sorted(tuple(row) for row in s.execute(select(*LabelTally.__table__.c)).all())
    status = sorted(tuple(row) for row in s.execute(select(*ResponseStatus.__table__.c)).all())
    states = {
        row[0]: tuple(row[1:])
        for row in s.execute(
            select(Assignment.id, Assignment.label_status, Assignment.labeled, Assignment.rubric_size).where(
                Assignment.kind == AssignmentKind.label
            )
        ).all()
    }
    unresolved = s.execute(
        text(
            "SELECT shard, n_decisions, n_responses FROM unresolved_totals"
            " WHERE n_decisions != 0 OR n_responses != 0 ORDER BY shard"
        )
    ).all()
    return (
        tally,
        status,
        states,
        recount.kept_ready(s),
        recount.kept_totals(s),
        counts.assignment_totals(s),
        [tuple(row) for row in unresolved],
    )


def assert_kept_equals_recount(engine) -> None:
    """The kept figures as committed equal a recount from every label, and a rebuild of every column."""
    with session_scope(engine, read_only=True) as s:
        assert recount.kept_tally(s) == recount.recount_tally(s)
        kept = [tuple(map(int, row)) for row in recount.kept_status(s).itertuples(index=False)]
        recounted = [tuple(map(int, row)) for row in recount.recount_status(s).itertuples(index=False)]
        assert kept == sorted(recounted)
        assert _kept_rows(s)[2] == _recounted_states(s)
        assert recount.kept_ready(s) == recount.recount_ready(s)
        assert recount.kept_totals(s) == recount.recount_totals(s)
        assert counts.assignment_totals(s) == _recounted_owner_totals(s)
        assert recount.kept_judge_totals(s) == recount.recount_judge_totals(s)
        assert counts.unresolved_figures(s) == recount.recount_unresolved_figures(s)
    # The columns no reader recounts (unchecked labels, gold figures) against a rebuild, rolled back after.
    with Session(engine) as s:
        before = _kept_rows(s)
        counts.rebuild_all(s)
        counts.rebuild_assignments(s)
        assert _kept_rows(s) == before
        s.rollback()


def _user(engine, username: str) -> User:
    with session_scope(engine, read_only=True) as s:
        user = s.execute(select(User).where(User.username == username)).scalar_one()
        s.expunge(user)
        return user


def _response_id(engine, case_id: str, model: str) -> int:
    from db.store.models import Case

    with session_scope(engine, read_only=True) as s:
        return s.execute(
            select(Response.id)
            .join(Case, Case.id == Response.case_pk)
            .where(Case.case_id == case_id, Response.model == model)
        ).scalar_one()


def _imports(engine, tmp_path) -> None:
    """The case, response and label importers."""
    cases = [case_record("CC-A", n=N), case_record("CC-B", n=N), case_record("CC-C", n=N, rubrics=[])]
    import_file(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", cases))
    assert_kept_equals_recount(engine)
    responses = [response_record(c, m) for c in ("CC-A", "CC-B", "CC-C") for m in ("model-a", "model-b")]
    import_file(engine, "responses", write_jsonl(tmp_path / "responses.jsonl", responses))
    assert_kept_equals_recount(engine)
    with session_scope(engine) as s:
        assignments.assign_labeling(s, actor=s.get(User, _user(engine, "admin").id), annotators=["ann1", "ann2"])
    assert_kept_equals_recount(engine)
    labels = [
        label_record(case, "model-b", criterion, i % 3 != 0, group=g, annotator=f"ann{g}")
        for case in ("CC-A", "CC-B")
        for g in (1, 2)
        for i, criterion in enumerate(CRITERIA)
    ] + [label_record("CC-A", "model-a", criterion, True, group=2, annotator="ann2") for criterion in CRITERIA]
    import_file(engine, "labels", write_jsonl(tmp_path / "labels.jsonl", labels))
    assert_kept_equals_recount(engine)


def _saves(engine, first: int) -> None:
    """The annotator's save, the checker's saves and adjudication on CC-A/model-a."""
    ann1 = _user(engine, "ann1")
    with session_scope(engine) as s:
        view = labeling.response_for_labeling(s, ann1, first)
        label_room.save(
            s,
            ann1,
            "annotation",
            first,
            **as_sent([labeling.LabelInput(c.criterion_id, i % 2 == 0) for i, c in enumerate(view.criteria)]),
            rubric_version_id=view.rubric_version_id,
            expected_versions=view.expected_versions,
        )
    assert_kept_equals_recount(engine)
    checker = _user(engine, "chk1")
    with session_scope(engine, read_only=True) as s:
        annotations = s.execute(
            select(Label.criterion_id, Label.met).where(
                Label.response_id == first, Label.group_no == 1, Label.stage == Stage.annotation
            )
        ).all()
    criterion_id, met = annotations[0]
    with session_scope(engine) as s:
        review.save_check(s, checker, response_id=first, criterion_id=criterion_id, met=met)
    assert_kept_equals_recount(engine)
    with session_scope(engine) as s:
        batch = [review.CheckInput(c, m) for c, m in annotations[1:]]
        assert review.save_checks(s, checker, response_id=first, decisions=batch) == len(batch)
    assert_kept_equals_recount(engine)
    adjudicator = _user(engine, "chk3")
    with session_scope(engine) as s:
        review.take_into_adjudication(s, adjudicator)
    with session_scope(engine) as s:
        open_cells = [c.criterion_id for c in review.adjudication_view(s, adjudicator, first).cells if c.unresolved]
    assert len(open_cells) >= 2
    with session_scope(engine, read_only=True) as s:
        decisions_before, responses_before = counts.unresolved_figures(s)
    assert decisions_before >= len(open_cells) and responses_before >= 1  # the checks below follow real moves
    with session_scope(engine) as s:
        review.adjudicate(s, adjudicator, response_id=first, criterion_id=open_cells[0], met=True, rationale="依据指南")
    assert_kept_equals_recount(engine)
    with session_scope(engine) as s:
        decisions = [review.AdjudicationInput(c, False, "依据指南") for c in open_cells[1:]]
        review.adjudicate_many(s, adjudicator, response_id=first, decisions=decisions)
    assert_kept_equals_recount(engine)
    with session_scope(engine, read_only=True) as s:
        assert counts.unresolved_figures(s) == (decisions_before - len(open_cells), responses_before - 1)


def _rubric_changes(engine, tmp_path, first: int) -> None:
    """A criterion sent back to its author, the revision approved, and a rubric renewed by import."""
    admin = _user(engine, "admin")
    with session_scope(engine, read_only=True) as s:
        case_a = s.execute(select(Response.case_pk).where(Response.id == first)).scalar_one()
        version_id = review.current_rubric_version_id(s, case_a)
    with session_scope(engine) as s:
        send_back_criteria(s, admin, "CC-A", {"c02": "请改写"}, seen_version_id=version_id, author="author")
    assert_kept_equals_recount(engine)
    author = _user(engine, "author")
    with session_scope(engine) as s:
        view = rubrics.authoring_view(s, author, case_a)
        inputs = [
            rubrics.CriterionInput(c.criterion_id, c.text + ("（改）" if c.criterion_id == "c02" else ""), [])
            for c in view.latest.criteria
        ]
        draft = rubrics.save_rubric_draft(
            s, author, case_a, inputs, base_version_id=view.latest.id, expected_lock=view.latest.lock_version
        )
        rubrics.submit_rubric(s, author, draft.id, expected_lock=draft.lock_version)
    assert_kept_equals_recount(engine)
    approver = _user(engine, "chk2")
    with session_scope(engine) as s:
        audit = review.rubric_for_review(s, approver, draft.id)
        review.approve_rubric(s, approver, draft.id, seen_lock_version=audit.lock_version)
    assert_kept_equals_recount(engine)
    with session_scope(engine, read_only=True) as s:
        states = {state for state, _, _ in _recounted_states(s).values()}
    assert "stale" in states  # the approval moved labels off the current rubric: the check above means something
    renewed = [
        case_record(
            "CC-B", n=N, rubrics=[{"criterion_id": c, "criterion": f"新 {c}", "tags": ["safety"]} for c in CRITERIA]
        )
    ]
    import_file(engine, "cases", write_jsonl(tmp_path / "cases2.jsonl", renewed))
    assert_kept_equals_recount(engine)


def _draws(engine, tmp_path) -> None:
    """The judge importer, then the disagreement and calibration draws, which assign new labeling work."""
    fresh = [response_record(c, m) for c in ("CC-A", "CC-B") for m in ("model-d", "model-e")]
    import_file(engine, "responses", write_jsonl(tmp_path / "responses2.jsonl", fresh))
    assert_kept_equals_recount(engine)
    decisions = [
        {
            "judge": judge,
            "case_id": case_id,
            "model": "model-d",
            "criterion_id": c,
            "met": judge == "judge-a" or i % 2 == 1,
        }
        for judge in ("judge-a", "judge-b")
        for case_id in ("CC-A", "CC-B")
        for i, c in enumerate(CRITERIA)
    ]
    import_file(engine, "judge", write_jsonl(tmp_path / "judge.jsonl", decisions))
    assert_kept_equals_recount(engine)
    with session_scope(engine) as s:
        drawn = draw_disagreements(s, actor=s.get(User, _user(engine, "admin").id), judges=["judge-a", "judge-b"])
        assert drawn.assignments.created > 0
    assert_kept_equals_recount(engine)
    with session_scope(engine) as s:
        draw = draw_calibration_sample(s, actor=s.get(User, _user(engine, "admin").id), model="model-e", n=2)
        assert draw.assignments.created > 0
    assert_kept_equals_recount(engine)


def _reassignments(engine) -> None:
    """Labeling assignments handed to another annotator of the group, a done one and one not done."""
    admin = _user(engine, "admin")
    with session_scope(engine) as s:
        make_user(s, "ann1b", "annotator", 1)
    with session_scope(engine, read_only=True) as s:
        mine = s.execute(
            select(Assignment.id, Assignment.label_status)
            .where(Assignment.kind == AssignmentKind.label, Assignment.group_no == 1)
            .order_by(Assignment.id)
        ).all()
    done = next(a for a, state in mine if state == counts.DONE)
    other = next(a for a, state in mine if state != counts.DONE)
    for assignment_id in (done, other):
        with session_scope(engine) as s:
            assignments.reassign(s, actor=s.get(User, admin.id), assignment_id=assignment_id, to_username="ann1b")
        assert_kept_equals_recount(engine)
    with session_scope(engine, read_only=True) as s:
        moved = [row for row in counts.assignment_totals(s) if row[0] == _user(engine, "ann1b").id]
    assert moved == [(_user(engine, "ann1b").id, 1, 2, 1)]


def test_the_kept_figures_equal_a_recount_after_every_writer(engine, tmp_path):
    with session_scope(engine) as s:
        make_user(s, "admin", "admin")
        for name, role, group in (
            ("ann1", "annotator", 1),
            ("ann2", "annotator", 2),
            ("author", "annotator", 2),
            ("chk1", "checker", 1),
            ("chk2", "checker", 2),
            ("chk3", "checker", 1),
        ):
            make_user(s, name, role, group)
    _imports(engine, tmp_path)
    first = _response_id(engine, "CC-A", "model-a")
    _saves(engine, first)
    _reassignments(engine)
    _rubric_changes(engine, tmp_path, first)
    _draws(engine, tmp_path)


ENGINE_ONLY = """
import sys
from sqlmodel import Session
import db.store.engine
session = Session()
hooks = [len(getattr(session.dispatch, name)) for name in ("before_flush", "before_commit", "after_rollback")]
print("db.counts" in sys.modules, sum(hooks))
"""


def test_the_engine_keeps_nothing_behind_the_writers_backs():
    """Opening the engine brings no db.counts and no session hook: what writes the kept figures is in plain sight."""
    result = subprocess.run([sys.executable, "-c", ENGINE_ONLY], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "False 0"
