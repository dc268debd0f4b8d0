"""No figure leaks a label (docs/REFERENCE.md §1), tried as a property on both databases.

For a checker and an annotator of each group: collect everything the db/ functions behind their pages
return (sidebar and home figures, check queues in every mode with their counts, pages and windows, the
adjudication queue and what may be taken into it, the labeling queue, every response view, feedback),
change one of their own still-open labels through the real save function, collect again: the only
difference allowed is the label itself. And the other way round: a label of the other group changed on
a response still open to them changes nothing they receive.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import pytest
from sqlmodel import select

from db import counts, labeling, labels as label_room, review
from db.access import independence
from db.labeling.annotation import LabelInput
from db.rules.enums import Stage
from db.rules.errors import PermissionDenied
from db.store.engine import session_scope
from db.store.models import Assignment, JudgeDecision, Label, Response, RubricVersion, User, utcnow
from db.work import feedback, progress as progress_queries
from tests.support.apptest_helpers import open_page, signed_in, texts
from tests.support.factories import make_case, make_label, make_response, make_user
from tests.support.page_save import as_sent

N = 4
JUDGE = "judge-x"
MODELS = ("model-alpha", "model-beta", "model-gamma")
MASK = "own label"


def _met(group: int, response_no: int, position: int) -> bool:
    """The two groups disagree on some criteria of every response, on different ones per response."""
    group_1 = (response_no + position) % 2 == 0
    differs = position <= 2 + response_no % 2
    return group_1 if group == 1 or not differs else not group_1


def _assign(session, user: User, response, created_at) -> None:
    session.add(
        Assignment(
            kind="label",
            case_pk=response.case_pk,
            user_id=user.id,
            group_no=user.group_no,
            response_id=response.id,
            created_at=created_at,
        )
    )
    counts.refresh_assignments(session, [response.id])


def _check(session, checker: User, response, positions) -> None:
    """The checker confirms their group's annotation labels at `positions`."""
    rows = {row.position: row for row in review.check_view(session, checker, response.id).rows}
    for position in positions:
        row = rows[position]
        review.save_check(
            session, checker, response_id=response.id, criterion_id=row.criterion_id, met=row.annotation.met
        )


def build_studio(engine):
    """Two cases; case 2's labeling round came first and its feedback is open (its annotation labels are final).

    Every response is labeled by both groups. Group 1's checker chk1 checked four responses fully and one
    partly, and took the first into adjudication; group 2's checker chk2 checked three fully and one partly,
    and took two in; chk2b checked a response of case 2 for group 2 and adjudicated two of its cells. A judge
    graded every response.
    """
    earlier, later = utcnow() - timedelta(days=2), utcnow() - timedelta(days=1)
    with session_scope(engine) as s:
        people = {
            name: make_user(s, name, role, group)
            for name, role, group in (
                ("boss", "admin", None),
                ("ann1", "annotator", 1),
                ("ann2", "annotator", 2),
                ("chk1", "checker", 1),
                ("chk2", "checker", 2),
                ("chk2b", "checker", 2),
                ("chk1x", "checker", 1),  # never takes anything in: may correct any check of group 1
                ("chk2x", "checker", 2),
            )
        }
        responses = []
        for case_no, created_at in ((1, later), (2, earlier)):
            case = make_case(s, f"CC-000{case_no}", n=N)
            for model in MODELS:
                response = make_response(s, case, model, f"{case.case_id} 的回答 {model[-1]}")
                responses.append(response)
                for user in (people["ann1"], people["ann2"]):
                    _assign(s, user, response, created_at)
        rubric_of = dict(s.exec(select(RubricVersion.case_pk, RubricVersion.id)).all())
        for number, response in enumerate(responses):
            for position in range(1, N + 1):
                cid = f"c{position:02d}"
                for group, annotator in ((1, people["ann1"]), (2, people["ann2"])):
                    label = make_label(s, response, cid, _met(group, number, position), annotator)
                    label.rubric_version_id = rubric_of[response.case_pk]  # as the labeling page stamps it
                s.add(JudgeDecision(judge=JUDGE, response_id=response.id, criterion_id=cid, met=position % 2 == 0))
        ids = [r.id for r in responses]
    everyone = {name: user.id for name, user in people.items()}
    with session_scope(engine) as s:
        chk1, chk2 = s.get(User, everyone["chk1"]), s.get(User, everyone["chk2"])
        by_id = {r: s.get(Response, r) for r in ids}
        for response_id in ids[:4]:
            _check(s, chk1, by_id[response_id], range(1, N + 1))
        _check(s, chk1, by_id[ids[4]], [1])
        for response_id in ids[:3]:
            _check(s, chk2, by_id[response_id], range(1, N + 1))
        _check(s, chk2, by_id[ids[3]], [1, 2])
    with session_scope(engine) as s:
        assert review.take_into_adjudication(s, s.get(User, everyone["chk1"]), limit=1) == 1
        assert review.take_into_adjudication(s, s.get(User, everyone["chk2"]), limit=2) == 2
        _check(s, s.get(User, everyone["chk2b"]), by_id[ids[4]], range(1, N + 1))
    with session_scope(engine) as s:
        # Gold of case 2 against each annotator: c01 decided for group 1, c02 for group 2.
        chk2b = s.get(User, everyone["chk2b"])
        assert ids[4] in review.ready_for_adjudication(s, chk2b)
        review.take_into_adjudication(s, chk2b)
        for position, group in ((1, 1), (2, 2)):
            review.adjudicate(
                s, chk2b, response_id=ids[4], criterion_id=f"c{position:02d}", met=_met(group, 4, position),
                rationale="依据原文",
            )  # fmt: skip
    with session_scope(engine) as s:
        round_at = s.exec(select(Assignment.created_at).order_by(Assignment.created_at)).first()
        feedback.set_feedback_open(s, actor=s.get(User, everyone["boss"]), round_at=round_at, is_open=True)
    return engine, everyone, ids


