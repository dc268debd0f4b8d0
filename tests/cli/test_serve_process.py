"""`clinconsensus serve` becomes the Streamlit process: a SIGTERM to its pid stops the server, no orphan left."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def test_sigterm_to_serve_stops_the_server(tmp_path, sqlite_url):
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": sqlite_url}
    with open(tmp_path / "serve.log", "w") as log:
        _serve_then_terminate(port, env, tmp_path, log)


def _serve_then_terminate(port: int, env: dict, tmp_path: Path, log) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--port", str(port), "--address", "127.0.0.1"],
        cwd=tmp_path,  # started elsewhere: serve runs the app from the project root itself
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while not _healthy(port):
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.5)
        # The pid the caller holds is the server itself (the command replaced itself with Streamlit).
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")
        assert cmdline[1:4] == [b"-m", b"ui.process", b"run"] and cmdline[4].endswith(b"streamlit_app.py")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) is not None
        time.sleep(0.5)
        assert not _healthy(port), "something still serves the app after SIGTERM"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
