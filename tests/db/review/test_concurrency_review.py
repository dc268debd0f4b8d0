"""Two (or eight) checkers on the same item: no save is lost, every refused save is a StaleEdit.

Workers are threads and processes, against a real PostgreSQL server and a SQLite file. Each worker
repeatedly reads a shared adjudication decision and saves it with the revision it saw, its rationale
holding a counter it increments; a refused save re-reads and retries. The first save of all is an
insert race (nobody has seen a row), caught by the unique constraint. At the end the counter and
the revision account for every successful save, and the audit chain is intact.
"""

from __future__ import annotations

import multiprocessing
import threading
import traceback

import pytest
from sqlmodel import select

from db import review
from db.access.audit import verify_chain
from db.label_rows import write as label_write
from db.rules.enums import RubricStatus, Stage
from db.rules.errors import StaleEdit
from db.store.engine import make_engine, session_scope
from db.store.models import AuditLog, Label, RubricVersion, User
from tests.support.factories import make_case, make_label, make_response, make_rubric, make_user

SAVES_PER_WORKER = 6
WORKERS = 4  # of each kind: threads, then processes


def seed(url: str, n_checkers: int) -> tuple[int, list[int]]:
    engine = make_engine(url)
    try:
        with session_scope(engine) as s:
            case = make_case(s, "CC-RACE", n=2)
            response = make_response(s, case, "model-a")
            a1 = make_user(s, "ann1", "annotator", 1)
            a2 = make_user(s, "ann2", "annotator", 2)
            make_label(s, response, "c01", True, a1)
            make_label(s, response, "c01", False, a2)
            # Both groups' checks are done (by checkers who do not adjudicate here), so it may be adjudicated.
            make_label(s, response, "c01", True, make_user(s, "check1", "checker", 1), stage=Stage.check)
            make_label(s, response, "c01", False, make_user(s, "check2", "checker", 2), stage=Stage.check)
            checkers = [make_user(s, f"chk{i}", "checker", 1 + i % 2).id for i in range(n_checkers)]
            return response.id, checkers
    finally:
        engine.dispose()


def increment_worker(url: str, response_id: int, checker_id: int, saves: int, start=None) -> dict:
    """Saves `saves` increments of the decision's counter; returns what happened.

    `start` (a barrier's wait) lines the workers up after their slow set-up, so their saves overlap
    even on a busy machine.
    """
    engine = make_engine(url)
    outcome = {"saved": 0, "stale": 0, "errors": []}
    try:
        with session_scope(engine, read_only=True) as s:
            checker = s.get(User, checker_id)
        if start is not None:
            start(timeout=120)
        while outcome["saved"] < saves:
            with session_scope(engine, read_only=True) as s:
                current = s.exec(
                    select(Label).where(
                        Label.response_id == response_id, Label.criterion_id == "c01", Label.stage == Stage.adjudication
                    )
                ).first()
                seen = None if current is None else current.lock_version
                count = 0 if current is None else int(current.note)
            try:
                with session_scope(engine) as s:
                    review.adjudicate(
                        s,
                        checker,
                        response_id=response_id,
                        criterion_id="c01",
                        met=bool((count + 1) % 2),
                        rationale=str(count + 1),
                        seen_lock_version=seen,
                    )
                outcome["saved"] += 1
            except StaleEdit as stale:
                assert stale.current is not None
                outcome["stale"] += 1
    except Exception:  # anything but StaleEdit is a failure the test reports
        outcome["errors"].append(traceback.format_exc())
    finally:
        engine.dispose()
    return outcome


def _process_entry(url, response_id, checker_id, saves, results, barrier):
    results.put(increment_worker(url, response_id, checker_id, saves, barrier.wait))


def run_threads(url, response_id, checkers) -> list[dict]:
    results: list[dict] = []
    lock = threading.Lock()

    def body(checker_id):
        outcome = increment_worker(url, response_id, checker_id, SAVES_PER_WORKER)
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=body, args=(c,)) for c in checkers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return results


