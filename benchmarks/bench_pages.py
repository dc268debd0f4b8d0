"""Server time of every page at full scale: first visit and warm reruns, and the kept-figure readers.

Give it a database filled by `clinconsensus demo --scale full` (SQLite or PostgreSQL), or nothing: then
it builds that data on both databases and measures each (benchmarks/full_scale.py). Each page
runs through Streamlit's AppTest (the real entry file, a signed-in session), which is the server
side of a browser visit without the network and the browser's drawing:

- first visit: a new session opens the page right after a label changed (a checker's check saved
  through db.review, so the data version moves and every figure must be new);
- warm: the same session reruns the page (a widget interaction that changes no data);
- readers: the kept-figure readers the page and its sidebar call (db.counts and the queues on it), timed
  directly right after a label changed.

The dashboard never blocks on its grid: after a change it shows the previous grid and refreshes
itself when the background build is in; the time that build takes is printed too, beside the
straightforward synchronous build (what a first visit cost before).

Targets (docs/REFERENCE.md §6, issue "full scale in the browser"): first visit < 300 ms, dashboard < 1 s.

    .venv/bin/python benchmarks/bench_pages.py [--database URL] [--visits 5] [--reader-visits 2]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import select  # noqa: E402
from sqlmodel import Session  # noqa: E402

from db import labeling, review  # noqa: E402
from db.access import users  # noqa: E402
from db.migrations.upgrade import upgrade  # noqa: E402
from db.rules.enums import Role, Stage  # noqa: E402
from db.store.engine import get_engine, make_engine, session_scope  # noqa: E402
from db.store.models import Label, User  # noqa: E402
from db.work import progress as progress_queries  # noqa: E402

PAGE_TARGET_MS = 300.0
DASHBOARD_TARGET_MS = 1000.0
DASHBOARD = "analysis-dashboard"
#: Shows something only in open rounds: the bench opens every finished round first (db.work.feedback, as the admin).
FEEDBACK = "annotate-feedback"

#: (role, url_path) of every page; a page is visited by the first active demo user of its role.
PAGES = [
    (Role.annotator, "home"),
    (Role.annotator, "annotate-labeling"),
    (Role.annotator, "annotate-rubrics"),
    (Role.annotator, FEEDBACK),
    (Role.checker, "home"),
    (Role.checker, "review-rubrics"),
    (Role.checker, "review-labels"),
    (Role.checker, "review-adjudication"),
    (Role.admin, "home"),
    (Role.admin, "admin-progress"),
    (Role.admin, "admin-assignments"),
    (Role.admin, "admin-import"),
    (Role.admin, "admin-users"),
    (Role.admin, "admin-exports"),
    (Role.admin, "admin-audit-log"),
    (Role.admin, DASHBOARD),
]


#: Milliseconds of each script run, measured inside the run: AppTest's own set-up per run (it scans
#: the installed packages for components, ~0.5 s, which a real server does once at start) is left out.
SCRIPT_MS: list[float] = []
# The script runs as its own __main__; it finds the list through this module name.
TIMINGS_MODULE = "clinconsensus_bench_page_timings"
sys.modules[TIMINGS_MODULE] = types.SimpleNamespace(SCRIPT_MS=SCRIPT_MS)

TIMED_ENTRY = """
import runpy, sys, time
_started = time.perf_counter()
try:
    runpy.run_path({entry!r}, run_name="__main__")
finally:
    sys.modules[{module!r}].SCRIPT_MS.append((time.perf_counter() - _started) * 1000.0)
