"""The decision grid built in a process of its own, so a server keeps serving pages while it builds.

Why a process: built in a thread of the server, the grid holds Python's interpreter lock through
each of its whole-table steps (a fetch of every label, a factorize of every decision), and a page
rendered meanwhile waits out each step, so page time grew with the data. In a worker the build has a
core of its own, and the grid comes back pickled (figures in docs/performance.md).

A worker is `python -m analysis.grid_worker`: it imports what a build needs, waits for one
database URL on its standard input, writes the pickled grid (or the error it met) to its standard
output and exits, so the gigabyte a build reads goes back to the system. The next worker is started
when a build is done, so the next build does not wait for imports and no build shares the machine
with them. A database only this process can open (in-memory SQLite) is built in the calling thread,
and so is a small one a page waits for (`ui.shared_grid`): handing it to a worker costs more than
building it.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import cast

from sqlalchemy.engine import Engine

from analysis.grid import DecisionGrid, prepare
from analysis.loader import load_frames
from db.store.engine import make_engine

#: The folder that holds the `analysis` package, so a worker imports this code whatever its working folder.
PROJECT_ROOT = Path(__file__).resolve().parent.parent

_lock = threading.Lock()
_ready: subprocess.Popen | None = None


class WorkerStopped(RuntimeError):
    """The worker process ended before it returned a grid (killed, or out of memory)."""


def build_grid(url: str) -> DecisionGrid:
    """The decision grid of the database at `url`, on an engine of the calling process's own."""
    engine = make_engine(url)
    try:
        return prepare(load_frames(engine))
    finally:
        engine.dispose()


def grid_of(engine: Engine, *, in_worker: bool = True) -> DecisionGrid:
    """The decision grid of `engine`'s database, built in a worker when asked and another process can open it."""
    if not in_worker or not shareable(engine):
        return prepare(load_frames(engine))
    return built_in_worker(engine.url.render_as_string(hide_password=False))


def shareable(engine: Engine) -> bool:
    """Whether another process reaches the same data through `engine`'s URL (not in-memory SQLite)."""
    url = engine.url
    if url.get_backend_name() != "sqlite":
        return True
    database = url.database or ""
    return bool(database) and database != ":memory:" and "mode=memory" not in str(url)


def built_in_worker(url: str, *, request: bytes | None = None) -> DecisionGrid:
    """The grid of the database at `url`, built by a worker process (`request` replaces the line sent:
    for the tests of a worker that fails)."""
    worker = _take_worker()
    try:
        output, _ = worker.communicate((request if request is not None else url.encode("utf-8")) + b"\n")
    finally:
        _prepare_next_worker()
    if worker.returncode != 0 or not output:
        raise WorkerStopped(
            f"the analysis worker process stopped before it returned a grid (exit status {worker.returncode})"
        )
    outcome, value = pickle.loads(output)
    if outcome == "error":
        raise value
    return cast(DecisionGrid, value)


def _take_worker() -> subprocess.Popen:
    global _ready
    with _lock:
        worker, _ready = _ready, None
    return worker if worker is not None and worker.poll() is None else _start_worker()


def _prepare_next_worker() -> None:
    """Start the next worker once a build is done: its imports then take no core from a build."""
    global _ready
    with _lock:
        if _ready is None:
            _ready = _start_worker()


def _start_worker() -> subprocess.Popen:
    paths = [str(PROJECT_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return subprocess.Popen(
        [sys.executable, "-m", "analysis.grid_worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
    )


def _serve_one_request() -> int:
    url = sys.stdin.readline().strip()
    if not url:
        return 0  # the server closed without asking: nothing to build
    outcome: tuple[str, object]
    try:
        outcome = ("grid", build_grid(url))
    except Exception as error:  # returned to the page that asked, which shows it
        outcome = ("error", error)
    sys.stdout.buffer.write(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve_one_request())
