"""A throw-away PostgreSQL server for the test session, run as an unprivileged user."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    pass


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if candidates:
        return candidates[-1]
    raise PostgresUnavailable(f"{name} not found (install the PostgreSQL server)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """initdb + pg_ctl in a temporary folder; `url(dbname)` gives SQLAlchemy URLs."""

    def __init__(self) -> None:
        self.initdb = _binary("initdb")
        self.pg_ctl = _binary("pg_ctl")
        self.port = _free_port()
        self.base = Path(tempfile.mkdtemp(prefix="cc-pg-"))
        self.data = self.base / "data"
        self.run_as: str | None = None
        if os.geteuid() == 0:
            # PostgreSQL refuses to run as root.
            self.run_as = "postgres" if _user_exists("postgres") else "nobody"
            os.chmod(self.base, 0o777)
        self.user = self.run_as or pwd.getpwuid(os.geteuid()).pw_name

    def _run(self, *args: str) -> None:
        command = list(args)
        if self.run_as:
            command = ["runuser", "-u", self.run_as, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, cwd=self.base)
        if result.returncode != 0:
            raise PostgresUnavailable(f"{' '.join(args[:2])} failed: {result.stderr.strip() or result.stdout.strip()}")

    def start(self) -> PostgresServer:
        self._run(self.initdb, "-D", str(self.data), "-A", "trust", "-U", self.user, "-E", "UTF8", "--no-locale")
        options = (
            f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=100"
        )
        self._run(self.pg_ctl, "-D", str(self.data), "-l", str(self.base / "server.log"), "-o", options, "-w", "start")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.2)
        raise PostgresUnavailable("PostgreSQL did not start listening")

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        try:
            self._run(self.pg_ctl, "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
