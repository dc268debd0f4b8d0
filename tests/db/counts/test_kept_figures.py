"""Kept figures (db.counts) stay equal to a recount from every label, whatever path changed the labels.

The expected figures are computed here in plain Python from the label rows, following docs/REFERENCE.md §4
word by word (group final label = check else annotation; gold = adjudication, else agreement, else
single), independently of db.rules.gold's vectorised code. Labels change through every real writer:
the annotator's save, the checker's check, adjudication, label import and the test factories' rows (each
refreshing the figures as every writer must).
"""

from __future__ import annotations

import random
import threading
from collections import Counter, defaultdict

import pytest
from sqlalchemy import func, select, text

from db import counts, labeling, labels as label_room, review
from db.importers import import_file
from db.rules.enums import AssignmentKind, RubricStatus, Stage
from db.rules.errors import StaleEdit
from db.store.engine import session_scope
from db.store.models import Assignment, Label, Response, RubricVersion, User
from tests.support import recount
from tests.support.factories import make_case, make_label, make_response, make_user
from tests.support.import_samples import write_jsonl
from tests.support.page_save import as_sent


def expected_status(rows) -> dict[int, tuple[int, int, int, int]]:
    """response_id -> (n_compared, n_differing, n_unresolved, n_gold), straight from docs/REFERENCE.md §4."""
    cells: dict[tuple[int, str], dict] = defaultdict(dict)
    for response_id, criterion_id, stage, group_no, met in rows:
        cells[(response_id, criterion_id)][(stage, group_no)] = bool(met)
    out: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for (response_id, _), labels in cells.items():
        finals = {}
        for g in (1, 2):
            if ("check", g) in labels:
                finals[g] = labels[("check", g)]
            elif ("annotation", g) in labels:
                finals[g] = labels[("annotation", g)]
        adjudicated = ("adjudication", 0) in labels
        figures = out[response_id]
        both = 1 in finals and 2 in finals
        differ = both and finals[1] != finals[2]
        figures[0] += both
        figures[1] += differ
        figures[2] += differ and not adjudicated
        figures[3] += adjudicated or (both and not differ) or (len(finals) == 1)
    return {rid: tuple(v) for rid, v in out.items()}


def _newest_approved(s) -> dict[int, tuple[int, int]]:
    """case_pk -> (version, id) of its newest approved rubric version."""
    newest: dict[int, tuple[int, int]] = {}
    for case_pk, version, version_id in s.execute(
        select(RubricVersion.case_pk, RubricVersion.version, RubricVersion.id).where(
            RubricVersion.status == RubricStatus.approved
        )
    ).all():
        if case_pk not in newest or version > newest[case_pk][0]:
            newest[case_pk] = (version, version_id)
    return newest


def expected_totals(s) -> list[tuple]:
    """(group_no, stage, user_id, counts, responses, labels) per person, group, stage and whether the labels were
    made on their case's newest approved rubric, read plainly from the rows."""
    newest = _newest_approved(s)
    responses: dict[tuple, set] = {}
    for r in s.execute(
        select(
            Label.response_id, Label.group_no, Label.stage, Label.user_id, Label.rubric_version_id, Response.case_pk
        ).join(Response, Response.id == Label.response_id)
    ).all():
        counting = r.rubric_version_id is not None and r.rubric_version_id == newest.get(r.case_pk, (0, None))[1]
        responses.setdefault((r.group_no, str(r.stage), r.user_id, counting), []).append(r.response_id)
    return sorted((*key, len(set(ids)), len(ids)) for key, ids in responses.items())


def counting_label_rows(s) -> list[tuple]:
    """(response_id, criterion_id, stage, group_no, met) of the labels made on their case's newest approved
    rubric version (docs/REFERENCE.md §4, "Labels that count"), read plainly from the rows."""
    newest = _newest_approved(s)
    rows = s.execute(
        select(
            Label.response_id,
            Label.criterion_id,
            Label.stage,
            Label.group_no,
            Label.met,
            Label.rubric_version_id,
            Response.case_pk,
        ).join(Response, Response.id == Label.response_id)
    ).all()
    return [tuple(row[:5]) for row in rows if row[5] is not None and row[5] == newest.get(row[6], (0, None))[1]]


