"""The runner core shared by `judge run` and `generate`: one pass of a recorded run over its endpoints.

A job (grading items, or answering cases) says what its items are, how one is answered through an
endpoint, how a cached answer reads, and how answers are stored; this module does the rest, the
same for both. Each endpoint gets `concurrency` workers taking items from one queue, so each has its
own limit and a faster server simply takes more; an item whose endpoint is left out goes back to the
queue for the others (each endpoint tries it once). Items answered before are looked up in the
job's cache, chunk by chunk, and never sent. Answers are written a few times a second with the
run's counts and each endpoint's share; the record's cancel flag, SIGTERM and SIGINT stop the pass
after the items in flight. A run whose process died resumes from the cache (`judge resume ID`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from db.rules.enums import JudgeRunStatus
from db.rules.errors import ClinConsensusError, Said
from db.rules.progress_report import Progress, no_progress
from db.store.engine import session_scope
from db.work import judge_runs
from judge.endpoints import Endpoint, EndpointLost, EndpointOptions

FLUSH_SECONDS = 0.5
CANCELLED_ON_REQUEST = Said("cancelled on request", "judge.message.cancelled")
INTERRUPTED = Said("interrupted", "judge.message.interrupted")
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Job(Protocol):
    """What a kind of run brings to the core."""

    total: int

    def chunks(self) -> Iterable[list[Any]]: ...  # items, each with a `cache_key`

    def lookup(self, connection: Connection, keys: list[str]) -> dict[str, Any]: ...

    def cached(self, item: Any, hit: Any) -> Any: ...  # the answer read from the cache

    async def answer(self, item: Any, endpoint: Endpoint) -> Any | None: ...  # None: not answered

    def tally(self, answer: Any, counts: judge_runs.RunCounts) -> None: ...

    def store(self, session: Session, answers: list[Any]) -> None: ...


class CaseJob:
    """The item list of a job with one item per case (generate, draft): its total, and its chunks, each looked
    up in the cache at once. The kind adds how an item is answered, read from the cache, tallied and stored."""

    #: Items looked up in the cache at once.
    chunk_size = 500

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.total = len(items)

    def chunks(self) -> Iterator[list[Any]]:
        for start in range(0, len(self.items), self.chunk_size):
            yield self.items[start : start + self.chunk_size]


@dataclass
class Prepared:
    """A recorded run made ready: its options, its job, whether it may ask for structured output."""

    options: EndpointOptions
    job: Job
    structured_mode: str | None = None


@dataclass
class Outcome:
    status: str = JudgeRunStatus.finished
    message: Said | None = None


class Pass:
    """One execution of a run: the endpoints, the queue, the counters, the answers waiting to be written."""

    def __init__(self, engine: Engine, run_id: int, prepared: Prepared, progress: Progress) -> None:
        self.engine, self.run_id, self.job, self.progress = engine, run_id, prepared.job, progress
        self.options = prepared.options
        self.counts = judge_runs.RunCounts()
        self.endpoints = [
            Endpoint(url, self.options, self.counts, prepared.structured_mode) for url in self.options.urls()
        ]
        self.pending: list[Any] = []
        self.done_total = self.answered = 0
        self.started = time.monotonic()
        self.stop = asyncio.Event()
        self.outcome = Outcome()
        self.last_flush = time.monotonic()
        self.flush_lock = asyncio.Lock()
        self.queue: asyncio.Queue = asyncio.Queue()
        workers = sum(self.options.concurrency for _ in self.endpoints)
        self.room = asyncio.Semaphore(2 * workers)  # items queued ahead of the workers
        self.busy: set[asyncio.Task] = set()
        self.failure: list[BaseException] = []

    # answering ------------------------------------------------------------------------------------

    async def _worker(self, endpoint: Endpoint) -> None:
        while not self.stop.is_set() and endpoint.left_out is None:
            item, tried = await self.queue.get()
            task = asyncio.current_task()
            assert task is not None
            self.busy.add(task)
            try:
                if not tried:
                    self.room.release()  # a fresh item left the queue (items sent back took no room)
                await self._serve(item, tried, endpoint)
            finally:
                self.busy.discard(task)
                self.queue.task_done()

    async def _serve(self, item: Any, tried: frozenset[str], endpoint: Endpoint) -> None:
        try:
            answer = await self.job.answer(item, endpoint)
        except EndpointLost:
            answer = None
        if answer is None:
            # Not answered here: another endpoint that has not tried it takes it, else it is an error.
            tried = tried | {endpoint.url}
            if any(other.left_out is None and other.url not in tried for other in self.endpoints):
                self.queue.put_nowait((item, tried))
            else:
                self._give_up(endpoint)
            self._check_endpoints()
            return
        endpoint.share.done += 1
        self.answered += 1
        self._record(answer)

    def _give_up(self, endpoint: Endpoint) -> None:
        """The item is not answered: an error, not cached, sent again by the next run."""
        self.counts.errors += 1
        if self.outcome.message is None and endpoint.last_error:
            retries, reason = self.options.max_retries, endpoint.last_error
            self.outcome.message = Said(
                f"some items failed after {retries} retries: {reason}",
                "judge.message.some_failed",
                retries=retries,
                reason=reason,
            )

    def _check_endpoints(self) -> None:
        if all(endpoint.left_out is not None for endpoint in self.endpoints) and not self.stop.is_set():
            reasons = [endpoint.left_out or Said("") for endpoint in self.endpoints]
            message = (
                reasons[0]
                if len(reasons) == 1
                else _each_said("every endpoint failed", "judge.message.every_endpoint_failed", reasons)
            )
            self.outcome = Outcome(JudgeRunStatus.failed, message)
            self.stop.set()

    def _record(self, answer: Any) -> None:
        self.pending.append(answer)
        self.counts.done += 1
        self.done_total += 1
        if getattr(answer, "from_cache", False):
            self.counts.cached += 1
        self.job.tally(answer, self.counts)

    async def _feed(self) -> None:
        for chunk in self.job.chunks():
            if self.stop.is_set():
                return
            hits = await asyncio.to_thread(self._lookup, [item.cache_key for item in chunk])
            for item in chunk:
                hit = hits.get(item.cache_key)
                if hit is not None:
                    self._record(self.job.cached(item, hit))
                    continue
                await self.room.acquire()
                if self.stop.is_set():
                    return
                self.queue.put_nowait((item, frozenset()))
            await asyncio.sleep(0)

    def _lookup(self, keys: list[str]) -> dict:
        with self.engine.connect() as connection:
            return self.job.lookup(connection, keys)

    # writing --------------------------------------------------------------------------------------

    def _store(self, answers: list, counts: judge_runs.RunCounts, seconds: float, shares: dict) -> bool:
        with session_scope(self.engine) as session:
            if answers:
                self.job.store(session, answers)
            return judge_runs.record_progress(session.connection(), self.run_id, counts, seconds, shares)

    async def flush(self) -> None:
        async with self.flush_lock:
            answers, self.pending = self.pending, []
            counts = self.counts.take()
            shares = {endpoint.url: endpoint.share.take() for endpoint in self.endpoints}
            now = time.monotonic()
            seconds, self.last_flush = now - self.last_flush, now
            cancel = await asyncio.to_thread(self._store, answers, counts, seconds, shares)
            self.progress(self.done_total, self.job.total, self._note(now))
            if cancel and not self.stop.is_set():
                self.outcome = Outcome(JudgeRunStatus.cancelled, CANCELLED_ON_REQUEST)
                self.stop.set()

    def _note(self, now: float) -> str:
        rate = self.answered / (now - self.started) if now > self.started else 0
        remaining = max(self.job.total - self.done_total, 0)
        if not rate or not remaining:
            return "items"
        minutes, seconds = divmod(int(remaining / rate), 60)
        return f"items, {rate:.1f}/s, ETA {minutes // 60}:{minutes % 60:02d}:{seconds:02d}"

    async def _flusher(self) -> None:
        while not self.stop.is_set():
            try:
                await asyncio.wait_for(self.stop.wait(), FLUSH_SECONDS)
            except TimeoutError:
                await self.flush()

    # the pass -------------------------------------------------------------------------------------

    async def execute(self) -> Outcome:
        flusher = asyncio.create_task(self._flusher())
        workers = [
            asyncio.create_task(self._worker(endpoint))
            for endpoint in self.endpoints
            for _ in range(self.options.concurrency)
        ]
        for task in workers:
            task.add_done_callback(self._worker_ended)
        feed = asyncio.create_task(self._feed())
        drained = asyncio.create_task(self._drained(feed))
        stopped = asyncio.create_task(self.stop.wait())
        try:
            await asyncio.wait({drained, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if drained.done() and not drained.cancelled() and drained.exception() is not None:
                self.failure.append(drained.exception())  # type: ignore[arg-type]
            self.stop.set()
            feed.cancel()
            # Idle workers wait for an item that will not come; busy ones finish the item in hand.
            for task in workers:
                if task not in self.busy:
                    task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        except asyncio.CancelledError:
            self.outcome = Outcome(JudgeRunStatus.cancelled, INTERRUPTED)
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        finally:
            for pending in (feed, drained, stopped):
                pending.cancel()
            await asyncio.gather(feed, drained, stopped, return_exceptions=True)
            self.stop.set()
            await flusher
            await self.flush()
            for endpoint in self.endpoints:
                await endpoint.close()
        if self.failure:
            error = self.failure[0]
            self.outcome = Outcome(JudgeRunStatus.failed, _failure_said(error))
        elif self.outcome.status == JudgeRunStatus.finished:
            self._note_left_out()
        return self.outcome

    async def _drained(self, feed: asyncio.Task) -> None:
        await feed
        await self.queue.join()

    def _worker_ended(self, task: asyncio.Task) -> None:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            self.failure.append(error)
            self.stop.set()

    def _note_left_out(self) -> None:
        left = [endpoint.left_out for endpoint in self.endpoints if endpoint.left_out]
        if left:
            said = _each_said("left out", "judge.message.left_out", left)
            if self.outcome.message:
                said = Said(
                    f"{said}; {self.outcome.message}", "judge.message.and", first=said, second=self.outcome.message
                )
            self.outcome.message = said


def _joined(parts: list[Said]) -> Said:
    """Sentences one after another ("a; b; c"), each in the reader's language on the page."""
    if len(parts) == 1:
        return parts[0]
    rest = _joined(parts[1:])
    return Said(f"{parts[0]}; {rest}", "judge.message.and", first=parts[0], second=rest)


