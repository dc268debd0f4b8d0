"""Save-and-next talks to the database a fixed number of times, however many labels change — on both databases.

A save used to send about 34 statements per save-and-next (the same checks asked twice, a statement
per changed label group, a delete and an insert per kept figure); these tests count the statements
the driver receives, so a per-label statement or a repeated check coming back fails here. The rules
stay as before: the figures equal a recount, the audit chain verifies, a changed rubric is refused.
"""

from __future__ import annotations

import pytest
from sqlalchemy import delete, event, select

from db import counts, labeling
from db.access.audit import verify_chain
from db.label_rows.refusals import RubricChanged
from db.labeling import drafts as label_drafts
from db.rules.config import get_settings
from db.store.models import Assignment, Label, ResponseStatus
from tests.support import recount
from tests.support.factories import make_case, make_response, make_user

N = 30


@pytest.fixture
def world(session):
    g1 = make_user(session, "ann1", "annotator", 1)
    g2 = make_user(session, "ann2", "annotator", 2)
    case = make_case(session, "CC-0001")
    responses = [make_response(session, case, f"secret-model-{i}", f"回答 {i}") for i in range(3)]
    for user in (g1, g2):
        for response in responses:
            session.add(
                Assignment(
                    kind="label", case_pk=case.id, user_id=user.id, group_no=user.group_no, response_id=response.id
                )
            )
    counts.refresh_assignments(session, [response.id for response in responses])
    session.commit()
    return dict(g1=g1, g2=g2, case=case, responses=responses)


class StatementCounter:
    def __init__(self, engine) -> None:
        self.engine = engine
        self.statements: list[str] = []

    def _seen(self, _conn, _cursor, statement, _params, _context, _executemany) -> None:
        self.statements.append(" ".join(statement.split()))

    def __enter__(self) -> StatementCounter:
        event.listen(self.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *_exc) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)


def _save_opened(session, user, response_id, decisions, bench) -> labeling.SaveOutcome:
    """Saves `decisions` on a response opened as `bench` (label_drafts.open_response), and commits."""
    outcome = label_drafts.save(
        session,
        user,
        response_id,
        rubric_version_id=bench.view.rubric_version_id,
        decisions=decisions,
        expected_versions=bench.view.expected_versions,
        active_ms=5_000,
    )
    session.commit()
    return outcome


def save(session, user, response_id, decisions: dict[str, bool]) -> labeling.SaveOutcome:
    return _save_opened(session, user, response_id, decisions, label_drafts.open_response(session, user, response_id))


def counted_save(session, engine, user, response_id, decisions) -> tuple[labeling.SaveOutcome, list[str]]:
    """A save, with the statements the driver received for it (opening the response is not counted)."""
    bench = label_drafts.open_response(session, user, response_id)
    session.commit()
    with StatementCounter(engine) as counter:
        outcome = _save_opened(session, user, response_id, decisions, bench)
    return outcome, counter.statements


def all_met(value: bool) -> dict[str, bool]:
    return {f"c{i:02d}": value for i in range(1, N + 1)}