def assert_kept_matches_labels(engine) -> dict:
    with session_scope(engine, read_only=True) as s:
        rows = counting_label_rows(s)
        tally = Counter(
            (r.response_id, r.group_no, r.stage, r.user_id, r.rubric_version_id or 0)
            for r in s.execute(
                select(Label.response_id, Label.group_no, Label.stage, Label.user_id, Label.rubric_version_id)
            ).all()
        )
        status = {int(row[0]): tuple(int(v) for v in row[1:]) for row in recount.kept_status(s).itertuples(index=False)}
        assert recount.kept_tally(s) == sorted((*key, n) for key, n in tally.items())
        assert recount.kept_totals(s) == expected_totals(s)
        expected = expected_status(rows)
        assert status == expected
        assert review.unresolved_count(s) == sum(v[2] for v in expected.values())
        # The admins' sidebar: those decisions and the responses holding them.
        open_ones = (sum(v[2] for v in expected.values()), sum(1 for v in expected.values() if v[2]))
        kept = review.all_open_disagreements(s)
        assert (kept.decisions, kept.responses) == open_ones
        assert recount.recount_unresolved_figures(s) == open_ones
    return expected


def _world(s, n_responses=6, n_criteria=5):
    people = {(role, g): make_user(s, f"{role}{g}", role, g) for role in ("annotator", "checker") for g in (1, 2)}
    people[("checker", 3)] = make_user(s, "checker3", "checker", 1)
    case = make_case(s, "CC-KEPT", n=n_criteria)
    responses = [make_response(s, case, f"model-{m}") for m in range(n_responses)]
    for response in responses:
        for g in (1, 2):
            s.add(
                Assignment(
                    kind=AssignmentKind.label,
                    case_pk=case.id,
                    response_id=response.id,
                    user_id=people[("annotator", g)].id,
                    group_no=g,
                )
            )
    counts.refresh_assignments(s, [r.id for r in responses])
    return people, case, [r.id for r in responses]


