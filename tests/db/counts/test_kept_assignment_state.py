"""The kept state of each labeling assignment (db.counts) equals a recount from the label rows, whatever changed.

The expected state is computed here from the rows themselves, reading docs/REFERENCE.md literally: a case's
current rubric is its newest approved version; an annotation label of the assignment's group counts only when
it was made on that version; a response is waiting (no approved rubric), stale (a label of
an older version), done (every criterion counted), partial or todo. The readers (the annotator's queue, the
sidebar's figures, the admin's progress page) must show exactly that, kept and recounted alike, after
imports, saves, checks, adjudication, a send-back and re-approval, an imported rubric, a new assignment and a
reassignment, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from sqlalchemy import select, update

from db import counts, labeling, labels as label_room, review, rubrics
from db.access import independence
from db.importers import import_file
from db.review.criterion_return import send_back_criteria
from db.rules import config
from db.rules.enums import AssignmentKind, RubricStatus, Stage
from db.store.engine import session_scope
from db.store.models import Assignment, Case, Criterion, Label, LabelTally, Response, RubricVersion, User
from db.work import assignments, progress as progress_queries
from tests.support.factories import make_response, make_user
from tests.support.import_samples import case_record, label_record, response_record, write_jsonl
from tests.support.page_save import as_sent

N = config.RUBRIC_SIZE
MODELS = ("model-a", "model-b", "model-c")


def recount(s) -> dict[int, tuple[str, int, int]]:
    """assignment id -> (state, labels that count, rubric size), straight from the rows."""
    newest: dict[int, tuple[int, int]] = {}
    for case_pk, version, version_id, status in s.execute(
        select(RubricVersion.case_pk, RubricVersion.version, RubricVersion.id, RubricVersion.status)
    ).all():
        if status == RubricStatus.approved and (case_pk not in newest or version > newest[case_pk][0]):
            newest[case_pk] = (version, version_id)
    size = Counter(s.execute(select(Criterion.rubric_version_id)).scalars())
    labels = defaultdict(list)
    for response_id, group_no, version_id in s.execute(
        select(Label.response_id, Label.group_no, Label.rubric_version_id).where(Label.stage == Stage.annotation)
    ).all():
        labels[(response_id, group_no)].append(version_id)
    out = {}
    for assignment_id, case_pk, response_id, group_no in s.execute(
        select(Assignment.id, Assignment.case_pk, Assignment.response_id, Assignment.group_no).where(
            Assignment.kind == AssignmentKind.label
        )
    ).all():
        current = newest.get(case_pk, (None, None))[1]
        made = labels[(response_id, group_no)]
        fresh = sum(1 for v in made if v is not None and v == current)
        stale = len(made) - fresh
        n = size[current] if current is not None else 0
        if current is None:
            state = "waiting"
        elif stale:
            state = "stale"
        elif fresh >= n:
            state = "done"
        else:
            state = "partial" if fresh else "todo"
        out[assignment_id] = (state, fresh, n)
    return out


def _current_versions(s) -> set[int]:
    newest: dict[int, tuple[int, int]] = {}
    for case_pk, version, version_id in s.execute(
        select(RubricVersion.case_pk, RubricVersion.version, RubricVersion.id).where(
            RubricVersion.status == RubricStatus.approved
        )
    ).all():
        if case_pk not in newest or version > newest[case_pk][0]:
            newest[case_pk] = (version, version_id)
    return {version_id for _, version_id in newest.values()}


def check_unchecked(s) -> None:
    """The tally's unchecked annotation labels (no check label on the same rubric version), and the checkers'
    "check pending" (of labels that count) and "annotated by" read from it, against the label rows."""
    rows = s.execute(
        select(
            Label.response_id, Label.criterion_id, Label.stage, Label.group_no, Label.user_id, Label.rubric_version_id
        )
    ).all()
    checked = {(r.response_id, r.criterion_id, r.group_no, r.rubric_version_id) for r in rows if r.stage == Stage.check}
    unchecked = [
        r
        for r in rows
        if r.stage == Stage.annotation
        and (r.response_id, r.criterion_id, r.group_no, r.rubric_version_id) not in checked
    ]
    expected = Counter((r.response_id, r.group_no, r.user_id) for r in unchecked)
    current = _current_versions(s)
    counting = {(r.response_id, r.group_no, r.user_id) for r in unchecked if r.rubric_version_id in current}
    kept_rows = Counter()
    for response_id, group_no, user_id, n in s.execute(
        select(LabelTally.response_id, LabelTally.group_no, LabelTally.user_id, LabelTally.n_unchecked).where(
            LabelTally.stage == Stage.annotation, LabelTally.n_unchecked > 0
        )
    ).all():
        kept_rows[(response_id, group_no, user_id)] += n
    assert kept_rows == expected
    for user in s.execute(select(User).where(User.role.in_(["checker", "annotator"]))).scalars():
        pending = {rid for (rid, g, uid) in counting if g == user.group_no and uid != user.id}
        annotated = {r.response_id for r in rows if r.user_id == user.id and r.stage == Stage.annotation}
        some = sorted({r.response_id for r in rows})[::2]
        assert independence.check_pending(s, user) == pending
        assert independence.check_pending(s, user, some) == pending & set(some)
        assert independence.annotated_by(s, user.id) == annotated
        assert independence.annotated_by(s, user.id, some) == annotated & set(some)


def check(engine, admin_id: int) -> dict[int, tuple[str, int, int]]:
    with session_scope(engine, read_only=True) as s:
        check_unchecked(s)
        expected = recount(s)
        kept_rows = {
            row[0]: tuple(row[1:])
            for row in s.execute(
                select(Assignment.id, Assignment.label_status, Assignment.labeled, Assignment.rubric_size).where(
                    Assignment.kind == AssignmentKind.label
                )
            ).all()
        }
        assert kept_rows == expected
        owners = dict(
            s.execute(select(Assignment.id, Assignment.user_id).where(Assignment.kind == AssignmentKind.label)).all()
        )
        responses = dict(
            s.execute(
                select(Assignment.id, Assignment.response_id).where(Assignment.kind == AssignmentKind.label)
            ).all()
        )
        admin = s.get(User, admin_id)
        per_user: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for assignment_id, (state, _, _) in expected.items():
            per_user[owners[assignment_id]][0] += 1
            per_user[owners[assignment_id]][1] += state == "done"
        names = dict(s.execute(select(User.id, User.username)).all())
        report = progress_queries.progress(s, actor=admin)
        shown = {p["username"]: (p["label_assigned"], p["label_done"]) for p in report.people}
        for user_id, (n, done) in per_user.items():
            assert shown[names[user_id]] == (n, done)
        assert report.overall["label_done"] == sum(d for _, d in per_user.values())
        for user_id, (n, done) in per_user.items():
            annotator = s.get(User, user_id)
            queue = labeling.labeling_queue(s, annotator)
            mine = {responses[a]: expected[a] for a in expected if owners[a] == user_id}
            assert {i.response_id: (i.status, i.labeled, i.size) for i in queue.items} == mine
            figures = progress_queries.my_progress(s, annotator)
            assert (figures["label_assigned"], figures["label_done"]) == (n, done) == (queue.total, queue.done)
    return expected


def _user(engine, user_id) -> User:
    with session_scope(engine, read_only=True) as s:
        user = s.get(User, user_id)
        s.expunge(user)
        return user


def test_assignment_state_equals_a_recount_after_every_change(engine, tmp_path):
    with session_scope(engine) as s:
        people = {
            "admin": make_user(s, "admin", "admin"),
            "ann1": make_user(s, "ann1", "annotator", 1),
            "ann1b": make_user(s, "ann1b", "annotator", 1),
            "ann2": make_user(s, "ann2", "annotator", 2),
            "author": make_user(s, "author", "annotator", 2),
            "chk1": make_user(s, "chk1", "checker", 1),
            "chk2": make_user(s, "chk2", "checker", 2),
            "chk3": make_user(s, "chk3", "checker", 1),
        }
        ids = {name: u.id for name, u in people.items()}
    cases = [case_record("CC-A", n=N), case_record("CC-B", n=N), case_record("CC-C", n=N, rubrics=[])]
    import_file(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", cases))
    import_file(
        engine,
        "responses",
        write_jsonl(tmp_path / "responses.jsonl", [response_record(c, m) for c in ("CC-A", "CC-B") for m in MODELS]),
    )
    admin = _user(engine, ids["admin"])
    with session_scope(engine) as s:
        assignments.assign_labeling(s, actor=admin, annotators=["ann1", "ann2"])  # Core insert
    states = check(engine, ids["admin"])
    assert {s for s, _, _ in states.values()} == {"todo"} and len(states) == 12

    with session_scope(engine, read_only=True) as s:
        r_a = sorted(s.execute(select(Response.id)).scalars())  # r_a[0]: CC-A's model-a, imported first
        g1_of_first = s.execute(
            select(Assignment.id).where(Assignment.response_id == r_a[0], Assignment.group_no == 1)
        ).scalar_one()
    # The annotator saves a whole response; another response gets part of its labels by import.
    ann1 = _user(engine, ids["ann1"])
    with session_scope(engine) as s:
        view = labeling.response_for_labeling(s, ann1, r_a[0])
        label_room.save(
            s,
            ann1,
            "annotation",
            r_a[0],
            **as_sent([labeling.LabelInput(c.criterion_id, i % 2 == 0) for i, c in enumerate(view.criteria)]),
            rubric_version_id=view.rubric_version_id,
            expected_versions=view.expected_versions,
        )
    partial = [label_record("CC-A", "model-b", f"c{i:02d}", True, group=2, annotator="ann2") for i in (1, 2)]
    whole = [
        label_record(case, model, f"c{i:02d}", i % 3 == 0, group=g, annotator=f"ann{g}")
        for case in ("CC-A", "CC-B")
        for model in ("model-a", "model-c")
        for g in (1, 2)
        for i in range(1, N + 1)
        if not (case == "CC-A" and model == "model-a" and g == 1)
    ]
    import_file(engine, "labels", write_jsonl(tmp_path / "labels.jsonl", partial + whole))
    states = check(engine, ids["admin"])
    assert Counter(s for s, _, _ in states.values()) == {"done": 8, "partial": 1, "todo": 3}

    # A checker of group 1 checks CC-A/model-a (disagreeing on c01), then adjudication.
    checker = _user(engine, ids["chk1"])
    with session_scope(engine, read_only=True) as s:
        annotations = s.execute(
            select(Label.criterion_id, Label.met).where(
                Label.response_id == r_a[0], Label.group_no == 1, Label.stage == Stage.annotation
            )
        ).all()
    with session_scope(engine) as s:
        for criterion_id, met in annotations:
            review.save_check(s, checker, response_id=r_a[0], criterion_id=criterion_id, met=met)
    check(engine, ids["admin"])
    adjudicator = _user(engine, ids["chk3"])
    with session_scope(engine) as s:
        review.take_into_adjudication(s, adjudicator)
    with session_scope(engine, read_only=True) as s:
        queue = review.adjudication_queue(s, adjudicator)
    assert r_a[0] in [item.response_id for item in queue]
    with session_scope(engine) as s:
        view = review.adjudication_view(s, adjudicator, r_a[0])
    with session_scope(engine) as s:
        review.adjudicate_many(
            s,
            adjudicator,
            response_id=r_a[0],
            decisions=[review.AdjudicationInput(c.criterion_id, True, "依据指南") for c in view.cells if c.unresolved],
        )
    check(engine, ids["admin"])

    # CC-A goes back to an author; while the new version is under way the old one stays current.
    with session_scope(engine, read_only=True) as s:
        case_a = s.execute(select(Response.case_pk).where(Response.id == r_a[0])).scalar_one()
        version_id = review.current_rubric_version_id(s, case_a)
    with session_scope(engine) as s:
        send_back_criteria(s, admin, "CC-A", {"c02": "请改写"}, seen_version_id=version_id, author="author")
    assert check(engine, ids["admin"]) == states
    author = _user(engine, ids["author"])
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
    assert check(engine, ids["admin"]) == states  # submitted, not approved: nothing changes yet
    with session_scope(engine) as s:
        audit = review.rubric_for_review(s, _user(engine, ids["chk2"]), draft.id)
        review.approve_rubric(s, _user(engine, ids["chk2"]), draft.id, seen_lock_version=audit.lock_version)
    states = check(engine, ids["admin"])
    assert states[g1_of_first] == ("stale", 0, N)  # saved on version 1 through the app

    # The annotator relabels on the new rubric: stale -> done for that response.
    with session_scope(engine) as s:
        view = labeling.response_for_labeling(s, ann1, r_a[0])
        label_room.save(
            s,
            ann1,
            "annotation",
            r_a[0],
            **as_sent([labeling.LabelInput(c.criterion_id, True) for c in view.criteria]),
            rubric_version_id=view.rubric_version_id,
            expected_versions=view.expected_versions,
        )
    assert check(engine, ids["admin"])[g1_of_first] == ("done", N, N)

    # An imported rubric renews CC-B (its labels were made on the old version) and gives CC-C its first one.
    renewed = [
        case_record(
            "CC-B", n=N, rubrics=[{"criterion_id": f"c{i:02d}", "criterion": f"新 {i}"} for i in range(1, N + 1)]
        ),
        case_record("CC-C", n=N),
    ]
    import_file(engine, "cases", write_jsonl(tmp_path / "cases2.jsonl", renewed))
    check(engine, ids["admin"])

    # A response of CC-C with an ORM-written assignment (refreshed by its writer), a Core assignment run, and a
    # reassignment.
    with session_scope(engine) as s:
        case = s.execute(select(Case).where(Case.case_id == "CC-C")).scalar_one()
        response = make_response(s, case, "model-z")
        response_id = response.id
        s.add(
            Assignment(
                kind=AssignmentKind.label,
                case_pk=case.id,
                response_id=response.id,
                user_id=ids["ann1b"],
                group_no=1,
            )
        )
        counts.refresh_assignments(s, [response_id])
    with session_scope(engine) as s:
        assignments.assign_labeling(s, actor=admin, annotators=["ann1", "ann1b", "ann2"])
    states = check(engine, ids["admin"])
    with session_scope(engine, read_only=True) as s:
        new = s.execute(select(Assignment.id).where(Assignment.response_id == response_id)).scalars().all()
    assert len(states) == 14 and sorted(states[a] for a in new) == [("todo", 0, N)] * 2  # its own and group 2's
    with session_scope(engine, read_only=True) as s:
        moved = (
            s.execute(
                select(Assignment.id).where(Assignment.user_id == ids["ann1"], Assignment.kind == AssignmentKind.label)
            )
            .scalars()
            .first()
        )
    with session_scope(engine) as s:
        assignments.reassign(s, actor=admin, assignment_id=moved, to_username="ann1b")
    assert check(engine, ids["admin"]) == states


def test_rebuild_fills_the_state_of_an_existing_database(engine, tmp_path):
    """What the migration does to a database that had assignments and labels before the state was kept."""
    with session_scope(engine) as s:
        admin = make_user(s, "admin", "admin")
        for name, group in (("ann1", 1), ("ann2", 2)):
            make_user(s, name, "annotator", group)
        admin_id = admin.id
    import_file(
        engine, "cases", write_jsonl(tmp_path / "c.jsonl", [case_record("CC-A", n=N), case_record("CC-B", n=N)])
    )
    import_file(
        engine,
        "responses",
        write_jsonl(tmp_path / "r.jsonl", [response_record(c, m) for c in ("CC-A", "CC-B") for m in MODELS]),
    )
    with session_scope(engine) as s:
        assignments.assign_labeling(s, actor=s.get(User, admin_id), annotators=["ann1", "ann2"])
    rows = [
        label_record("CC-A", m, f"c{i:02d}", True, group=g, annotator=f"ann{g}")
        for m in MODELS[:2]
        for g in (1, 2)
        for i in range(1, N + 1 if m == "model-a" else 3)
    ]
    import_file(engine, "labels", write_jsonl(tmp_path / "l.jsonl", rows))
    expected = check(engine, admin_id)
    with session_scope(engine) as s:
        s.execute(update(Assignment).values(label_status=None, labeled=0, rubric_size=0))
    with session_scope(engine) as s:
        counts.rebuild_assignments(s)
    assert check(engine, admin_id) == expected
    assert Counter(state for state, _, _ in expected.values()) == {"done": 2, "partial": 2, "todo": 8}
