"""Progress reporting for long work: `progress(done, total, note)`, from the command line or a page."""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO


class Progress(Protocol):
    def __call__(self, done: int, total: int | None = None, note: str = "") -> None: ...


def no_progress(done: int, total: int | None = None, note: str = "") -> None:
    return None


class TerminalProgress:
    """Prints at most a few lines a second; a final line when done reaches total."""

    def __init__(self, label: str, stream: TextIO = sys.stderr, interval: float = 1.0) -> None:
        self.label = label
        self.stream = stream
        self.interval = interval
        self._last = 0.0
        self._started = time.monotonic()

    def __call__(self, done: int, total: int | None = None, note: str = "") -> None:
        now = time.monotonic()
        finished = total is not None and done >= total
        if not finished and now - self._last < self.interval:
            return
        self._last = now
        share = f" ({done / total:.0%})" if total else ""
        of_total = f"/{total:,}" if total else ""
        suffix = f" {note}" if note else ""
        print(
            f"{self.label}: {done:,}{of_total}{share} {now - self._started:.1f}s{suffix}", file=self.stream, flush=True
        )