@pytest.fixture
def studio(engine):
    return build_studio(engine)


def _person(engine, user_id: int) -> User:
    with session_scope(engine, read_only=True) as s:
        return s.get(User, user_id)


# What a checker receives ----------------------------------------------------------------------

QUEUE_MODES = (
    dict(mode=review.CHECK_ALL),
    dict(mode=review.CHECK_SAMPLE, percent=50.0, seed=3),
    dict(mode=review.CHECK_JUDGE, judge=JUDGE),
)


def _masked_check_view(view: review.CheckView, own: tuple[int, str] | None) -> review.CheckView:
    rows = [
        dataclasses.replace(row, check=MASK) if own == (view.response_id, row.criterion_id) else row
        for row in view.rows
    ]
    return dataclasses.replace(view, rows=rows)


def checker_receives(s, checker: User, own: tuple[int, str] | None = None) -> dict:
    """Everything the checker's pages read from db/, with their own label at `own` (response, criterion) masked."""
    seen: dict = {
        "sidebar": progress_queries.unresolved_disagreement_count(s, checker),
        "home": progress_queries.my_progress(s, checker),
        "rubrics": review.rubric_queue(s, checker),
        "annotators": review.check_annotators(s, checker),
        "ready": review.ready_for_adjudication(s, checker),
        "adjudication": review.adjudication_queue(s, checker),
        "judges": review.judge_names(s),
    }
    for annotator in seen["annotators"]:
        for options in QUEUE_MODES:
            key = (annotator.user_id, options["mode"])
            queue = review.check_queue(s, checker, annotator_id=annotator.user_id, **options)
            seen[("queue", *key)] = queue
            seen[("counts", *key)] = review.check_queue_counts(s, checker, annotator_id=annotator.user_id, **options)
            seen[("page", *key)] = review.check_queue_page(
                s, checker, annotator_id=annotator.user_id, offset=1, limit=2, **options
            )
            for item in queue:
                seen[("window", *key, item.response_id)] = review.check_queue_window(
                    s, checker, annotator_id=annotator.user_id, around=item.response_id, before=1, after=2, **options
                )
                seen[("view", item.response_id)] = _masked_check_view(
                    review.check_view(s, checker, item.response_id), own
                )
    closed = independence.opened_by(s, checker.id)
    for item in seen["adjudication"]:
        assert item.response_id in closed  # listed only once closed to them: viewing it closes nothing new
        seen[("adjudication view", item.response_id)] = review.adjudication_view(s, checker, item.response_id)
    return seen