def test_a_save_sends_as_many_statements_for_one_changed_label_as_for_thirty(session, engine, world):
    g1, response = world["g1"], world["responses"][0]
    created, first = counted_save(session, engine, g1, response.id, all_met(True))
    assert (created.created, created.updated) == (N, 0)
    one, changed_one = counted_save(session, engine, g1, response.id, dict(all_met(True), c01=False))
    assert (one.created, one.updated) == (0, 1)
    thirty, changed_all = counted_save(session, engine, g1, response.id, all_met(False) | {"c01": True})
    assert (thirty.created, thirty.updated) == (0, N)
    assert len(changed_one) == len(changed_all), (changed_one, changed_all)
    # 34 statements per save-and-next before; the save alone was at most 16, and the audit seal (which lets
    # `audit verify` notice entries cut from the log's end) reads and rewrites its one row in the same
    # transaction: 18 (a transaction's BEGIN/COMMIT are not statements the driver receives here); the kept
    # responses ready for adjudication are rewritten with the assignment's state: 19. A save that adds labels
    # moves its author's kept totals too (20); one that only changes labels leaves them as they are. The
    # assignments' states as they were are read before they are rewritten (21: what each adds to its owner's
    # assigned and done totals), and a save that finishes the response moves those totals (22). The response's
    # status as it was is read before it is rewritten (23, 21: what it adds to the unresolved totals, which move
    # only when its unresolved decisions do, never on one group's save alone). The feedback figures compare with
    # final gold only, so the response's labels are read to tell whether it is final (24).
    assert len(first) <= 24, first
    assert sum("label_totals" in s for s in first) == 1, first
    assert sum("assignment_totals" in s for s in first) == 1, first
    assert sum("FROM response_status" in s for s in first) == 1, first
    assert not any("unresolved_totals" in s for s in first + changed_all), first + changed_all
    assert len(changed_all) <= 22, changed_all  # the final-state read too
    assert not any("label_totals" in s or "assignment_totals" in s for s in changed_all), changed_all
    assert sum("FROM rubric_version" in s for s in changed_all) == 1, changed_all
    assert sum("FROM assignment" in s for s in changed_all) == 2, changed_all
    with engine.connect() as connection:
        met = dict(
            connection.execute(
                select(Label.criterion_id, Label.met).where(Label.response_id == response.id, Label.group_no == 1)
            ).all()
        )
    assert met == all_met(False) | {"c01": True}


def test_figures_chain_and_refusals_hold_after_the_shorter_save(session, engine, world):
    g1, g2 = world["g1"], world["g2"]
    first, second = world["responses"][:2]
    save(session, g1, first.id, all_met(True))
    save(session, g2, first.id, all_met(True) | {"c03": False, "c07": False})
    save(session, g1, second.id, all_met(False))
    with engine.connect() as connection:
        status = {row[0]: tuple(row[1:]) for row in connection.execute(select(*ResponseStatus.__table__.c)).all()}
    # Both groups labeled the first response and differ on two criteria; only group 1 labeled the second.
    assert status[first.id] == (N, 2, 2, N - 2)
    assert status[second.id] == (0, 0, 0, N)
    assert verify_chain(session).ok
    # A save against an older rubric version is refused before anything is written.
    bench = label_drafts.open_response(session, g1, first.id)
    with pytest.raises(RubricChanged):
        label_drafts.save(
            session,
            g1,
            first.id,
            rubric_version_id=bench.view.rubric_version_id + 1000,
            decisions=all_met(False),
            expected_versions=bench.view.expected_versions,
        )
    session.rollback()
    assert {label.met for label in labeling.labels_for(session, g1, first.id, 1).values()} == {True}


def test_a_response_whose_labels_are_all_gone_loses_its_kept_status(session, engine, world):
    g1, response = world["g1"], world["responses"][2]
    save(session, g1, response.id, all_met(True))
    assert session.get(ResponseStatus, response.id) is not None
    session.execute(delete(Label).where(Label.response_id == response.id))
    counts.refresh(session, [response.id])
    session.commit()
    session.expire_all()
    assert session.get(ResponseStatus, response.id) is None
    assert recount.kept_status(session).equals(recount.recount_status(session).reset_index(drop=True))


def test_settings_follow_a_changed_variable_at_once(monkeypatch):
    monkeypatch.setenv("CLINCONSENSUS_IDLE_MINUTES", "17")
    assert get_settings().idle_minutes == 17
    monkeypatch.setenv("CLINCONSENSUS_IDLE_MINUTES", "18")
    assert get_settings().idle_minutes == 18
    monkeypatch.delenv("CLINCONSENSUS_IDLE_MINUTES")
    assert get_settings().idle_minutes == 30
    monkeypatch.setenv("DATABASE_URL", "sqlite:///elsewhere.db")
    assert get_settings().database_url == "sqlite:///elsewhere.db"
