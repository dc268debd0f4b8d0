"""`python -m cli.compile_later [--url URL] [--stamp FILE] DIR...`: once the server at URL answers (at once without
--url), compile the bytecode of DIR... (the virtualenv's libraries and the project's packages) on one worker, then
touch FILE.

`make run` starts it in the background at low priority: the install compiles nothing, so the server starts as soon
as the commands before it have compiled what they import; the rest is compiled while the server already answers,
for processes that cannot write bytecode themselves. The benchmarks run it without --url first, so each command
they time starts as it does after `make run`, not compiling several thousand modules on the way. Standard library
only: it must not import what it compiles.
"""

from __future__ import annotations

import argparse
import compileall
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

#: How long to wait for the server before compiling anyway.
WAIT_SECONDS = 300.0


def server_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/_stcore/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return False


def wait_for(url: str, timeout: float = WAIT_SECONDS, pause: float = 0.5) -> bool:
    """True once the server answers, False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server_answers(url):
            return True
        time.sleep(pause)
    return False


def compile_folders(folders: list[Path]) -> bool:
    """Every module under `folders` compiled to bytecode (one worker); False if any failed to compile."""
    return all(compileall.compile_dir(folder, quiet=2, workers=1) for folder in folders if folder.is_dir())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli.compile_later", description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="the server to wait for (its /_stcore/health); without it, compile at once")
    parser.add_argument("--stamp", type=Path, help="file touched once everything compiled")
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.url:
        wait_for(args.url)
    # A module that does not compile (a library's test data written for another Python) does not stop the rest;
    # the stamp is written anyway, so the next start does not try again.
    compile_folders(args.folders)
    if args.stamp:
        args.stamp.touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
