"""Several replicas behind Debian's nginx, on loopback: the shipped site config in a throw-away prefix.

`start_replica` runs `clinconsensus serve` on a port and returns once it is healthy; `Nginx` runs
deploy/nginx-clinconsensus.conf with only its ports changed, unprivileged, in a temporary prefix.
Used by tests/e2e/test_replicas.py and benchmarks/bench_sessions.py (served apps: tools/app_server.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tools.app_server import REPO_ROOT, free_port, stop_process, wait_until_healthy

DEPLOY_CONFIG = REPO_ROOT / "deploy" / "nginx-clinconsensus.conf"
ROUTE_COOKIE = "clinconsensus_route"


def _unprivileged() -> list[str]:
    """Run nginx as an ordinary user (root here only to switch to one)."""
    if os.geteuid() != 0:
        return []
    return ["runuser", "-u", "nobody", "--"]


class Nginx:
    """Debian's nginx with the shipped site config, on a free loopback port, in its own prefix."""

    def __init__(self, binary: str, replica_ports: list[int], *, worker_connections: int = 256) -> None:
        # worker_connections: many browsers each hold a websocket and pooled connections, and nginx two
        # sockets for each proxied one; a load of browsers needs more than a test's few.
        self.port = free_port()
        self.prefix = Path(tempfile.mkdtemp(prefix="cc-nginx-"))
        os.chmod(self.prefix, 0o777)
        site = DEPLOY_CONFIG.read_text(encoding="utf-8")
        shipped = re.findall(r"server 127\.0\.0\.1:(\d+) ", site)
        assert len(shipped) == 2 and "listen 80;" in site, "the shipped config names two replicas and port 80"
        for old, new in zip(shipped, replica_ports):
            site = site.replace(f"127.0.0.1:{old} ", f"127.0.0.1:{new} ")
        site = site.replace("listen 80;", f"listen 127.0.0.1:{self.port};")
        (self.prefix / "site.conf").write_text(site, encoding="utf-8")
        temp = "\n".join(
            f"    {kind}_temp_path {self.prefix / kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (self.prefix / "nginx.conf").write_text(
            f"""
daemon off;
worker_processes 1;
pid {self.prefix / "nginx.pid"};
error_log {self.prefix / "error.log"} info;
events {{ worker_connections {worker_connections}; }}
http {{
    log_format routed '$cookie_{ROUTE_COOKIE} $upstream_addr $status $request_uri';
    access_log {self.prefix / "access.log"} routed;
{temp}
    include {self.prefix / "site.conf"};
}}
""",
            encoding="utf-8",
        )
        for path in self.prefix.iterdir():
            os.chmod(path, 0o666)
        check = subprocess.run(
            [*_unprivileged(), binary, "-t", "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf")],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, check.stderr
        self.process = subprocess.Popen(
            [*_unprivileged(), binary, "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.base_url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.base_url}/_stcore/health", timeout=2).read()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"nginx did not answer:\n{self.log('error.log')}")

    def log(self, name: str) -> str:
        try:
            return (self.prefix / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def replica_of(self, route: str) -> str:
        """The replica address nginx sends a browser carrying `route` to (asked once, read from the log)."""
        request = urllib.request.Request(
            f"{self.base_url}/_stcore/health", headers={"Cookie": f"{ROUTE_COOKIE}={route}"}
        )
        urllib.request.urlopen(request, timeout=10).read()
        for _ in range(50):
            lines = [line.split() for line in self.log("access.log").splitlines() if line.startswith(route + " ")]
            if lines:
                return lines[-1][1]
            time.sleep(0.1)
        raise AssertionError(f"nginx logged no request for route {route}")

    def stop(self) -> None:
        stop_process(self.process)
        shutil.rmtree(self.prefix, ignore_errors=True)


def find_nginx() -> str | None:
    """Debian's nginx (on the PATH, or in /usr/sbin, which an ordinary user's PATH may lack), or None."""
    return shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def start_replica(port: int, env: dict, log_path: Path) -> subprocess.Popen:
    """`clinconsensus serve` on loopback `port` with `env`, in its own process group; returns once healthy."""
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve", "--port", str(port), "--address", "127.0.0.1"],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    wait_until_healthy(process, f"http://127.0.0.1:{port}", log_path)
    return process