def run_processes(url, response_id, checkers) -> list[dict]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    barrier = context.Barrier(len(checkers))
    processes = [
        context.Process(target=_process_entry, args=(url, response_id, c, SAVES_PER_WORKER, queue, barrier))
        for c in checkers
    ]
    for process in processes:
        process.start()
    results = [queue.get(timeout=300) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return results


def check_outcome(url: str, response_id: int, results: list[dict], expected_saves: int) -> None:
    errors = [e for r in results for e in r["errors"]]
    assert not errors, errors[0]
    assert sum(r["saved"] for r in results) == expected_saves
    engine = make_engine(url)
    try:
        with session_scope(engine, read_only=True) as s:
            decision = s.exec(
                select(Label).where(Label.response_id == response_id, Label.stage == Stage.adjudication)
            ).one()
            # Every successful save moved the counter by exactly one: none was lost.
            assert int(decision.note) == expected_saves
            assert decision.lock_version == expected_saves
            entries = s.exec(select(AuditLog).where(AuditLog.entity == "adjudication").order_by(AuditLog.id)).all()
            assert len(entries) == expected_saves
            assert [e.after["note"] for e in entries] == [str(i) for i in range(1, expected_saves + 1)]
            report = verify_chain(s)
            assert report.ok, report
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_concurrent_adjudications_lose_nothing(database_url, kind):
    response_id, checkers = seed(database_url, WORKERS)
    runner = run_threads if kind == "threads" else run_processes
    results = runner(database_url, response_id, checkers)
    assert len(results) == WORKERS
    check_outcome(database_url, response_id, results, WORKERS * SAVES_PER_WORKER)
    # With several writers on one row some saves must have been refused (and retried).
    assert sum(r["stale"] for r in results) >= 1


def approve_worker(url: str, rubric_id: int, checker_id: int, barrier, results: list, lock) -> None:
    engine = make_engine(url)
    try:
        with session_scope(engine, read_only=True) as s:
            checker = s.get(User, checker_id)
        barrier.wait(timeout=60)
        try:
            with session_scope(engine) as s:
                review.approve_rubric(s, checker, rubric_id, seen_lock_version=1)
            outcome = "approved"
        except StaleEdit as stale:
            outcome = ("stale", stale.current["status"])
        except Exception as error:  # reported below
            outcome = ("error", repr(error))
        with lock:
            results.append(outcome)
    finally:
        engine.dispose()


def test_two_checkers_approving_the_same_rubric(database_url):
    engine = make_engine(database_url)
    with session_scope(engine) as s:
        author = make_user(s, "author", "annotator", 1)
        checkers = [make_user(s, f"chk{i}", "checker", 1).id for i in range(3)]
        rubric_id = make_rubric(s, make_case(s, "CC-R", n=0), n=2, status=RubricStatus.submitted, author=author).id
    results: list = []
    lock, barrier = threading.Lock(), threading.Barrier(len(checkers))
    threads = [
        threading.Thread(target=approve_worker, args=(database_url, rubric_id, c, barrier, results, lock))
        for c in checkers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(map(str, results)) == sorted(["approved"] + [str(("stale", "approved"))] * 2)
    with session_scope(engine, read_only=True) as s:
        rubric = s.get(RubricVersion, rubric_id)
        assert rubric.lock_version == 2 and rubric.status == RubricStatus.approved
        assert len(s.exec(select(AuditLog).where(AuditLog.entity == "rubric")).all()) == 1
        assert verify_chain(s).ok
    engine.dispose()


def test_insert_that_lost_the_race_is_a_stale_edit(database_url, monkeypatch):
    """A writer that looked before the other's insert landed hits the unique constraint: StaleEdit, not a crash."""
    response_id, checkers = seed(database_url, 2)
    engine = make_engine(database_url)
    with session_scope(engine, read_only=True) as s:
        first, second = s.get(User, checkers[0]), s.get(User, checkers[1])
    with session_scope(engine) as s:
        review.adjudicate(s, first, response_id=response_id, criterion_id="c01", met=True, rationale="先保存")
    real_find = label_write._locked_labels
    calls = {"n": 0}

    def find_as_if_before_the_other_commit(*args):
        calls["n"] += 1
        return {} if calls["n"] == 1 else real_find(*args)

    monkeypatch.setattr(label_write, "_locked_labels", find_as_if_before_the_other_commit)
    with session_scope(engine) as s, pytest.raises(StaleEdit) as stale:
        review.adjudicate(s, second, response_id=response_id, criterion_id="c01", met=False, rationale="后保存")
    assert calls["n"] == 2
    assert stale.value.current.met is True and stale.value.current.note == "先保存"
    with session_scope(engine, read_only=True) as s:
        rows = s.exec(select(Label).where(Label.stage == Stage.adjudication)).all()
        assert [(r.met, r.note) for r in rows] == [(True, "先保存")]
        assert verify_chain(s).ok
    engine.dispose()
