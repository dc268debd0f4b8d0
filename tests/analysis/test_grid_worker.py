"""The kept decision grid is built in a worker process (`analysis.grid_worker`): the same grid as one built
in the calling process, on SQLite and PostgreSQL, and a worker that dies is said and replaced."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis import grid_worker, metrics
from analysis.grid import prepare
from analysis.loader import load_frames
from db.store.engine import make_engine
from tests.analysis.test_report import small_database  # noqa: F401  (fixture)


def assert_same(built_there, built_here, where: str = "grid") -> None:
    if isinstance(built_here, pd.DataFrame):
        pd.testing.assert_frame_equal(built_there, built_here)
    elif isinstance(built_here, np.ndarray):
        assert built_there.dtype == built_here.dtype, where
        np.testing.assert_array_equal(built_there, built_here, err_msg=where)
    elif isinstance(built_here, dict):
        assert built_there.keys() == built_here.keys(), where
        for key in built_here:
            assert_same(built_there[key], built_here[key], f"{where}[{key!r}]")
    elif isinstance(built_here, (list, tuple)):
        assert len(built_there) == len(built_here), where
        for index, (there, here) in enumerate(zip(built_there, built_here)):
            assert_same(there, here, f"{where}[{index}]")
    elif hasattr(built_here, "__dict__"):
        assert type(built_there) is type(built_here), where
        assert vars(built_there).keys() == vars(built_here).keys(), where
        for name, value in vars(built_here).items():
            assert_same(getattr(built_there, name), value, f"{where}.{name}")
    else:
        assert built_there == built_here, where


def test_the_worker_builds_the_grid_built_here(small_database, engine):  # noqa: F811
    assert grid_worker.shareable(engine)
    built_there = grid_worker.grid_of(engine)
    built_here = prepare(load_frames(engine))
    assert built_here.n.sum() > 0 and (built_here.gold >= 0).any()  # a grid with gold decisions in it
    assert_same(built_there, built_here)
    # and the figures read from it are the same
    there, here = (metrics.model_scores(grid, metrics.response_scores(grid), 2) for grid in (built_there, built_here))
    pd.testing.assert_frame_equal(there, here)
    assert len(here) == 2


def test_an_in_memory_database_is_built_here():
    assert not grid_worker.shareable(make_engine("sqlite://"))
    assert not grid_worker.shareable(make_engine("sqlite:///:memory:"))
    assert grid_worker.shareable(make_engine("postgresql+psycopg://someone@127.0.0.1:5/x"))


def test_a_failing_build_is_said_and_the_next_worker_serves(small_database, engine):  # noqa: F811
    with pytest.raises(Exception, match="nosuchdb|unable to open|does not exist"):
        grid_worker.built_in_worker("sqlite:////nosuchdir/nosuchdb.sqlite")
    with pytest.raises(grid_worker.WorkerStopped, match="stopped before it returned a grid"):
        grid_worker.built_in_worker("", request=b"\n")  # a worker asked nothing exits with no grid
    assert grid_worker.grid_of(engine).n.sum() > 0
