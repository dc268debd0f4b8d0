"""Server time of the hit-labeling page at full scale (prints p50/p95; asserts nothing).

Full scale is the demo's: 2,500 cases × 30 criteria × 11 models, 1.65 M annotation labels, three
annotators per group, so one annotator's queue holds about 9,000 responses. Without `--database`
the data is built the way `clinconsensus demo --scale full` builds it (demo.generator.build_demo: the
demo files written by write_demo_files and loaded through db.importers.import_file, then work
handed out), without judges, on SQLite and on a throw-away PostgreSQL, and each is measured
(benchmarks/full_scale.py). Timed:

- the db functions the labeling page calls: response_for_labeling and the sign-in token lookup on
  every run, labeling_queue on the first visit and then every QUEUE_TTL_S seconds (the page keeps
  the queue and updates it after its own saves);
- the labeling page's save (db.labels.save), one response at a time in its own transaction, creating
  labels and changing them;
- a whole run of the labeling page in Streamlit's AppTest (the real entry file, signed in),
  which includes the shell, the sidebar and the widgets; the shell's sidebar is also timed on its
  own, since its progress figure reads the whole queue on every run.

- the workbench's two server paths (db.labels over db/labeling/drafts.py): a decision kept as a draft (one
  keep_draft in its own transaction, as the workbench's callback runs it), and save-and-next (the
  save, then the next response opened with its draft); each beside the straightforward approach
  (re-reading the response on every decision; recounting the whole queue after every save).

Targets (docs/REFERENCE.md §6 / the labeling page): page server time < 300 ms p95, a save < 50 ms p95,
decision to draft saved < 100 ms, save-and-next < 300 ms.

    .venv/bin/python benchmarks/bench_labeling.py [--database URL] [--keep FILE] [--samples 40]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlmodel import select  # noqa: E402

from benchmarks.full_scale import build_full, run_on_both  # noqa: E402
from db import labeling, labels as label_room  # noqa: E402
from db.access import users  # noqa: E402
from db.migrations.upgrade import upgrade  # noqa: E402
from db.rules.enums import Role  # noqa: E402
from db.store.engine import make_engine, session_scope  # noqa: E402
from db.store.models import User  # noqa: E402

PAGE_TARGET_MS = 300.0
SAVE_TARGET_MS = 50.0
DRAFT_TARGET_MS = 100.0
SAVE_AND_NEXT_TARGET_MS = 300.0
DECISIONS_PER_RESPONSE = 10


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def report(label: str, millis: list[float], target: float | None = None) -> None:
    p50, p95 = statistics.median(millis), percentile(millis, 0.95)
    verdict = ""
    if target is not None:
        verdict = f"  (target p95 < {target:.0f} ms: {'met' if p95 < target else 'NOT met'})"
    print(f"{label:<46} n={len(millis):>3}  p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  max {max(millis):7.1f} ms{verdict}")


def timed_ms(work) -> tuple[float, object]:
    start = time.perf_counter()
    result = work()
    return (time.perf_counter() - start) * 1000.0, result


def busiest_annotator(engine) -> User:
    from sqlalchemy import func

    from db.rules.enums import AssignmentKind
    from db.store.models import Assignment

    with session_scope(engine, read_only=True) as session:
        user_id, count = session.exec(
            select(Assignment.user_id, func.count())
            .where(Assignment.kind == AssignmentKind.label)
            .group_by(Assignment.user_id)
            .order_by(func.count().desc())
            .limit(1)
        ).one()
        user = session.get(User, user_id)
    print(f"annotator {user.username} (group {user.group_no}): {count:,} responses in the queue")
    return user


def bench_queries(engine, user: User, samples: int, rng: random.Random) -> list[int]:
    with session_scope(engine, read_only=True) as session:
        queue = labeling.labeling_queue(session, user)
        token = users.open_session(session, user=user)
    ready = [item.response_id for item in queue.items if item.status != labeling.WAITING]
    picks = rng.sample(ready, min(samples, len(ready)))
    queue_ms, view_ms, token_ms = [], [], []
    for response_id in picks:
        with session_scope(engine, read_only=True) as session:
            ms, _ = timed_ms(lambda: users.user_for_token(session, token=token))
            token_ms.append(ms)
        with session_scope(engine, read_only=True) as session:
            ms, _ = timed_ms(lambda: labeling.labeling_queue(session, user))
            queue_ms.append(ms)
        with session_scope(engine, read_only=True) as session:
            ms, _ = timed_ms(lambda r=response_id: labeling.response_for_labeling(session, user, r))
            view_ms.append(ms)
    report("user_for_token (every run)", token_ms)
    report("response_for_labeling (every run)", view_ms)
    report("labeling_queue (first visit, then every 120 s)", queue_ms)
    report(
        "db calls of a run that reads the queue too",
        [a + b + c for a, b, c in zip(token_ms, queue_ms, view_ms)],
        PAGE_TARGET_MS,
    )
    return picks


def bench_saves(engine, user: User, response_ids: list[int], rng: random.Random) -> None:
    create_ms, change_ms, same_ms = [], [], []
    for response_id in response_ids:
        with session_scope(engine, read_only=True) as session:
            view = labeling.response_for_labeling(session, user, response_id)
        decisions = {c.criterion_id: rng.random() < 0.5 for c in view.criteria}
        notes = {c.criterion_id: "备注" for c in view.criteria if rng.random() < 0.1}
        had_labels = bool(view.labels)

        def save(decisions=decisions, notes=notes, view=view, response_id=response_id):
            with session_scope(engine) as session:
                return label_room.save(
                    session,
                    user,
                    "annotation",
                    response_id,
                    decisions=decisions,
                    notes=notes,
                    rubric_version_id=view.rubric_version_id,
                    expected_versions=view.expected_versions,
                )

        ms, _ = timed_ms(save)
        (change_ms if had_labels else create_ms).append(ms)
        ms, outcome = timed_ms(save)  # the same decisions again: idempotent
        assert outcome.changed == 0
        same_ms.append(ms)
    if create_ms:
        report("the labeling page's save, new labels", create_ms, SAVE_TARGET_MS)
    if change_ms:
        report("the labeling page's save, changing existing labels", change_ms, SAVE_TARGET_MS)
    report("the labeling page's save, same decisions again", same_ms, SAVE_TARGET_MS)
    report("the labeling page's save, all saves", create_ms + change_ms + same_ms, SAVE_TARGET_MS)


def ratio(label: str, ours: list[float], straightforward: list[float]) -> None:
    mine, theirs = statistics.median(ours), statistics.median(straightforward)
    print(f"{label:<46} straightforward / ours at p50: {theirs / mine:5.1f}x")


def _keep_draft(session, user: User, response_id: int, version: int, decisions: dict, active_ms: int) -> None:
    label_room.keep_draft(
        session, user, "annotation", response_id, rubric_version_id=version, decisions=decisions, active_ms=active_ms
    )


def _keep(engine, user: User, response_id: int, version: int, decisions: dict, active_ms: int) -> None:
    with session_scope(engine) as session:
        _keep_draft(session, user, response_id, version, decisions, active_ms)


def _reread_and_keep(engine, user: User, response_id: int, version: int, decisions: dict, active_ms: int) -> None:
    with session_scope(engine) as session:
        label_room.open(session, user, "annotation", response_id)
        _keep_draft(session, user, response_id, version, decisions, active_ms)


def bench_drafts(engine, user: User, response_ids: list[int], rng: random.Random) -> None:
    """Decision → draft saved: what the workbench's callback does on each key press."""
    ours, straightforward = [], []
    for n, response_id in enumerate(response_ids):
        with session_scope(engine, read_only=True) as session:
            bench = label_room.open(session, user, "annotation", response_id)
        decisions = dict(bench.decisions)
        version = bench.view.rubric_version_id
        for i, criterion_id in enumerate(list(decisions)[:DECISIONS_PER_RESPONSE]):
            decisions[criterion_id] = rng.random() < 0.5
            args = (engine, user, response_id, version, dict(decisions), 900 * i)
            # alternate which goes first, so neither always meets a warm cache
            if (n + i) % 2:
                straightforward.append(timed_ms(lambda args=args: _reread_and_keep(*args))[0])
                ours.append(timed_ms(lambda args=args: _keep(*args))[0])
            else:
                ours.append(timed_ms(lambda args=args: _keep(*args))[0])
                straightforward.append(timed_ms(lambda args=args: _reread_and_keep(*args))[0])
    report("decision -> draft saved (keep_draft)", ours, DRAFT_TARGET_MS)
    report("  straightforward: re-read response, then keep", straightforward)
    ratio("  decision -> draft saved", ours, straightforward)


