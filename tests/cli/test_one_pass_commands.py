"""The commands that read everything once (`report`, `export`, `audit verify`) run as one pass: numpy is imported
without its 2 MB pages. The other commands, and `clinconsensus serve`'s server with them, keep numpy's default.
Each runs in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlmodel import Session

from db.store.engine import make_engine
from tests.analysis.test_report import populate_small_database

ROOT = Path(__file__).resolve().parents[2]
# Records the switch numpy reads when it is first imported, then reports it.
_PROGRAM = """
import builtins, json, os, sys
seen = []
_import = builtins.__import__
def _watch(name, *args, **kwargs):
    if name.split(".")[0] == "numpy" and "numpy" not in sys.modules and not seen:
        seen.append(os.environ.get("NUMPY_MADVISE_HUGEPAGE"))
    return _import(name, *args, **kwargs)
builtins.__import__ = _watch
from cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "numpy_saw": seen}), file=sys.stderr)
"""


def _run(database_url: str, *argv: str, environment: dict[str, str] | None = None) -> dict:
    env = {key: value for key, value in os.environ.items() if key != "NUMPY_MADVISE_HUGEPAGE"}
    result = subprocess.run(
        [sys.executable, "-c", _PROGRAM, *argv],
        cwd=ROOT,
        env={**env, "DATABASE_URL": database_url, **(environment or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return json.loads(result.stderr.strip().splitlines()[-1])


@pytest.fixture
def small_database(sqlite_url) -> str:
    engine = make_engine(sqlite_url)
    with Session(engine, expire_on_commit=False) as session:
        populate_small_database(session)
    engine.dispose()
    return sqlite_url


def test_report_and_export_run_as_one_pass(small_database, tmp_path):
    for argv in (
        ("report", "--k", "2", "--json", str(tmp_path / "report.json")),
        ("export", "gold", str(tmp_path / "g.jsonl")),
    ):
        outcome = _run(small_database, *argv)
        assert outcome["code"] == 0, argv
        assert outcome["numpy_saw"] == ["0"], argv
    assert json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))["models"]


def test_a_setting_of_numpys_switch_in_the_environment_is_kept(small_database, tmp_path):
    outcome = _run(
        small_database,
        "report",
        "--k",
        "2",
        "--json",
        str(tmp_path / "r.json"),
        environment={"NUMPY_MADVISE_HUGEPAGE": "1"},
    )
    assert outcome["code"] == 0 and outcome["numpy_saw"] == ["1"]


def test_other_commands_keep_the_defaults(small_database):
    # `status` imports no numpy at all; what it would pass on to a server it starts is the environment as it was.
    outcome = _run(small_database, "status")
    assert outcome["code"] == 0 and outcome["numpy_saw"] == []
    program = (
        "import os, sys; from cli.main import main; main(['status']); print(os.environ.get('NUMPY_MADVISE_HUGEPAGE'))"
    )
    env = {key: value for key, value in os.environ.items() if key != "NUMPY_MADVISE_HUGEPAGE"}
    printed = (
        subprocess.run(
            [sys.executable, "-c", program],
            cwd=ROOT,
            env={**env, "DATABASE_URL": small_database},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    assert printed == "None"
