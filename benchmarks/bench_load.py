"""Many labelers on one server process: save-and-next under N = 1, 5, 10, 20 simultaneous sessions.

Give it a full-scale database (`clinconsensus demo --scale full`), or nothing: then it builds that data on
both databases and measures each (benchmarks/full_scale.py). The bench works on a copy (SQLite:
a copy of the file; PostgreSQL: a database made from it as a template) and drops the copy at the end.
It adds 20 annotators with 40 responses each, all loopback, all in this one process.

A session is a Streamlit AppTest of the real app, signed in as one of them, on the labeling page.
One save-and-next interaction is what the server does for it: the workbench's save callback
(db.labeling.drafts.save of the response on screen, every criterion decided) and then the rerun of the
whole page showing the next response. (The workbench is a custom component, which AppTest cannot
click; its callback is called the way Streamlit calls it.) Each of the N sessions runs at once in
its own thread, as Streamlit runs sessions, with a think time between interactions; the time of
each interaction is taken from its start to the end of the rerun, so waiting for the other sessions
(the GIL, the database) is included. Printed per N: p50 and p95 of that time, and the saves per second.

Targets (docs/REFERENCE.md §6): save-and-next < 150 ms for one labeler; 20 labelers with p95 < 1 s.

    .venv/bin/python benchmarks/bench_load.py [--database URL] [--interactions 6] [--think 1.0]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from db import counts, labels as label_room  # noqa: E402
from db.access import users  # noqa: E402
from db.migrations.upgrade import upgrade  # noqa: E402
from db.rules.enums import AssignmentKind, Role, Stage  # noqa: E402
from db.store.current_rubric import current_versions  # noqa: E402
from db.store.engine import get_engine, make_engine, session_scope  # noqa: E402
from db.store.models import Assignment, Label, Response, User  # noqa: E402

SESSIONS = (1, 5, 10, 20)
PER_USER = 40
SAVE_NEXT_TARGET_MS = 150.0
LOAD_TARGET_MS = 1000.0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def copy_database(url: str) -> tuple[str, callable]:
    """A throw-away copy of the database at `url`, and how to drop it."""
    if url.startswith("sqlite"):
        source = Path(sa.engine.make_url(url).database)
        folder = Path(tempfile.mkdtemp(prefix="cc-bench-load-"))
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{source}{suffix}").exists():
                shutil.copyfile(f"{source}{suffix}", folder / f"load.db{suffix}")
        return f"sqlite:///{folder / 'load.db'}", lambda: shutil.rmtree(folder, ignore_errors=True)
    parsed = sa.engine.make_url(url)
    name = f"cc_bench_load_{os.getpid()}"
    admin = sa.create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE {name} TEMPLATE "{parsed.database}"')

    def drop() -> None:
        get_engine.cache_clear()
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()

    return parsed.set(database=name).render_as_string(hide_password=False), drop


def add_labelers(
    engine, n: int, *, per_user: int = PER_USER, responses: list[tuple[int, int]] | None = None
) -> list[tuple[User, str, list[int]]]:
    """n annotators (groups alternating), each assigned `per_user` responses nobody else of theirs has.

    `responses`: the (response id, case pk) pairs to hand out in turn; by default the newest responses
    whose case has an approved rubric.
    """
    out = []
    with session_scope(engine) as s:
        if responses is None:
            # Responses that can be labeled: their case has an approved rubric.
            rubrics = current_versions().subquery()
            responses = s.execute(
                select(Response.id, Response.case_pk)
                .join(rubrics, rubrics.c.case_pk == Response.case_pk)
                .order_by(Response.id.desc())
                .limit(n * per_user)
            ).all()
        if len(responses) < n * per_user:
            raise SystemExit(
                f"{n} labelers need {n * per_user} responses with an approved rubric, found {len(responses)}"
            )
        for i in range(n):
            group = 1 + i % 2
            user = User(username=f"load-{i:02d}", display_name=f"load {i}", role=Role.annotator, group_no=group)
            s.add(user)
            s.flush()
            mine = responses[i * per_user : (i + 1) * per_user]
            for response_id, case_pk in mine:
                s.add(
                    Assignment(
                        kind=AssignmentKind.label,
                        case_pk=case_pk,
                        response_id=response_id,
                        user_id=user.id,
                        group_no=group,
                    )
                )
            counts.refresh_assignments(s, [response_id for response_id, _ in mine])
            token = users.open_session(s, user=user)
            s.flush()
            s.expunge(user)
            out.append((user, token, sorted(rid for rid, _ in mine)))
    return out


def share_one_runtime() -> None:
    """Lets AppTest sessions run at once in one process, as a server runs its sessions.

    AppTest installs a mock Streamlit runtime for each run and removes it at the end, which would pull it
    from under the other sessions' runs; here the first one stays for all (one runtime, as in a server).
    """
    from streamlit.runtime import Runtime
    from streamlit.testing.v1 import app_test

    class RuntimeSlot:
        def __setattr__(self, name, value):
            if name == "_instance" and value is None:
                return
            setattr(Runtime, name, value)

        def __getattr__(self, name):
            return getattr(Runtime, name)

        def __dir__(self):
            return dir(Runtime)

    app_test.Runtime = RuntimeSlot()


class Labeler:
    """One browser session on the labeling page."""

    def __init__(self, user: User, token: str, response_ids: list[int], seed: int) -> None:
        from streamlit.testing.v1 import AppTest
        from streamlit.util import calc_hash

        self.user, self.response_ids, self.rng = user, response_ids, random.Random(seed)
        self.position = 0
        self.app = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=300)
        self.app.session_state["token"] = token
        self.app._page_hash = calc_hash("annotate-labeling")

    def open(self) -> None:
        from annotate.labeling import CURRENT_KEY

        self.app.session_state[CURRENT_KEY] = self.response_ids[0]
        self.app.run()
        if self.app.exception:
            raise RuntimeError("\n".join(self.app.exception[0].stack_trace))

    def save_and_next(self, engine) -> float:
        """One interaction; its milliseconds from the save's start to the end of the rerun."""
        from annotate.labeling import CURRENT_KEY, LOADED_KEY

        started = time.perf_counter()
        loaded = self.app.session_state[LOADED_KEY]
        decisions = {cid: self.rng.random() < 0.5 for cid in loaded["bench"].decisions}
        with session_scope(engine) as s:
            label_room.save(
                s,
                self.user,
                "annotation",
                loaded["response_id"],
                rubric_version_id=loaded["rubric_version_id"],
                decisions=decisions,
                expected_versions=loaded["expected"],
                active_ms=1000,
            )
        self.position = (self.position + 1) % len(self.response_ids)
        self.app.session_state[CURRENT_KEY] = self.response_ids[self.position]
        self.app.run()
        if self.app.exception:
            raise RuntimeError("\n".join(self.app.exception[0].stack_trace))
        return (time.perf_counter() - started) * 1000.0


