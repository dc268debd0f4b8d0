"""The analysis pages share one decision grid per data version: the dashboard and the analysis-depth pages
read the database once between them, hold the same grid object, and a label change builds one new grid."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlmodel import Session, select

from analysis import grid_worker
from dashboards import dashboard, insight_pages
from db.store.data_version import data_version
from db.store.models import Label
from i18n import DEFAULT_LANGUAGE
from tests.analysis.test_report import populate_small_database
from tests.support.apptest_helpers import open_page, signed_in
from tests.support.factories import make_user
from ui import shared_grid


def small_database_with_admin(engine) -> None:
    """The small database of the report tests, and an admin "boss" to open the analysis pages."""
    with Session(engine, expire_on_commit=False) as session:
        populate_small_database(session)
        make_user(session, "boss", role="admin")
        session.commit()


def test_dashboard_and_insight_pages_share_one_grid(app_database, monkeypatch):
    small_database_with_admin(app_database)
    reads = []
    grid_of = grid_worker.grid_of
    monkeypatch.setattr(grid_worker, "grid_of", lambda engine, **options: reads.append(1) or grid_of(engine, **options))

    for page in ("analysis-dashboard", "analysis-criteria", "analysis-judge-errors", "analysis-physicians"):
        app = open_page(signed_in(app_database, "boss", lang="en"), page)
        assert not app.exception, [e.value for e in app.exception]
    assert len(reads) == 1  # four pages, one read of the database

    version = data_version(app_database)
    view = dashboard._kept_grid().get(version)
    state = insight_pages._kept_state().get(version)
    assert view.current and state.current
    grid = shared_grid.kept_grid().get(version).value
    assert view.value.grid is grid and state.value.grid is grid  # the insights' views per basis start from it
    # the dashboard's default view comes with its first screen's figures drawn in the default language (the rest
    # and other languages are drawn when a page asks for them)
    assert set(view.value.figures) == {(DEFAULT_LANGUAGE, name) for name in dashboard.FIRST_SCREEN_FIGURES}

    # a label change: the next visit of either page builds one new grid, shared again
    with Session(app_database) as session:
        label = session.exec(select(Label).order_by(Label.id)).first()
        label.met = not label.met
        label.updated_at = datetime.now(UTC)  # what a save through db/ moves
        session.add(label)
        session.commit()
    new_version = data_version(app_database)
    assert new_version != version
    for page in ("analysis-physicians", "analysis-dashboard"):
        app = open_page(signed_in(app_database, "boss", lang="en"), page)
        assert not app.exception
    assert len(reads) == 2
    assert (
        dashboard._kept_grid().get(new_version).value.grid
        is insight_pages._kept_state().get(new_version).value.grid
        is shared_grid.kept_grid().get(new_version).value
    )


def test_a_grid_the_pages_do_not_wait_for_is_built_by_a_worker(app_database, monkeypatch):
    small_database_with_admin(app_database)
    sent = []
    built_in_worker = grid_worker.built_in_worker
    monkeypatch.setattr(grid_worker, "built_in_worker", lambda url: sent.append(url) or built_in_worker(url))
    version = data_version(app_database)
    assert version.approximate_labels > 0
    snapshot = shared_grid.kept_grid().wait(version, 120)  # a small database: built here
    assert snapshot.current and sent == []

    shared_grid.kept_grid.clear()
    monkeypatch.setattr(shared_grid, "QUICK_BUILD_LABELS", 1)  # every database counts as large
    app = open_page(signed_in(app_database, "boss", lang="en"), "analysis-dashboard")
    assert not app.exception
    snapshot = shared_grid.kept_grid().wait(version, 120)
    assert snapshot.current and len(sent) == 1 and sent[0].startswith("sqlite")
    assert snapshot.value.n.sum() == grid_worker.grid_of(app_database, in_worker=False).n.sum() > 0
