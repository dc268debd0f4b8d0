"""Cold start: `make run` in a fresh clone, from nothing to a served app, with uv and with pip.

A new user's first command clones nothing else and has no virtualenv, no package cache and no
database: `make run` creates the virtualenv, installs the project, migrates, seeds the small demo and
serves. This benchmark does exactly that in a temporary clone of the current commit, once per
installer (`make run INSTALLER=uv`, the default, and `INSTALLER=pip`, the straightforward install),
each with an empty package cache of its own (UV_CACHE_DIR, PIP_CACHE_DIR in the temporary folder), and
prints the seconds until `/_stcore/health` answers, when the first line appeared (the user sees that
something is happening), and how many lines the install printed. Both runs must serve; the uv run is
also compared with pip's as a ratio. The target (docs/REFERENCE.md §6): served in under 90 s.

Downloads go to PyPI, so the figures include the network of the day.

    .venv/bin/python -m benchmarks.bench_cold_start [--installers uv,pip] [--timeout 900]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "bench-cold-start-password"


@dataclass(frozen=True)
class ColdStart:
    installer: str
    served_after: float | None  # seconds from `make run` to a healthy server; None: never served
    first_line_after: float | None
    lines: int
    tail: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as answer:
            return answer.status == 200 and answer.read().strip() == b"ok"
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def cold_start(installer: str, folder: Path, timeout: float) -> ColdStart:
    """`make run INSTALLER=installer` in a fresh clone under `folder`, until it serves or `timeout` passes."""
    clone = folder / f"clone-{installer}"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    port = _free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("VIRTUAL_ENV", "DATABASE_URL", "CLINCONSENSUS_", "STREAMLIT_"))
    }
    env.update(
        CLINCONSENSUS_DEMO_PASSWORD=PASSWORD,
        UV_CACHE_DIR=str(folder / f"uv-cache-{installer}"),
        PIP_CACHE_DIR=str(folder / f"pip-cache-{installer}"),
    )
    lines: list[str] = []
    first_line: list[float] = []
    start = time.monotonic()
    process = subprocess.Popen(
        ["make", "run", f"INSTALLER={installer}", f"PORT={port}", "ADDRESS=127.0.0.1"],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group: stopped whole at the end
    )

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if not first_line:
                first_line.append(time.monotonic() - start)
            lines.append(line.rstrip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    served = None
    try:
        while time.monotonic() - start < timeout and process.poll() is None:
            if _healthy(port):
                served = time.monotonic() - start
                break
            time.sleep(0.25)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        reader.join(timeout=5)
    return ColdStart(installer, served, first_line[0] if first_line else None, len(lines), "\n".join(lines[-15:]))


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:,.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--installers", default="uv,pip", help="comma-separated: uv, pip (default both)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for each run to serve")
    args = parser.parse_args(argv)
    installers = [name.strip() for name in args.installers.split(",") if name.strip()]
    if not installers or set(installers) - {"uv", "pip"}:
        parser.error("--installers: uv, pip or both")
    if shutil.which("make") is None or shutil.which("git") is None:
        print("bench_cold_start: needs make and git", file=sys.stderr)
        return 1
    folder = Path(tempfile.mkdtemp(prefix="cc-bench-cold-"))
    runs: list[ColdStart] = []
    try:
        for installer in installers:
            print(f"== make run with {installer} (fresh clone, empty cache)", flush=True)
            run = cold_start(installer, folder, args.timeout)
            runs.append(run)
            print(
                f"   served after {_seconds(run.served_after)}; first line after {_seconds(run.first_line_after)}; "
                f"{run.lines} lines printed",
                flush=True,
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    by_name = {run.installer: run for run in runs}
    if {"uv", "pip"} <= by_name.keys() and by_name["uv"].served_after and by_name["pip"].served_after:
        ratio = by_name["pip"].served_after / by_name["uv"].served_after
        print(
            f"uv serves {ratio:.1f}× sooner than pip ({_seconds(by_name['uv'].served_after)} against "
            f"{_seconds(by_name['pip'].served_after)}); target: under 90 s"
        )
    failed = [run for run in runs if run.served_after is None]
    for run in failed:
        print(f"make run with {run.installer} never served; its last lines:\n{run.tail}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
