"""`python -m cli.compile_later`: waits for the server's health answer, then compiles the folders and stamps."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

from cli import compile_later


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/_stcore/health" else 404)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        return None


def _module(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


def test_it_waits_for_the_server_then_compiles_and_stamps(tmp_path):
    library = tmp_path / "lib"
    library.mkdir()
    _module(library, "good", "VALUE = 1\n")
    _module(library, "broken", "def (:\n")  # a file that does not compile stops nothing
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert compile_later.server_answers(url)
        stamp = tmp_path / ".compiled"
        assert compile_later.main(["--url", url, "--stamp", str(stamp), str(library)]) == 0
    finally:
        server.shutdown()
    assert stamp.exists()
    compiled = sorted(path.name.split(".")[0] for path in (library / "__pycache__").glob("*.pyc"))
    assert compiled == ["good"]


def test_a_server_that_never_answers_is_waited_for_only_so_long(tmp_path):
    assert not compile_later.server_answers("http://127.0.0.1:9")
    assert compile_later.wait_for("http://127.0.0.1:9", timeout=0.3, pause=0.1) is False


def test_without_a_server_it_compiles_at_once(tmp_path):
    library = tmp_path / "lib"
    library.mkdir()
    _module(library, "good", "VALUE = 1\n")
    assert compile_later.main([str(library)]) == 0
    assert [path.name.split(".")[0] for path in (library / "__pycache__").glob("*.pyc")] == ["good"]
