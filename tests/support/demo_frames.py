"""The small demo's frames, for test modules that check metrics on it (SQLite; the metric code is pure)."""

from __future__ import annotations

from analysis.frames import Frames
from analysis.loader import load_frames
from db.store.engine import make_engine
from demo import generator as demo
from tests.conftest import new_sqlite_url


def build_demo_frames(sqlite_template, tmp_path_factory) -> Frames:
    engine = make_engine(new_sqlite_url(sqlite_template, tmp_path_factory.mktemp("demo-frames")))
    demo.build_demo(engine, scale="small", seed=7)
    frames = load_frames(engine)
    engine.dispose()
    return frames
