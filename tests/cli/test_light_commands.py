"""The commands that answer at once stay light: `--help`, a command's `--help` and `status` load none of the
libraries the report, the figures, the pages or password hashing need (each costs every command tenths of a
second: pandas alone 0.35 s). Each runs in a fresh interpreter, which is what a user's shell starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "pandas",
    "numpy",
    "scipy",
    "sklearn",
    "pyarrow",
    "plotly",
    "streamlit",
    "passlib",
    "argon2",
    "alembic",
    "db.rules.records",
)
_PROGRAM = """
import json, sys
from cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "loaded": [name for name in HEAVY if name in sys.modules]}), file=sys.stderr)
"""


def _loaded(database_url: str, *argv: str) -> tuple[int, list[str]]:
    program = f"HEAVY = {HEAVY!r}\n" + _PROGRAM
    result = subprocess.run(
        [sys.executable, "-c", program, *argv],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    outcome = json.loads(result.stderr.strip().splitlines()[-1])
    return outcome["code"], outcome["loaded"]


@pytest.mark.parametrize("argv", [("--help",), ("report", "--help"), ("export", "--help"), ("status",)])
def test_quick_commands_load_no_heavy_library(sqlite_url, argv):
    code, loaded = _loaded(sqlite_url, *argv)
    assert code == 0
    assert loaded == []


def test_the_check_sees_a_heavy_library_when_one_is_loaded(sqlite_url, tmp_path):
    # The same check on a command that needs pandas: it must report it (else the test above proves nothing).
    code, loaded = _loaded(sqlite_url, "report", "--json", str(tmp_path / "report.json"))
    assert code == 0
    assert "pandas" in loaded