def test_every_writer_keeps_the_figures_equal_to_a_recount(engine, tmp_path):
    rng = random.Random(13)
    with session_scope(engine) as s:
        people, case, response_ids = _world(s)
        ids = {key: u.id for key, u in people.items()}
    criteria = [f"c{i:02d}" for i in range(1, 6)]

    def who(key) -> User:
        with session_scope(engine, read_only=True) as s:
            user = s.get(User, ids[key])
            s.expunge(user)
            return user

    # Annotators of both groups save whole responses through the labeling page's save.
    for rid in response_ids[:5]:
        for g in (1, 2):
            annotator = who(("annotator", g))
            with session_scope(engine) as s:
                view = labeling.response_for_labeling(s, annotator, rid)
                decisions = [labeling.LabelInput(c, rng.random() < 0.5) for c in criteria]
                label_room.save(
                    s,
                    annotator,
                    "annotation",
                    rid,
                    **as_sent(decisions),
                    rubric_version_id=view.rubric_version_id,
                    expected_versions=view.expected_versions,
                )
    before = assert_kept_matches_labels(engine)
    assert sum(v[2] for v in before.values()) > 0  # there is something to resolve

    # A checker corrects a label of their group: finals change, and with them the disagreements.
    checker = who(("checker", 1))
    with session_scope(engine, read_only=True) as s:
        annotation = s.execute(
            select(Label).where(
                Label.response_id == response_ids[0],
                Label.group_no == 1,
                Label.criterion_id == "c01",
                Label.stage == Stage.annotation,
            )
        ).scalar_one()
        met = annotation.met
    with session_scope(engine) as s:
        review.save_check(s, checker, response_id=response_ids[0], criterion_id="c01", met=not met, note="更正")
    assert_kept_matches_labels(engine)

    # Group 1 finishes checking a response with open disagreements (confirming every label), then
    # another checker of group 1 adjudicates every open cell of it.
    with session_scope(engine, read_only=True) as s:
        open_ids = [f.response_id for f in counts.responses_with_unresolved(s) if f.response_id != response_ids[0]]
        annotations = s.execute(
            select(Label.criterion_id, Label.met).where(
                Label.response_id == open_ids[0], Label.group_no == 1, Label.stage == Stage.annotation
            )
        ).all()
    with session_scope(engine) as s:
        for criterion_id, confirmed in annotations:
            review.save_check(s, checker, response_id=open_ids[0], criterion_id=criterion_id, met=confirmed)
    expected = assert_kept_matches_labels(engine)
    adjudicator = who(("checker", 3))
    with session_scope(engine) as s:
        review.take_into_adjudication(s, adjudicator)
    with session_scope(engine, read_only=True) as s:
        queue = review.adjudication_queue(s, adjudicator)
        assert review.my_unresolved_count(s, adjudicator) == expected[open_ids[0]][2] > 0
    assert [item.response_id for item in queue] == [open_ids[0]], "the queue lists what the checker may adjudicate"
    assert (queue[0].n_unresolved, queue[0].n_compared) == (expected[open_ids[0]][2], expected[open_ids[0]][0])
    target = queue[0]
    with session_scope(engine) as s:
        view = review.adjudication_view(s, adjudicator, target.response_id)
    with session_scope(engine) as s:
        review.adjudicate_many(
            s,
            adjudicator,
            response_id=target.response_id,
            decisions=[
                review.AdjudicationInput(cell.criterion_id, True, "依据指南") for cell in view.cells if cell.unresolved
            ],
        )
    expected = assert_kept_matches_labels(engine)
    assert expected[target.response_id][2] == 0
    with session_scope(engine, read_only=True) as s:
        assert target.response_id not in [i.response_id for i in review.adjudication_queue(s, adjudicator)]

    # A refused save (stale) leaves the figures as they were.
    with session_scope(engine, read_only=True) as s:
        view = review.check_view(s, checker, response_ids[0])
    with pytest.raises(StaleEdit), session_scope(engine) as s:
        review.save_check(
            s, checker, response_id=response_ids[0], criterion_id="c01", met=met, note="再改", seen_lock_version=None
        )
    assert_kept_matches_labels(engine)

    # Imported labels (new rows and replacements) land in the figures in the same transaction.
    with session_scope(engine, read_only=True) as s:
        models = dict(s.execute(select(Response.id, Response.model)).all())
    rows = [
        {
            "case_id": "CC-KEPT",
            "model": models[rid],
            "criterion_id": c,
            "met": rng.random() < 0.5,
            "stage": "annotation",
            "group": g,
            "annotator": f"annotator{g}",
        }
        for rid in response_ids[4:]
        for c in criteria
        for g in (1, 2)
    ]
    import_file(engine, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert_kept_matches_labels(engine)

    # A label the test factory writes as an ORM row, refreshing the figures as any writer must.
    with session_scope(engine) as s:
        response = s.get(Response, response_ids[5])
        make_label(s, response, "c05", True, s.get(User, ids[("checker", 2)]), stage=Stage.check, group_no=2)
    assert_kept_matches_labels(engine)


def test_the_check_queue_and_annotator_list_read_the_kept_tally_like_a_recount(engine):
    rng = random.Random(3)
    with session_scope(engine) as s:
        people, case, response_ids = _world(s, n_responses=8)
        for rid in response_ids:
            response = s.get(Response, rid)
            for c in range(1, 6):
                for g in (1, 2):
                    make_label(s, response, f"c{c:02d}", rng.random() < 0.5, people[("annotator", g)])
                if rng.random() < 0.4:
                    make_label(s, response, f"c{c:02d}", True, people[("checker", 3)], stage=Stage.check, group_no=1)
        n_checks = s.execute(select(func.count()).select_from(Label).where(Label.stage == Stage.check)).scalar_one()
        checker = people[("checker", 1)]
        annotator_id = people[("annotator", 1)].id
        s.expunge_all()
    with session_scope(engine, read_only=True) as s:
        kept_people = review.check_annotators(s, checker)
        kept_queue = review.check_queue(s, checker, annotator_id=annotator_id)
        checks_per_response = Counter(
            s.execute(select(Label.response_id).where(Label.stage == Stage.check, Label.group_no == 1)).scalars()
        )
        assert review.adjudication_queue(s, checker) == []  # nothing taken into adjudication yet
        unresolved_total = review.unresolved_count(s)
    assert [(p.username, p.n_responses, p.n_labels) for p in kept_people] == [("annotator1", 8, 40)]
    assert [(i.response_id, i.n_labels, i.n_checked) for i in kept_queue] == [
        (rid, 5, checks_per_response[rid]) for rid in response_ids
    ]
    assert sum(item.n_checked for item in kept_queue) == n_checks > 0
    expected = assert_kept_matches_labels(engine)
    assert unresolved_total == sum(v[2] for v in expected.values())


def test_labels_written_behind_the_kept_figures_get_them_from_a_rebuild(engine):
    """Labels written without the kept tables (Core inserts mark nothing, as in a database older than them)
    get their figures from the rebuild the kept figures' migration runs."""
    with session_scope(engine) as s:
        people, case, response_ids = _world(s, n_responses=3)
        user_ids = {g: people[("annotator", g)].id for g in (1, 2)}
        created = case.created_at
        version_id = s.execute(select(RubricVersion.id).where(RubricVersion.case_pk == case.id)).scalar_one()
    rng = random.Random(7)
    with engine.begin() as connection:
        for rid in response_ids:
            for c in range(1, 6):
                for g in (1, 2):
                    connection.execute(
                        Label.__table__.insert().values(
                            response_id=rid,
                            criterion_id=f"c{c:02d}",
                            stage="annotation",
                            group_no=g,
                            met=rng.random() < 0.5,
                            user_id=user_ids[g],
                            lock_version=1,
                            created_at=created,
                            updated_at=created,
                            rubric_version_id=version_id,
                        )
                    )
    with session_scope(engine, read_only=True) as s:
        assert recount.kept_tally(s) == [] and recount.kept_status(s).empty
    with engine.begin() as connection:
        counts.rebuild_all(connection)
    expected = assert_kept_matches_labels(engine)
    assert len(expected) == 3


def test_simultaneous_saves_on_one_response_leave_exact_figures(engine):
    """Two checkers of different groups save checks on the same response at the same moment."""
    with session_scope(engine) as s:
        people, case, response_ids = _world(s, n_responses=1)
        rid = response_ids[0]
        response = s.get(Response, rid)
        for c in range(1, 6):
            make_label(s, response, f"c{c:02d}", True, people[("annotator", 1)])
            make_label(s, response, f"c{c:02d}", True, people[("annotator", 2)])
        checkers = [people[("checker", 1)], people[("checker", 2)]]
        s.expunge_all()
    barrier = threading.Barrier(2)
    errors = []

    def work(checker):
        try:
            for c in range(1, 6):
                barrier.wait(timeout=30)
                with session_scope(engine) as s:
                    review.save_check(
                        s,
                        checker,
                        response_id=rid,
                        criterion_id=f"c{c:02d}",
                        met=c % 2 == 0,
                        note=None if c % 2 == 0 else "不符合",
                    )
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(checker,)) for checker in checkers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    expected = assert_kept_matches_labels(engine)
    assert expected[rid] == (5, 0, 0, 5)
    with engine.connect() as connection:
        assert connection.execute(text("select count(*) from label where stage = 'check'")).scalar_one() == 10


def test_report_json_is_the_same_with_and_without_kept_figures(engine):
    """The report reads labels, never kept figures: its JSON is byte-identical when the kept tables are
    emptied and rebuilt, and its pending count equals the kept one."""
    import json

    from sqlmodel import Session

    from analysis.loader import load_frames
    from analysis.report import build_report, report_json
    from tests.analysis.test_report import populate_small_database

    with Session(engine) as session:
        populate_small_database(session)
        session.commit()

    def report_text() -> str:
        report = build_report(load_frames(engine), 2, "gold", resamples=50)
        return json.dumps(report_json(report), ensure_ascii=False, sort_keys=True, allow_nan=False)

    before = report_text()
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM label_tally"))
        connection.execute(text("DELETE FROM response_status"))
    without_kept = report_text()
    with engine.begin() as connection:
        counts.rebuild_all(connection)
    assert report_text() == without_kept == before
    expected = assert_kept_matches_labels(engine)
    pending = json.loads(before)["pending"]["unresolved_disagreements"]
    assert pending == sum(v[2] for v in expected.values()) == 1
