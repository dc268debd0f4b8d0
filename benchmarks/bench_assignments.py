"""How long handing out work and reading progress take at full scale (prints figures; asserts nothing).

Without `--database` it builds a fresh SQLite file with 2,500 cases (approved rubrics of 30
criteria), 11 responses per case and 10 annotators per group, then times:
- assign_labeling of every response (55,000 assignments, balanced, author-excluded, audited);
- the same call again (idempotent: nothing new);
- progress() for the admin page (without and with the disagreement count);
- one annotator's queue (my_queue, both kinds).
With `--database URL` (e.g. a `clinconsensus demo --scale full` database) the same calls run there;
assign_labeling then adds only what is missing.

    .venv/bin/python -m benchmarks.bench_assignments [--database URL] [--cases 2500] [--models 11]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, insert
from sqlmodel import select

from db.migrations.upgrade import upgrade
from db.rules.enums import AssignmentKind, Role, RubricStatus
from db.rules.security import hash_password
from db.store.engine import make_engine, session_scope
from db.store.models import Assignment, Case, Criterion, Response, RubricVersion, User, utcnow
from db.work import assignments, progress as progress_queries

ANNOTATORS_PER_GROUP = 10


def timed(label: str, work):
    start = time.perf_counter()
    result = work()
    print(f"{label:<52} {time.perf_counter() - start:8.2f} s")
    return result


def build(engine, n_cases: int, n_models: int) -> None:
    now = utcnow()
    password = hash_password("bench-password-1")
    with session_scope(engine) as session:
        people = [dict(username="bench-admin", display_name="admin", role=Role.admin.value, group_no=None)]
        people += [
            dict(username=f"bench-g{g}-{i:02d}", display_name=f"g{g}-{i}", role=Role.annotator.value, group_no=g)
            for g in (1, 2)
            for i in range(ANNOTATORS_PER_GROUP)
        ]
        session.execute(
            insert(User),
            [dict(p, is_active=True, password_hash=password, created_at=now, lock_version=1) for p in people],
        )
        authors = session.execute(select(User.id).where(User.role == Role.annotator).order_by(User.id)).scalars().all()
        session.execute(
            insert(Case),
            [
                dict(
                    case_id=f"BENCH-{i:05d}",
                    difficulty="medium",
                    task="t",
                    task_labels=[],
                    subject="心内科",
                    subject_labels=["心内科"],
                    user_role="患者",
                    clinical_context="…",
                    user_request="…",
                    extra={},
                    created_at=now,
                )
                for i in range(n_cases)
            ],
        )
        case_pks = session.execute(select(Case.id).order_by(Case.id)).scalars().all()
        session.execute(
            insert(RubricVersion),
            [
                dict(
                    case_pk=pk,
                    version=1,
                    status=RubricStatus.approved.value,
                    author_id=authors[i % len(authors)],
                    created_at=now,
                    lock_version=1,
                )
                for i, pk in enumerate(case_pks)
            ],
        )
        versions = session.execute(select(RubricVersion.id).order_by(RubricVersion.id)).scalars().all()
        session.execute(
            insert(Criterion),
            [
                dict(rubric_version_id=v, position=p, criterion_id=f"c{p:02d}", text="…", tags=[])
                for v in versions
                for p in range(1, 31)
            ],
        )
        session.execute(
            insert(Response),
            [
                dict(case_pk=pk, model=f"model-{m:02d}", text="…", length=1, code=f"B{pk:06d}{m:02d}", created_at=now)
                for pk in case_pks
                for m in range(n_models)
            ],
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=None, help="SQLAlchemy URL of a filled database (default: build one)")
    parser.add_argument("--cases", type=int, default=2500)
    parser.add_argument("--models", type=int, default=11)
    args = parser.parse_args(argv)
    folder = None
    if args.database:
        engine = make_engine(args.database)
    else:
        folder = tempfile.TemporaryDirectory(prefix="bench-assign-")
        engine = make_engine(f"sqlite:///{Path(folder.name) / 'bench.db'}")
        upgrade(engine)
        timed(f"build {args.cases:,} cases x {args.models} responses", lambda: build(engine, args.cases, args.models))
    with session_scope(engine, read_only=True) as session:
        admin = session.exec(select(User).where(User.role == Role.admin).order_by(User.id)).first()
        people = [u.username for u in assignments.active_annotators(session)]
        n_responses = session.exec(select(func.count()).select_from(Response)).one()
    print(
        f"database: {engine.url.render_as_string(hide_password=True)}  responses: {n_responses:,}  "
        f"active annotators: {len(people)}"
    )

    def assign():
        with session_scope(engine) as session:
            return assignments.assign_labeling(session, actor=admin, annotators=people)

    first = timed("assign_labeling (all responses)", assign)
    print(
        f"  created {first.created:,}, already assigned {first.already_assigned:,}, "
        f"unassignable {len(first.unassignable):,}"
    )
    again = timed("assign_labeling again (idempotent)", assign)
    print(f"  created {again.created:,}, already assigned {again.already_assigned:,}")
    with session_scope(engine, read_only=True) as session:
        loads = session.exec(
            select(Assignment.user_id, func.count())
            .where(Assignment.kind == AssignmentKind.label)
            .group_by(Assignment.user_id)
        ).all()
        annotator = session.exec(
            select(User)
            .where(User.role == Role.annotator, User.is_active == True)  # noqa: E712
            .order_by(User.id)
        ).first()
    counts = sorted(n for _, n in loads)
    print(f"  per-annotator label load: min {counts[0]:,}  max {counts[-1]:,}")

    def read(call):
        def run():
            with session_scope(engine, read_only=True) as session:
                return call(session)

        return run

    timed(
        "progress (admin page, without disagreements)",
        read(lambda s: progress_queries.progress(s, actor=admin, with_disagreements=False)),
    )
    state = timed(
        "progress (admin page, with disagreements)", read(lambda s: progress_queries.progress(s, actor=admin))
    )
    print(f"  unresolved disagreements: {state.overall['unresolved_disagreements']:,}")
    queue = timed(f"my_queue label ({annotator.username})", read(lambda s: assignments.my_queue(s, annotator, "label")))
    print(f"  queue length {len(queue):,}")
    timed(f"my_progress ({annotator.username}, sidebar)", read(lambda s: progress_queries.my_progress(s, annotator)))
    engine.dispose()
    if folder is not None:
        folder.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
