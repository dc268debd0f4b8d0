"""The app served for browser tests and benchmarks: `streamlit run streamlit_app.py` on a free loopback port.

`served_app` starts it against a database and yields once `/_stcore/health` answers; `CHROMIUM` and
`CHROMIUM_ARGS` are the browser both drive (Debian's Chromium, never Playwright's own download).
Shared by tests/e2e and benchmarks/bench_sessions.py (tools/replicas.py adds replicas behind nginx).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from db.rules.config import get_settings

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVER_START_TIMEOUT = 90.0
CHROMIUM = get_settings().chromium or Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class AppServer:
    base_url: str
    database_url: str
    log_path: Path

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def wait_until_healthy(process: subprocess.Popen, base_url: str, log_path: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    last_error = "no answer"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with {process.returncode}:\n{log_path.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{base_url}/_stcore/health", timeout=2) as answer:
                if answer.status == 200 and answer.read().strip() == b"ok":
                    return
                last_error = f"status {answer.status}"
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            last_error = str(error)
        time.sleep(0.3)
    raise RuntimeError(
        f"streamlit not healthy after {SERVER_START_TIMEOUT:.0f}s ({last_error}):\n"
        f"{log_path.read_text(errors='replace')}"
    )


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


@contextmanager
def served_app(folder: Path, env: dict, database_url: str) -> Iterator[AppServer]:
    """`streamlit run streamlit_app.py` on a free loopback port with `env`, until the block ends."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    log_path = folder / "server.log"
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "streamlit_app.py",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]
    with open(log_path, "w", encoding="utf-8") as log:
        # Own process group, so stopping it also stops anything it started.
        process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        wait_until_healthy(process, base_url, log_path)
        yield AppServer(base_url=base_url, database_url=database_url, log_path=log_path)
    finally:
        stop_process(process)
