"""The label check queue read in pages: every page, in order, is the whole queue, and the counts are a recount.

The page's picker reads only a stretch of the queue around the chosen response plus the queue's counts
(db.review.check_queue_window); here those stretches are set against the whole queue
(db.review.check_queue) and the queue itself against a plain-Python recount of the label rows, for
each mode (all, seeded sample, disagreement with a judge).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from sqlalchemy import select

from db import review
from db.rules.enums import Stage
from db.rules.errors import PermissionDenied, ValidationFailed
from db.store.engine import session_scope
from db.store.models import Case, JudgeDecision, Label, Response, User
from tests.support.factories import make_case, make_label, make_response, make_user

N_CRITERIA = 4
CASES = ("CC-0002", "CC-0001", "CC-0003")  # made out of order: the queue sorts by case id
MODES = [
    ("all", {}),
    ("sample", {"percent": 40, "seed": 5}),
    ("judge", {"judge": "judge-x"}),
]


def _world(engine) -> dict:
    rng = random.Random(17)
    with session_scope(engine) as s:
        annotator = make_user(s, "annotator1", "annotator", 1)
        other = make_user(s, "annotator2", "annotator", 1)
        checker = make_user(s, "checker1", "checker", 1)
        checker_b = make_user(s, "checker2", "checker", 1)
        far = make_user(s, "annotator9", "annotator", 2)
        codes = [f"R{n:03d}" for n in rng.sample(range(100, 999), 5 * len(CASES))]
        responses = []
        for case_id in CASES:
            case = make_case(s, case_id, n=N_CRITERIA)
            for m in range(5):
                response = make_response(s, case, f"model-{m}")
                response.code = codes.pop()  # codes in an order unlike the ids
                responses.append(response)
        s.flush()
        for i, response in enumerate(responses):
            # every seventh response from the fourth on is another annotator's: not in annotator1's queue
            labeler = other if i % 7 == 3 else annotator
            for c in range(1, N_CRITERIA + 1 - (i % 2)):  # some responses with fewer labels
                make_label(s, response, f"c{c:02d}", rng.random() < 0.5, labeler)
                make_label(s, response, f"c{c:02d}", rng.random() < 0.5, far)  # group 2: never counted here
                if rng.random() < 0.6:
                    make_label(s, response, f"c{c:02d}", True, checker_b, stage=Stage.check, group_no=1)
            if i % 3 != 1:
                for c in range(1, N_CRITERIA + 1):
                    s.add(
                        JudgeDecision(
                            judge="judge-x", response_id=response.id, criterion_id=f"c{c:02d}", met=c % 2 == 0
                        )
                    )
        s.flush()
        ids = {"annotator": annotator.id, "other": other.id, "checker": checker.id, "not_queued": responses[3].id}
    return ids


def _user(engine, user_id: int) -> User:
    with session_scope(engine, read_only=True) as s:
        user = s.get(User, user_id)
        s.expunge(user)
    return user


def _recount_all(engine, annotator_id: int, group: int) -> list[tuple[int, str, str, int, int]]:
    """(response_id, code, case_id, n_labels, n_checked) of the "all" queue, straight from the label rows."""
    with session_scope(engine, read_only=True) as s:
        labels = s.execute(select(Label.response_id, Label.stage, Label.group_no, Label.user_id)).all()
        keys = {
            rid: (case_id, code)
            for rid, code, case_id in s.execute(
                select(Response.id, Response.code, Case.case_id).join(Case, Case.id == Response.case_pk)
            ).all()
        }
    own = Counter(r for r, stage, g, u in labels if stage == Stage.annotation and g == group and u == annotator_id)
    checks = Counter(r for r, stage, g, _ in labels if stage == Stage.check and g == group)
    rows = [(rid, keys[rid][1], keys[rid][0], n, checks[rid]) for rid, n in own.items()]
    return sorted(rows, key=lambda row: (row[2], row[1]))


def test_pages_windows_and_counts_equal_the_whole_queue(engine):
    ids = _world(engine)
    checker = _user(engine, ids["checker"])
    annotator_id = ids["annotator"]
    expected_all = _recount_all(engine, annotator_id, 1)
    assert len(expected_all) == 13  # 15 responses, 2 of them another annotator's
    with session_scope(engine, read_only=True) as s:
        whole = {mode: review.check_queue(s, checker, annotator_id=annotator_id, mode=mode, **o) for mode, o in MODES}
        assert [(i.response_id, i.code, i.case_id, i.n_labels, i.n_checked) for i in whole["all"]] == expected_all
        assert 0 < len(whole["sample"]) < len(whole["all"]) and 0 < len(whole["judge"]) < len(whole["all"])
        fully = sum(1 for row in expected_all if row[4] >= row[3])
        assert 0 < fully < len(expected_all)  # the world has both kinds
        for mode, options in MODES:
            queue = whole[mode]
            for limit in (1, 2, 5, 100):
                pages, offset = [], 0
                while page := review.check_queue_page(
                    s,
                    checker,
                    annotator_id=annotator_id,
                    mode=mode,
                    offset=offset,
                    limit=limit,
                    **options,
                ):
                    assert len(page) <= limit
                    pages.extend(page)
                    offset += limit
                assert pages == queue, (mode, limit)
            recounted = (len(queue), sum(1 for i in queue if i.n_checked >= i.n_labels))
            counted = review.check_queue_counts(s, checker, annotator_id=annotator_id, mode=mode, **options)
            assert counted == recounted
            ids_in_queue = [i.response_id for i in queue]
            for around in [None, ids["not_queued"], *ids_in_queue]:
                position = ids_in_queue.index(around) if around in ids_in_queue else 0
                for before, after in ((0, 1), (2, 3), (20, 300)):
                    window = review.check_queue_window(
                        s,
                        checker,
                        annotator_id=annotator_id,
                        mode=mode,
                        around=around,
                        before=before,
                        after=after,
                        **options,
                    )
                    start = max(0, position - before)
                    assert window.items == queue[start : position + after], (mode, around, before, after)
                    assert (window.offset, window.position) == (start, position)
                    assert (window.total, window.checked) == recounted


def test_paging_keeps_the_rules(engine):
    ids = _world(engine)
    checker = _user(engine, ids["checker"])
    annotator = _user(engine, ids["annotator"])
    with session_scope(engine, read_only=True) as s:
        with pytest.raises(PermissionDenied):
            review.check_queue_page(s, annotator, annotator_id=ids["other"])
        with pytest.raises(PermissionDenied):
            review.check_queue_window(s, checker, annotator_id=checker.id, around=None, before=1, after=1)
        with pytest.raises(PermissionDenied):
            review.check_queue_counts(s, checker, annotator_id=checker.id)
        with pytest.raises(ValidationFailed):
            review.check_queue_page(s, checker, annotator_id=ids["annotator"], offset=-1)
        with pytest.raises(ValidationFailed):
            review.check_queue_window(s, checker, annotator_id=ids["annotator"], around=None, before=0, after=0)
        with pytest.raises(ValidationFailed):
            review.check_queue_window(
                s, checker, annotator_id=ids["annotator"], mode="judge", around=None, before=0, after=5
            )
        item = review.check_queue_page(s, checker, annotator_id=ids["annotator"], limit=1)[0]
        assert not any("model" in str(value) for value in vars(item).values())  # blinded: no model names