def bench_save_and_next(engine, user: User, response_ids: list[int], rng: random.Random) -> None:
    """Save-and-next: the save (unjudged check, labels, timing, draft dropped), then the next response opened."""
    with session_scope(engine, read_only=True) as session:
        queue = labeling.labeling_queue(session, user)
    ours, straightforward = [], []
    for n, response_id in enumerate(response_ids):
        with session_scope(engine, read_only=True) as session:
            bench = label_room.open(session, user, "annotation", response_id)
        decisions = {cid: rng.random() < 0.5 for cid in bench.decisions}

        def save_and_next(bench=bench, decisions=decisions, response_id=response_id):
            nonlocal queue
            with session_scope(engine) as session:
                label_room.save(
                    session,
                    user,
                    "annotation",
                    response_id,
                    rubric_version_id=bench.view.rubric_version_id,
                    decisions=decisions,
                    expected_versions=bench.view.expected_versions,
                    active_ms=30_000,
                )
            queue = queue.with_saved(response_id)  # the page updates its kept queue in place
            following = queue.next_after(response_id)
            if following is not None:
                with session_scope(engine, read_only=True) as session:
                    label_room.open(session, user, "annotation", following.response_id)

        def save_recount_and_next(bench=bench, decisions=decisions, response_id=response_id):
            with session_scope(engine) as session:
                label_room.save(
                    session,
                    user,
                    "annotation",
                    response_id,
                    rubric_version_id=bench.view.rubric_version_id,
                    decisions=decisions,
                    expected_versions=bench.view.expected_versions,
                    active_ms=30_000,
                )
            with session_scope(engine, read_only=True) as session:
                fresh = labeling.labeling_queue(session, user)  # the whole queue counted again
                following = fresh.next_after(response_id)
                if following is not None:
                    label_room.open(session, user, "annotation", following.response_id)

        # each response is saved once (a second save of the same decisions would be a no-op)
        if n % 2:
            straightforward.append(timed_ms(save_recount_and_next)[0])
        else:
            ours.append(timed_ms(save_and_next)[0])
    report("save-and-next (save, next opened)", ours, SAVE_AND_NEXT_TARGET_MS)
    report("  straightforward: save, recount queue, next", straightforward)
    ratio("  save-and-next", ours, straightforward)