"""


def timed_run(app) -> float:
    """Runs the app once; the server time of that script run in milliseconds."""
    before = len(SCRIPT_MS)
    app.run()
    if app.exception:
        raise RuntimeError(app.exception[0].message)
    return SCRIPT_MS[before] if len(SCRIPT_MS) > before else float("nan")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def p50_p95(values: list[float]) -> str:
    return f"p50 {statistics.median(values):8.1f}  p95 {percentile(values, 0.95):8.1f}"


def timed_ms(work) -> tuple[float, object]:
    start = time.perf_counter()
    result = work()
    return (time.perf_counter() - start) * 1000.0, result


class Visitor:
    """Opens pages as the demo users, and changes a label between first visits."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        upgrade(self.engine)
        with session_scope(self.engine, read_only=True) as s:
            self.users = {}
            for role in (Role.annotator, Role.checker, Role.admin):
                user = (
                    s.execute(
                        select(User)
                        .where(User.role == role, User.is_active, User.password_hash.is_not(None))
                        .order_by(User.group_no, User.id)
                    )
                    .scalars()
                    .first()
                )
                s.expunge(user)
                self.users[role] = user
            # A group-2 check the bench flips back and forth: a real save through db.review.
            checker2 = (
                s.execute(select(User).where(User.role == Role.checker, User.group_no == 2, User.is_active))
                .scalars()
                .first()
            )
            s.expunge(checker2)
            self.flipper = checker2
            self.flip_cell = s.execute(
                select(Label.response_id, Label.criterion_id)
                .where(Label.stage == Stage.annotation, Label.group_no == 2, Label.user_id != checker2.id)
                .order_by(Label.id.desc())
                .limit(1)
            ).one()
        self.tokens = {}
        with session_scope(self.engine) as s:
            for role, user in self.users.items():
                self.tokens[role] = users.open_session(s, user=s.get(User, user.id))

    def open_finished_rounds(self) -> int:
        from db.work import feedback

        with session_scope(self.engine) as s:
            admin = s.get(User, self.users[Role.admin].id)
            finished = [
                state for state in feedback.round_states(s, actor=admin) if state.finished and not state.is_open
            ]
            opened = 0  # a round sharing a case with an unfinished one stays closed (db.work.feedback refuses it)
            for state in finished:
                try:
                    feedback.set_feedback_open(s, actor=admin, round_at=state.round_at, is_open=True)
                    opened += 1
                except feedback.RoundSharesCase:
                    pass
            return opened

    def change_a_label(self) -> None:
        response_id, criterion_id = self.flip_cell
        with session_scope(self.engine) as s:
            current = s.execute(
                select(Label).where(
                    Label.response_id == response_id,
                    Label.criterion_id == criterion_id,
                    Label.stage == Stage.check,
                    Label.group_no == 2,
                )
            ).scalar_one_or_none()
            annotation = s.execute(
                select(Label.met).where(
                    Label.response_id == response_id,
                    Label.criterion_id == criterion_id,
                    Label.stage == Stage.annotation,
                    Label.group_no == 2,
                )
            ).scalar_one()
            met = not (current.met if current else annotation)
            review.save_check(
                s,
                self.flipper,
                response_id=response_id,
                criterion_id=criterion_id,
                met=met,
                note=None if met == annotation else "复核更正",
                seen_lock_version=current.lock_version if current else None,
            )

    def new_session(self, role: Role, url_path: str):
        from streamlit.testing.v1 import AppTest
        from streamlit.util import calc_hash

        app = AppTest.from_string(
            TIMED_ENTRY.format(entry=str(ROOT / "streamlit_app.py"), module=TIMINGS_MODULE), default_timeout=300
        )
        app.session_state["token"] = self.tokens[role]
        app._page_hash = calc_hash(url_path)
        return app


def sidebar_figures(session: Session, user: User) -> object:
    """What every page's sidebar counts (ui.shell): the annotator's queue figures, or the open disagreements."""
    if user.role == Role.annotator:
        return progress_queries.my_progress(session, user)
    return progress_queries.open_disagreements(session, user)


def check_queue_figures(session: Session, user: User) -> object:
    """The label check page's annotator list and the first stretch of the first annotator's queue."""
    annotators = review.check_annotators(session, user)
    if not annotators:
        return annotators
    return review.check_queue_window(session, user, annotator_id=annotators[0].user_id, around=None, before=0, after=50)


#: The kept-figure readers of each page beside its sidebar's; pages not named read none of their own.
PAGE_READERS = {
    "annotate-labeling": labeling.labeling_queue,
    "review-labels": check_queue_figures,
    "review-adjudication": review.adjudication_queue,
    "admin-progress": lambda session, user: progress_queries.progress(session, actor=user),
}


def timed_readers(visitor: Visitor, role: Role, url_path: str) -> float:
    """Milliseconds of the page's kept-figure readers and its sidebar's, in one session."""
    page_readers = PAGE_READERS.get(url_path)
    with session_scope(visitor.engine, read_only=True) as session:
        user = session.get(User, visitor.users[role].id)
        start = time.perf_counter()
        sidebar_figures(session, user)
        if page_readers is not None:
            page_readers(session, user)
        return (time.perf_counter() - start) * 1000.0


def bench_page(visitor: Visitor, role: Role, url_path: str, visits: int, reader_visits: int) -> dict:
    first, warm, kept = [], [], []
    app = None
    for _ in range(visits):
        visitor.change_a_label()
        app = visitor.new_session(role, url_path)
        first.append(timed_run(app))
    for _ in range(visits):
        warm.append(timed_run(app))
    for _ in range(reader_visits):
        visitor.change_a_label()
        kept.append(timed_readers(visitor, role, url_path))
    return dict(first=first, warm=warm, kept=kept)


