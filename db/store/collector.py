"""Python's cyclic garbage collector paused around bulk work in this process (`collector_paused`)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _CollectorPause:
    """The collector off while any bulk work runs in this process, back on after the last.

    A label import of millions of lines allocates a row, an audit row and a driver row per line while a large
    heap (the file's keys, the targets) stays alive; the audit replay decodes millions of small lists from the
    log's bulk entries while it holds the replayed state. Each collection walks those young objects again, and
    each full one the whole heap, so the collections grew faster than the data (docs/performance.md). Neither
    makes cycles worth collecting before it ends. The collector is process-wide and such work may run at once
    (two admins on one server), so a count of running work decides: the first pauses it, the last restores it
    as it was.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._was_enabled = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._running == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0 and self._was_enabled:
                    gc.enable()


#: `with collector_paused():` around a bulk import or the audit replay (see `_CollectorPause`).
collector_paused = _CollectorPause()