def bench_page(url: str, user: User, runs: int) -> None:
    import streamlit as st
    from streamlit.testing.v1 import AppTest
    from streamlit.util import calc_hash

    from db.store.engine import get_engine

    os.environ["DATABASE_URL"] = url
    get_engine.cache_clear()
    st.cache_resource.clear()
    engine = make_engine(url)
    with session_scope(engine) as session:
        token = users.open_session(session, user=session.get(User, user.id))
    engine.dispose()
    app = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=120)
    app.session_state["token"] = token
    app.run()
    app._page_hash = calc_hash("annotate-labeling")
    app.run()  # first visit: caches, imports
    if app.exception:
        raise RuntimeError(f"the labeling page failed: {app.exception}")
    from ui import shell

    sidebar_ms: list[float] = []
    sidebar = shell.sidebar

    def timed_sidebar(*args, **kwargs):
        ms, result = timed_ms(lambda: sidebar(*args, **kwargs))
        sidebar_ms.append(ms)
        return result

    shell.sidebar = timed_sidebar
    millis = []
    try:
        for _ in range(runs):
            ms, _ = timed_ms(app.run)
            millis.append(ms)
    finally:
        shell.sidebar = sidebar
    report("labeling page, whole AppTest run", millis, PAGE_TARGET_MS)
    report("  of which the shell's sidebar", sidebar_ms)
    report("  the page without the sidebar", [a - b for a, b in zip(millis, sidebar_ms)], PAGE_TARGET_MS)
    buttons = [b for b in app.button if b.key == "annotate_label_save_next"]
    if buttons:
        save_runs = []
        for _ in range(min(runs, 10)):
            buttons = [b for b in app.button if b.key == "annotate_label_save_next"]
            ms, _ = timed_ms(lambda first=buttons[0]: first.click().run())
            save_runs.append(ms)
        report("labeling page, save-and-next run", save_runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="a full-scale database (default: build one on each database)")
    parser.add_argument("--keep", help="build into this SQLite file, keep it and measure only there")
    parser.add_argument("--skip-postgres", action="store_true", help="without --database: SQLite only")
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--page-runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--cases", type=int, default=None, help="without --database: cases to build (default 2,500)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    if args.database:
        url = args.database
    elif args.keep:
        url = f"sqlite:///{Path(args.keep).resolve()}"
        build_full(url, cases=args.cases)
    else:
        rest = sys.argv[1:] if argv is None else list(argv)
        return run_on_both("benchmarks.bench_labeling", rest, postgres=not args.skip_postgres, cases=args.cases)
    engine = make_engine(url)
    upgrade(engine)
    user = busiest_annotator(engine)
    if user.role != Role.annotator:
        raise SystemExit("the busiest assignee is not an annotator")
    picks = bench_queries(engine, user, args.samples, rng)
    bench_saves(engine, user, picks[: max(1, args.samples // 2)], rng)
    bench_drafts(engine, user, picks[: max(1, args.samples // 4)], rng)
    with session_scope(engine, read_only=True) as session:
        queue = labeling.labeling_queue(session, user)
    used = set(picks)
    fresh = [
        item.response_id for item in queue.items if item.status != labeling.WAITING and item.response_id not in used
    ]
    bench_save_and_next(engine, user, rng.sample(fresh, min(args.samples, len(fresh))), rng)
    engine.dispose()
    bench_page(url, user, args.page_runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
