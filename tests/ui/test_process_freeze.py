"""The server process freezes what its imports made, once: full collections stop walking them.

Run in a fresh interpreter, so nothing another test did is in the figures: before the app runs
nothing is frozen; the first run of the entry file freezes the imports (hundreds of thousands of
objects at this size of app); later runs freeze nothing more, and asking again does nothing (the
probe counts `gc.freeze` calls: the permanent generation's size moves a little as frozen objects die).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys
from streamlit.testing.v1 import AppTest
freezes = []
real_freeze = gc.freeze
def counted_freeze():
    freezes.append(gc.get_count())
    real_freeze()
gc.freeze = counted_freeze
before = gc.get_freeze_count()
app = AppTest.from_file({entry!r}, default_timeout=120)
app.run()
first = gc.get_freeze_count()
app.run()
from ui import process
again = process.freeze_imports_once()
print(json.dumps(dict(before=before, first=first, freezes=len(freezes), again=again,
                      errors=[e.message for e in app.exception], login="login_username" in app.session_state)))
"""


def test_the_first_run_freezes_the_imports_and_later_runs_do_not(sqlite_url):
    entry = str(ROOT / "streamlit_app.py")
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(entry=entry)],
        cwd=ROOT,
        env={"DATABASE_URL": sqlite_url, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["errors"] == [] and figures["login"], figures  # the app ran: the sign-in page
    assert figures["before"] == 0
    assert figures["first"] > 100_000, figures  # streamlit, pandas, sqlalchemy, the page modules
    assert figures["freezes"] == 1  # two runs and a third call: one freeze
    assert figures["again"] is False