def bench_dashboard_build(visitor: Visitor) -> None:
    """The grid and default report: the background build, and the straightforward synchronous build."""
    from analysis import metrics
    from analysis.grid import prepare
    from analysis.loader import load_frames
    from analysis.report import build_report
    from dashboards import dashboard
    from db.store.data_version import data_version

    keeper = dashboard._kept_grid()
    # The last page visit's change may still be building: it is let finish first, or this figure would time two
    # builds, that one's and the one after this change.
    keeper.wait(data_version(get_engine()), 600)
    visitor.change_a_label()
    version = data_version(get_engine())
    ms, snapshot = timed_ms(lambda: keeper.wait(version, 600))
    print(f"{'dashboard background rebuild after a change':<44} {ms:8.1f} ms (the page meanwhile shows the last grid)")
    start = time.perf_counter()
    grid = prepare(load_frames(visitor.engine))
    build_report(None, metrics.DEFAULT_K, metrics.GOLD, grid=grid, resamples=dashboard.DASHBOARD_RESAMPLES)
    straight = (time.perf_counter() - start) * 1000.0
    print(f"{'straightforward first visit: build grid+report':<44} {straight:8.1f} ms (blocks the page)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="SQLAlchemy URL of a full-scale database (default: build one on each)")
    parser.add_argument("--skip-postgres", action="store_true", help="without --database: SQLite only")
    parser.add_argument("--visits", type=int, default=5, help="first visits (and warm reruns) per page")
    parser.add_argument("--reader-visits", type=int, default=2, help="times per page its kept-figure readers run")
    parser.add_argument("--pages", help="comma-separated url paths (default: every page)")
    parser.add_argument("--cases", type=int, default=None, help="without --database: cases to build (default 2,500)")
    args = parser.parse_args(argv)
    if not args.database:
        from benchmarks.full_scale import run_on_both

        rest = sys.argv[1:] if argv is None else list(argv)
        return run_on_both(
            "benchmarks.bench_pages", rest, judges=None, postgres=not args.skip_postgres, cases=args.cases
        )

    os.environ["DATABASE_URL"] = args.database
    get_engine.cache_clear()
    # Runs outside `streamlit run` (AppTest, the background grid build) make Streamlit warn on every
    # session-state read; they would bury the figures. A filter, as Streamlit resets its loggers' levels.
    for name in (
        "streamlit.runtime.scriptrunner_utils.script_run_context",
        "streamlit.runtime.state.session_state_proxy",
    ):
        logging.getLogger(name).addFilter(lambda record: record.levelno >= logging.ERROR)
    visitor = Visitor(args.database)
    print(f"database: {visitor.engine.url.render_as_string(hide_password=True)}")
    wanted = set(args.pages.split(",")) if args.pages else None
    # The process's first run imports the app and starts the dashboard's first build: not a visit.
    warmup = visitor.new_session(Role.admin, DASHBOARD)
    warmup.run()
    from dashboards import dashboard
    from db.store.data_version import data_version

    dashboard._kept_grid().wait(data_version(get_engine()), 600)

    print(f"{'page (user role)':<40} {'first visit ms':>26}   {'warm rerun ms':>26}   {'readers kept ms':>26}")
    for role, url_path in PAGES:
        if wanted and url_path not in wanted:
            continue
        # The dashboard is compared with its straightforward synchronous build below instead.
        readers = 0 if url_path in (DASHBOARD, FEEDBACK) else args.reader_visits
        if url_path == FEEDBACK:
            print(f"(opened the feedback of {visitor.open_finished_rounds()} finished rounds)", flush=True)
        figures = bench_page(visitor, role, url_path, args.visits, readers)
        target = DASHBOARD_TARGET_MS if url_path == DASHBOARD else PAGE_TARGET_MS
        verdict = "met" if percentile(figures["first"], 0.95) < target else "NOT met"
        kept = p50_p95(figures["kept"]) if figures["kept"] else ""
        print(
            f"{url_path + ' (' + role.value + ')':<40} {p50_p95(figures['first'])}   {p50_p95(figures['warm'])}   "
            f"{kept:>26}"
            f"  (target p95 < {target:.0f} ms: {verdict})",
            flush=True,
        )
    if not wanted or DASHBOARD in wanted:
        bench_dashboard_build(visitor)
    visitor.engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
