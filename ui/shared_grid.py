"""The decision grid of the whole database, built once per data version and shared by every analysis page.

The dashboard and the analysis-depth pages (criteria, judge errors, physicians) each keep what they
compute from the grid in a background value of their own; those builds all take the grid from here,
so a server process holds one grid per data version, not one per page.
The page-side helper `newest` shows the newest value built so far and refreshes the page when the
value of the current data version is in.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import streamlit as st

from analysis import grid_worker
from analysis.background import BackgroundValue
from analysis.grid import DecisionGrid
from db.store.data_version import data_version
from ui import shell
from ui.text import plain

GRID_WAIT_SECONDS = 900.0  # a background build waits this long for the shared grid of its version
QUICK_BUILD_LABELS = 200_000
QUICK_BUILD_WAIT_SECONDS = 60.0
POLL_SECONDS = 2  # how often a page showing an earlier data version looks for the new one

T = TypeVar("T")


class GridUnavailable(RuntimeError):
    """The shared grid of a data version could not be had in time."""


@dataclass(frozen=True)
class Newest(Generic[T]):
    """A value built from the shared grid, and the data version it was built from."""

    value: T
    version: Hashable


def pages_wait_for(version: Hashable) -> bool:
    """Whether a page waits for the build of `version` (a small database: under `QUICK_BUILD_LABELS` labels)."""
    return getattr(version, "approximate_labels", 0) < QUICK_BUILD_LABELS


@st.cache_resource(show_spinner=False)
def kept_grid() -> BackgroundValue[DecisionGrid]:
    """The decision grid of the database, built per data version in the background (one per process).

    A grid a page does not wait for (`QUICK_BUILD_LABELS` labels or more) is built by a worker process
    (`analysis.grid_worker`), so the pages of this one are not slowed by it; a small one here."""
    engine = shell.engine()

    def build(version: Hashable) -> DecisionGrid:
        return grid_worker.grid_of(engine, in_worker=not pages_wait_for(version))

    return BackgroundValue(build, name="analysis-grid")


def derived(build: Callable[[DecisionGrid], T], *, name: str) -> BackgroundValue[T]:
    """A background value computed from the shared grid: `build(grid)` runs once per data version.

    Call it inside a `st.cache_resource` function (one per process); the build waits for the shared
    grid of its version (and starts it when nobody has).
    """
    grids = kept_grid()

    def from_grid(version: Hashable) -> T:
        snapshot = grids.wait(version, GRID_WAIT_SECONDS)
        if snapshot.error is not None:
            raise snapshot.error
        if snapshot.value is None or not snapshot.current:
            raise GridUnavailable(f"the decision grid was not built within {GRID_WAIT_SECONDS:.0f} s")
        return build(snapshot.value)

    return BackgroundValue(from_grid, name=name)


@st.fragment(run_every=POLL_SECONDS)
def _reload_when_built(keeper: BackgroundValue[T], version: Hashable) -> None:
    """Reruns the page once the background build of `version` is in (or failed)."""
    snapshot = keeper.get(version)
    if snapshot.current or snapshot.error is not None:
        st.rerun()


def newest(keeper: BackgroundValue[T], t: shell.Translator) -> Newest[T] | None:
    """The newest value of `keeper` built so far, or None (with a note on the page) while there is none.

    A small database is ready in well under a second: the page waits for it, so it is always current.
    A large one never blocks the page: it shows the previous value, says so, and refreshes itself.
    """
    version = data_version(shell.engine())
    wait = QUICK_BUILD_WAIT_SECONDS if pages_wait_for(version) else 0.0
    snapshot = keeper.wait(version, wait)
    if snapshot.error is not None:
        st.error(t("analysis.error", reason=plain(str(snapshot.error))))
        return None
    if snapshot.value is None or snapshot.version is None:
        st.info(t("analysis.preparing"))
        _reload_when_built(keeper, snapshot.wanted)
        return None
    if not snapshot.current:
        st.caption(t("analysis.updating"))
        _reload_when_built(keeper, snapshot.wanted)
    return Newest(snapshot.value, snapshot.version)
