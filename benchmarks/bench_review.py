"""How long the checker's queries take on a full-scale database (prints figures; asserts nothing about time).

Give it a database filled by `clinconsensus demo --scale full` (1.65 M annotation labels plus checks
and adjudications), or none: it then builds the full scale on both databases (benchmarks/full_scale.py)
and measures each. Each query runs `--repeat` times; the best and the median are printed.

    .venv/bin/python -m benchmarks.bench_review [--database sqlite:///path/full.db] [--repeat 3] [--cases N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from sqlalchemy import func, select

from db import review
from db.rules.enums import Role, Stage
from db.store.engine import make_engine, session_scope
from db.store.models import Label, User


def timed(label: str, repeat: int, work):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    print(f"{label:<46} best {min(times):7.3f} s   median {statistics.median(times):7.3f} s")
    return result


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="SQLAlchemy URL of a filled database (default: build one on each)")
    parser.add_argument("--skip-postgres", action="store_true", help="without --database: SQLite only")
    parser.add_argument("--cases", type=int, default=None, help="without --database: cases to build (default 2,500)")
    parser.add_argument("--repeat", type=int, default=3)
    return parser.parse_args(argv)


def in_session(engine, call):
    """`call(session)` in a read-only session of its own, as a page's query runs."""

    def run():
        with session_scope(engine, read_only=True) as s:
            return call(s)

    return run


def checker_to_time(engine) -> tuple[int, User, int]:
    """(labels, the first checker as an active member of a group, an annotator of that group)."""
    with session_scope(engine, read_only=True) as s:
        n_labels = s.execute(select(func.count()).select_from(Label)).scalar_one()
        checker = s.execute(select(User).where(User.role == Role.checker).order_by(User.id)).scalars().first()
        s.expunge(checker)
        if checker.group_no is None or not checker.is_active:
            # Imported checkers are inactive placeholders without a group: time as an active group-1 checker.
            checker.group_no, checker.is_active = 1, True
        annotator_id = s.execute(
            select(Label.user_id).where(Label.stage == Stage.annotation, Label.group_no == checker.group_no).limit(1)
        ).scalar_one()
    return n_labels, checker, annotator_id


def adjudication_figures(engine, checker: User, repeat: int) -> None:
    """The disagreement counts, the adjudication queue and the first response's view."""
    count = timed("unresolved_count", repeat, in_session(engine, review.unresolved_count))
    ready = timed(
        "ready_for_adjudication", repeat, in_session(engine, lambda s: review.ready_for_adjudication(s, checker))
    )
    mine = timed(
        "my_unresolved_count (sidebar)", repeat, in_session(engine, lambda s: review.my_unresolved_count(s, checker))
    )
    queue = timed("adjudication_queue", repeat, in_session(engine, lambda s: review.adjudication_queue(s, checker)))
    print(f"  unresolved disagreements: {count:,}   the checker's: {mine:,}   responses in the queue: {len(queue):,}")
    print(f"  responses the checker may take into adjudication: {len(ready):,}")
    if queue:
        view = timed(
            "adjudication_view (lowest agreement)",
            repeat,
            in_session(engine, lambda s: review.adjudication_view(s, checker, queue[0].response_id)),
        )
        print(f"  cells on screen: {len(view.cells)}")


def check_figures(engine, checker: User, annotator_id: int, repeat: int) -> None:
    """The label check's queues (all, a sample, where a judge differs) and the first response's view."""
    items = timed(
        "check_queue all (one annotator)",
        repeat,
        in_session(engine, lambda s: review.check_queue(s, checker, annotator_id=annotator_id)),
    )
    sample = timed(
        "check_queue sample 10%",
        repeat,
        in_session(
            engine,
            lambda s: review.check_queue(s, checker, annotator_id=annotator_id, mode="sample", percent=10, seed=1),
        ),
    )
    print(f"  responses of the annotator: {len(items):,}   in the sample: {len(sample):,}")
    judges = timed("judge_names", 1, in_session(engine, review.judge_names))
    if judges:
        timed(
            f"check_queue judge ({judges[0]})",
            repeat,
            in_session(
                engine,
                lambda s: review.check_queue(s, checker, annotator_id=annotator_id, mode="judge", judge=judges[0]),
            ),
        )
    if items:
        timed(
            "check_view (one response)",
            repeat,
            in_session(engine, lambda s: review.check_view(s, checker, items[0].response_id)),
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    if not args.database:
        from benchmarks.full_scale import run_on_both

        rest = sys.argv[1:] if argv is None else list(argv)
        return run_on_both("benchmarks.bench_review", rest, postgres=not args.skip_postgres, cases=args.cases)
    engine = make_engine(args.database)
    n_labels, checker, annotator_id = checker_to_time(engine)
    database = engine.url.render_as_string(hide_password=True)
    print(f"database: {database}  labels: {n_labels:,}  checker: {checker.username}")
    adjudication_figures(engine, checker, args.repeat)
    check_figures(engine, checker, annotator_id, args.repeat)
    stale = timed("labels_needing_relabel (all)", args.repeat, in_session(engine, review.labels_needing_relabel))
    print(f"  labels needing relabeling: {len(stale):,}")
    timed("rubric_queue", args.repeat, in_session(engine, lambda s: review.rubric_queue(s, checker)))
    engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