def run_load(engine, labelers: list[Labeler], interactions: int, think: float) -> tuple[list[float], float]:
    millis: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(labelers))

    def work(labeler: Labeler) -> None:
        try:
            barrier.wait()
            for _ in range(interactions):
                ms = labeler.save_and_next(engine)
                with lock:
                    millis.append(ms)
                time.sleep(labeler.rng.uniform(0.5 * think, 1.5 * think))
        except BaseException as error:  # reported after the run
            errors.append(error)

    threads = [threading.Thread(target=work, args=(labeler,)) for labeler in labelers]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return millis, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database", help="SQLAlchemy URL of a full-scale database, not changed (default: build one on each)"
    )
    parser.add_argument("--skip-postgres", action="store_true", help="without --database: SQLite only")
    parser.add_argument("--interactions", type=int, default=6, help="save-and-next per session")
    parser.add_argument("--think", type=float, default=1.0, help="mean seconds between a session's interactions")
    parser.add_argument("--sessions", default=",".join(map(str, SESSIONS)))
    parser.add_argument("--cases", type=int, default=None, help="without --database: cases to build (default 2,500)")
    args = parser.parse_args(argv)
    if not args.database:
        from benchmarks.full_scale import run_on_both

        rest = sys.argv[1:] if argv is None else list(argv)
        return run_on_both("benchmarks.bench_load", rest, postgres=not args.skip_postgres, cases=args.cases)
    counts = [int(n) for n in args.sessions.split(",")]

    url, drop = copy_database(args.database)
    try:
        os.environ["DATABASE_URL"] = url
        get_engine.cache_clear()
        engine = make_engine(url)
        upgrade(engine)
        with session_scope(engine, read_only=True) as s:
            n_labels = s.execute(select(func.count()).select_from(Label).where(Label.stage == Stage.annotation))
            print(f"database: copy of {args.database.split('@')[-1]}  annotation labels: {n_labels.scalar_one():,}")
        people = add_labelers(engine, max(counts))
        share_one_runtime()
        print(f"think time {args.think:.1f} s (uniform ±50%), {args.interactions} save-and-next per session")
        print(f"{'sessions':>8}  {'p50 ms':>8}  {'p95 ms':>8}  {'max ms':>8}  {'saves/s':>7}")
        for n in counts:
            labelers = [Labeler(user, token, ids, seed=i) for i, (user, token, ids) in enumerate(people[:n])]
            for labeler in labelers:
                labeler.open()
            millis, seconds = run_load(engine, labelers, args.interactions, args.think)
            target = SAVE_NEXT_TARGET_MS if n == 1 else LOAD_TARGET_MS
            p95 = percentile(millis, 0.95)
            verdict = "met" if p95 < target else "NOT met"
            print(
                f"{n:>8}  {statistics.median(millis):8.1f}  {p95:8.1f}  {max(millis):8.1f}  "
                f"{len(millis) / seconds:7.1f}   (target p95 < {target:.0f} ms: {verdict})",
                flush=True,
            )
        engine.dispose()
        get_engine.cache_clear()
    finally:
        drop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