def open_checks(s, checker: User) -> list[tuple[int, str]]:
    """(response, criterion) of the checker's group's check labels still open to them (not taken in, not opened)."""
    closed = set(independence.opened_by(s, checker.id))
    rows = s.exec(
        select(Label.response_id, Label.criterion_id).where(
            Label.stage == Stage.check, Label.group_no == checker.group_no
        )
    ).all()
    return sorted((rid, cid) for rid, cid in rows if rid not in closed)


def _flip_check(engine, checker: User, response_id: int, criterion_id: str) -> None:
    with session_scope(engine) as s:
        view = review.check_view(s, checker, response_id)
        (row,) = [row for row in view.rows if row.criterion_id == criterion_id]
        review.save_check(
            s,
            checker,
            response_id=response_id,
            criterion_id=criterion_id,
            met=not row.check.met,
            note="核对原文后更正",
            seen_lock_version=row.check.lock_version,
        )


def one_per_response(targets: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """One (response, criterion) of each response, a different criterion from one response to the next."""
    by_response: dict[int, list[str]] = {}
    for response_id, criterion_id in targets:
        by_response.setdefault(response_id, []).append(criterion_id)
    return [(rid, cids[number % len(cids)]) for number, (rid, cids) in enumerate(sorted(by_response.items()))]


def _differences(before: dict, after: dict) -> list:
    return sorted(str(key) for key in before.keys() | after.keys() if before.get(key) != after.get(key))


@pytest.mark.parametrize("name", ["chk1", "chk2"])
def test_a_checker_flipping_an_open_check_label_sees_nothing_else_change(studio, name):
    engine, everyone, _ = studio
    checker = _person(engine, everyone[name])
    with session_scope(engine, read_only=True) as s:
        targets = open_checks(s, checker)
        assert len(targets) > N and checker_receives(s, checker)["adjudication"]  # something to leak, and a queue
    for response_id, criterion_id in one_per_response(targets):
        own = (response_id, criterion_id)
        with session_scope(engine, read_only=True) as s:
            before = checker_receives(s, checker, own)
        _flip_check(engine, checker, response_id, criterion_id)
        with session_scope(engine, read_only=True) as s:
            after = checker_receives(s, checker, own)
            shown = {row.criterion_id: row.check for row in review.check_view(s, checker, response_id).rows}
        assert _differences(before, after) == [], own
        assert shown[criterion_id].note == "核对原文后更正"  # the flip itself went through


@pytest.mark.parametrize("name", ["chk1", "chk2"])
def test_the_other_group_changing_labels_on_an_open_response_changes_nothing_a_checker_receives(studio, name):
    """The rule itself: what a checker receives depends on the other group's labels only where theirs are closed."""
    engine, everyone, ids = studio
    checker = _person(engine, everyone[name])
    other = 2 if checker.group_no == 1 else 1
    with session_scope(engine, read_only=True) as s:
        closed = set(independence.opened_by(s, checker.id))
        before = checker_receives(s, checker)
    flipped = 0
    # Case 1's responses (case 2's annotation labels are final: its feedback is open).
    for response_id in [rid for rid in ids[:3] if rid not in closed]:
        for criterion_id in ("c01", "c02", "c03"):
            _flip_final_label(engine, everyone, other, response_id, criterion_id)
            flipped += 1
    with session_scope(engine, read_only=True) as s:
        assert _differences(before, checker_receives(s, checker)) == [], flipped
        assert checker_receives(s, checker)["adjudication"]  # still a queue: the closed responses'


def _flip_final_label(engine, everyone: dict, group: int, response_id: int, criterion_id: str) -> None:
    """Flips group `group`'s final label (its check label if any, else the annotation label) of one decision."""
    with session_scope(engine, read_only=True) as s:
        checked = s.exec(
            select(Label.id).where(
                Label.response_id == response_id,
                Label.criterion_id == criterion_id,
                Label.group_no == group,
                Label.stage == Stage.check,
            )
        ).first()
    if checked is not None:
        _flip_check(engine, _person(engine, everyone[f"chk{group}x"]), response_id, criterion_id)
    else:
        _flip_annotation(engine, _person(engine, everyone[f"ann{group}"]), response_id, criterion_id)


# What an annotator receives ---------------------------------------------------------------------


def _masked_labeling_view(view: labeling.LabelingView, own: tuple[int, str] | None) -> labeling.LabelingView:
    if own is None or own[0] != view.response_id:
        return view
    return dataclasses.replace(view, labels={**view.labels, own[1]: MASK})


def annotator_receives(s, annotator: User, own: tuple[int, str] | None = None) -> dict:
    queue = labeling.labeling_queue(s, annotator)
    seen: dict = {
        "home": progress_queries.my_progress(s, annotator),
        "queue": queue,
        "feedback rounds": feedback.open_round_count(s, annotator),
        "feedback": feedback.my_feedback(s, annotator),
    }
    with pytest.raises(PermissionDenied):
        progress_queries.unresolved_disagreement_count(s, annotator)
    for item in queue.items:
        seen[("view", item.response_id)] = _masked_labeling_view(
            labeling.response_for_labeling(s, annotator, item.response_id), own
        )
    return seen


def _flip_annotation(engine, annotator: User, response_id: int, criterion_id: str) -> None:
    with session_scope(engine) as s:
        view = labeling.response_for_labeling(s, annotator, response_id)
        decisions = [
            LabelInput(c, (not label.met) if c == criterion_id else label.met, label.note)
            for c, label in view.labels.items()
        ]
        label_room.save(
            s,
            annotator,
            "annotation",
            response_id,
            **as_sent(decisions),
            rubric_version_id=view.rubric_version_id,
            expected_versions=view.expected_versions,
        )


@pytest.mark.parametrize("name", ["ann1", "ann2"])
def test_an_annotator_flipping_an_open_label_sees_nothing_else_change(studio, name):
    engine, everyone, ids = studio
    annotator = _person(engine, everyone[name])
    with session_scope(engine, read_only=True) as s:
        shown = annotator_receives(s, annotator)["feedback"]
        # The open round shows its responses: compared with gold where final, else counted as provisional.
        assert shown.total_responses + shown.provisional_responses
    # Case 1's round is still open to them (case 2's feedback is open: its annotation labels are final).
    for number, response_id in enumerate(ids[:3]):
        own = (response_id, f"c{number % N + 1:02d}")
        with session_scope(engine, read_only=True) as s:
            before = annotator_receives(s, annotator, own)
        _flip_annotation(engine, annotator, *own)
        with session_scope(engine, read_only=True) as s:
            after = annotator_receives(s, annotator, own)
        assert _differences(before, after) == [], own


# The pages themselves -------------------------------------------------------------------------


def _page_seen(app) -> tuple:
    """The sidebar's metrics and words, the page's words, its pickers' options and the workbench's data."""
    sidebar = [(m.label, m.value) for m in app.sidebar.get("metric")] + [c.value for c in app.sidebar.caption]
    pickers = [(box.label, box.options, box.value) for box in app.selectbox]
    workbenches = [
        {name: value for name, value in json.loads(e.proto.json).items() if name != "token"}  # new per load
        for e in app.get("bidi_component")
        if (e.key or "").startswith("wb_")
    ]
    return sidebar, texts(app), pickers, [(n.label, n.value, n.max) for n in app.number_input], workbenches


@pytest.fixture
def app_studio(app_database):
    """`studio` on the app's own database, for AppTest."""
    return build_studio(app_database)


def test_the_checker_pages_show_nothing_new_after_a_flip_of_an_open_label(app_studio):
    engine, everyone, ids = app_studio
    checker = _person(engine, everyone["chk1"])

    def seen():
        app = signed_in(engine, "chk1")
        return [_page_seen(open_page(app, url)) for url in ("home", "review-adjudication")]

    before = seen()
    assert before[1][2], "the adjudication page lists the response chk1 took in"
    with session_scope(engine, read_only=True) as s:
        targets = open_checks(s, checker)
    for response_id, criterion_id in one_per_response(targets)[:3]:
        _flip_check(engine, checker, response_id, criterion_id)
        assert seen() == before, (response_id, criterion_id)
