"""A save that waits behind a long import: a clear "busy, try again", never a traceback, nothing lost."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from sqlalchemy import text
from sqlmodel import select

from db import review
from db.access.audit import AUDIT_LOCK_KEY
from db.rules.enums import RubricStatus, Stage
from db.rules.errors import DatabaseBusy
from db.store import engine as engine_module
from db.store.engine import make_engine, session_scope
from db.store.models import Label, RubricVersion, User
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in, texts
from tests.support.factories import make_case, make_label, make_response, make_rubric, make_user

N = 2


class ImportHoldingTheDatabase:
    """A writer that holds what a long import holds (SQLite's write lock; PostgreSQL's audit lock) until released."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.started, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        if self.url.startswith("sqlite"):
            connection = sqlite3.connect(self.url.removeprefix("sqlite:///"), isolation_level=None)
            connection.execute("BEGIN IMMEDIATE")
            self.started.set()
            self.release.wait(60)
            connection.execute("ROLLBACK")
            connection.close()
            return
        writer = make_engine(self.url)
        with writer.begin() as connection:
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": AUDIT_LOCK_KEY})
            self.started.set()
            self.release.wait(60)
        writer.dispose()

    def __enter__(self):
        self.thread.start()
        assert self.started.wait(30)
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.thread.join(30)


def seed(engine) -> tuple[int, int]:
    with session_scope(engine) as s:
        annotator = make_user(s, "ann1", "annotator", 1)
        checker = make_user(s, "chk1", "checker", 1)
        response = make_response(s, make_case(s, "CC-0001", n=N))
        for i in range(1, N + 1):
            make_label(s, response, f"c{i:02d}", True, annotator)
        return checker.id, response.id


def test_a_save_behind_a_long_import_is_told_busy_and_can_be_repeated(database_url, monkeypatch):
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 300)
    engine = make_engine(database_url)
    try:
        checker_id, response_id = seed(engine)
        with session_scope(engine, read_only=True) as s:
            checker = s.get(User, checker_id)
        with (
            ImportHoldingTheDatabase(database_url),
            pytest.raises(DatabaseBusy, match="busy"),
            session_scope(engine, lock_wait_ms=300) as s,
        ):
            review.save_check(s, checker, response_id=response_id, criterion_id="c01", met=True)
        with session_scope(engine, read_only=True) as s:
            assert s.exec(select(Label).where(Label.stage == Stage.check)).all() == []
        # Once the import is done, the same save goes through.
        with session_scope(engine, lock_wait_ms=300) as s:
            review.save_check(s, checker, response_id=response_id, criterion_id="c01", met=True)
        with session_scope(engine, read_only=True) as s:
            assert len(s.exec(select(Label).where(Label.stage == Stage.check)).all()) == 1
    finally:
        engine.dispose()


def test_the_rubric_audit_page_says_busy_and_keeps_the_comment(app_database, sqlite_url, monkeypatch):
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 300)
    with session_scope(app_database) as s:
        author = make_user(s, "ann1", "annotator", 1)
        make_user(s, "chk1", "checker", 1)
        rubric_id = make_rubric(s, make_case(s, "CC-0009", n=0), n=N, status=RubricStatus.submitted, author=author).id
    app = open_page(signed_in(app_database, "chk1"), "review-rubrics")
    assert not app.exception
    comment = next(w for w in app.text_input if w.key and w.key.startswith("review_audit_c_"))
    comment.input("请写明具体剂量")
    app = button(app, translate("review.audit.return", "zh")).click().run()  # a click asks first
    with ImportHoldingTheDatabase(sqlite_url):
        app = button(app, translate("review.audit.confirm", "zh")).click().run()
    assert not app.exception
    assert [e.value for e in app.error] == [translate("security.busy", "zh")]
    assert "Traceback" not in texts(app)
    assert "请写明具体剂量" in [w.value for w in app.text_input]  # the comment is still there to send again
    with session_scope(app_database, read_only=True) as s:
        assert s.get(RubricVersion, rubric_id).status == RubricStatus.submitted
    app = button(app, translate("review.audit.confirm", "zh")).click().run()  # the question is still open
    assert not app.error
    with session_scope(app_database, read_only=True) as s:
        assert s.get(RubricVersion, rubric_id).status == RubricStatus.returned