def _each_said(english: str, key: str, parts: list[Said]) -> Said:
    """ "every endpoint failed: a; b" or "left out: a; b": a lead and the joined reasons."""
    joined = _joined(parts)
    return Said(f"{english}: {joined}", key, reasons=joined)


def _failure_said(error: BaseException) -> Said:
    """Why a run failed: a refusal of the data layer in its own words, anything else by its type."""
    if isinstance(error, ClinConsensusError):
        return Said(str(error), error.key, **error.params)
    return Said(f"{type(error).__name__}: {error}", "judge.message.crashed", error=f"{type(error).__name__}: {error}")


def recorded_run(engine: Engine, run_id: int) -> dict:
    """The run record `run_id` as `judge runs` shows it."""
    with session_scope(engine, read_only=True) as session:
        return judge_runs.run_summary(judge_runs.get_run(session, "cli", run_id))


def execute_prepared(
    engine: Engine, run_id: int, prepare: Callable[[], Prepared], progress: Progress = no_progress
) -> dict:
    """Run (or resume) the recorded run `run_id` to its end; returns its summary (as `judge runs` shows it)."""
    try:
        prepared = prepare()
    except ClinConsensusError as error:
        with session_scope(engine) as session:  # the record says why (a page started it in the background)
            judge_runs.end_run(session, run_id, JudgeRunStatus.failed, _failure_said(error))
        raise
    with session_scope(engine) as session:
        judge_runs.begin_run(
            session, run_id, items=prepared.job.total, pid=os.getpid(), base_urls=prepared.options.urls()
        )
    outcome = asyncio.run(_main(engine, run_id, prepared, progress))
    with session_scope(engine) as session:
        judge_runs.end_run(session, run_id, outcome.status, outcome.message)
    with session_scope(engine, read_only=True) as session:
        return judge_runs.run_summary(judge_runs.get_run(session, "cli", run_id))


async def _main(engine: Engine, run_id: int, prepared: Prepared, progress: Progress) -> Outcome:
    run = Pass(engine, run_id, prepared, progress)
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        # Outside the main thread (a page's worker) there are no signal handlers: its cancel flag stops it.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal_number, lambda: _interrupt(run))
    return await run.execute()


def _interrupt(run: Pass) -> None:
    run.outcome = Outcome(JudgeRunStatus.cancelled, INTERRUPTED)
    run.stop.set()


def launch_run(run_id: int, database_url: str) -> int:
    """Execute a recorded run (judge or generate) in a process of its own (`clinconsensus judge resume ID`);
    returns its pid.

    The process outlives the page that started it; the page follows it through the run record and
    stops it through the record's cancel flag. It reads the API key from its own environment.
    """
    command = [sys.executable, "-m", "cli.main", "judge", "resume", str(run_id)]
    process = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DATABASE_URL": database_url},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return process.pid
