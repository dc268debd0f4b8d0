"""A value rebuilt in the background when the data version moves, shared by every session of the process.

The dashboard's decision grid takes seconds to build at full scale. A page asks for the value of
the current data version and gets at once the newest one built so far (with its version, so it can
say the figures are being updated), while one background thread builds the new one. Only the
very first build of a process has nothing to show; a page polls until it is ready.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Snapshot(Generic[T]):
    value: T | None  # None until a first build finished
    version: Hashable | None  # the data version `value` was built from
    wanted: Hashable  # the data version asked for
    error: Exception | None = None  # the last build's failure, when it failed for `wanted`

    @property
    def current(self) -> bool:
        return self.value is not None and self.version == self.wanted


class BackgroundValue(Generic[T]):
    """`get(version)` returns the newest built value and starts building `version` when it is newer."""

    def __init__(self, build: Callable[[Hashable], T], *, name: str = "background-build") -> None:
        self._build = build
        self._name = name
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._value: T | None = None
        self._version: Hashable | None = None
        self._building: Hashable | None = None
        self._failed: tuple[Hashable, Exception] | None = None
        self.last_build_seconds: float | None = None

    def get(self, version: Hashable) -> Snapshot[T]:
        with self._lock:
            failed = self._failed[1] if self._failed and self._failed[0] == version else None
            if version != self._version and self._building is None and failed is None:
                self._building = version
                threading.Thread(target=self._run, args=(version,), name=self._name, daemon=True).start()
            return Snapshot(self._value, self._version, version, failed)

    def wait(self, version: Hashable, timeout: float) -> Snapshot[T]:
        """As `get`, waiting up to `timeout` seconds for `version` to be built (or to fail)."""
        deadline = time.monotonic() + timeout
        while True:
            snapshot = self.get(version)  # starts the build of `version` once an older one is done
            left = deadline - time.monotonic()
            if snapshot.current or snapshot.error is not None or left <= 0:
                return snapshot
            with self._done:
                if self._building is not None:
                    self._done.wait(left)

    def _run(self, version: Hashable) -> None:
        started = time.perf_counter()
        try:
            value = self._build(version)
        except Exception as error:  # shown by the page that asked; the next version tries again
            with self._done:
                self._failed = (version, error)
                self._building = None
                self._done.notify_all()
            return
        with self._done:
            self._value, self._version, self._building, self._failed = value, version, None, None
            self.last_build_seconds = time.perf_counter() - started
            self._done.notify_all()
