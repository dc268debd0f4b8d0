"""Only a signed-in admin's session can send the server a file (ui/uploads.py), against the real served app.

Streamlit's upload endpoint `PUT /_stcore/upload_file/<session_id>/<file_id>` is driven directly, with the
session id the browser's own websocket was given and the browser's XSRF cookie, exactly as the page's
uploader sends it: a signed-out visitor's uploads are refused before the server reads them (its memory
does not grow by the 3 × 60 MB sent), an admin's are accepted, and the import page reads an admin's file.
"""

from __future__ import annotations

import http.client
import secrets
from pathlib import Path

import pytest
from playwright.sync_api import expect

from db.rules.limits import MAX_UPLOAD_MB
from tests.e2e.conftest import ACTION_TIMEOUT_MS, login, open_app, text, wait_for_app_run

pytestmark = pytest.mark.browser

LARGE_UPLOAD_MB = 60  # under the limit: only the sign-in tells these uploads apart


def server_pid(base_url: str) -> int:
    """The served app's process (started with --server.port <port>)."""
    port = base_url.rsplit(":", 1)[-1].encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--server.port" in args and args[args.index(b"--server.port") + 1] == port:
            return int(proc.name)
    raise AssertionError(f"no server process on port {port!r}")


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def watch_session_id(page) -> dict:
    """Fills {"id": …} with the Streamlit session id the server gives this tab's websocket."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    seen: dict = {}

    def on_frame(payload) -> None:
        if isinstance(payload, bytes | bytearray):
            message = ForwardMsg()
            try:
                message.ParseFromString(bytes(payload))
            except Exception:  # not a ForwardMsg
                return
            if message.HasField("new_session") and message.new_session.initialize.session_id:
                seen["id"] = message.new_session.initialize.session_id

    page.on("websocket", lambda socket: socket.on("framereceived", on_frame))
    return seen


def put_file(page, base_url: str, session_id: str, data: bytes, *, without: str = "") -> int | None:
    """The uploader's request, with this tab's cookies (but the one named `without`); the status, or None when
    the server closed the connection instead of answering."""
    cookies = {cookie["name"]: cookie["value"] for cookie in page.context.cookies() if cookie["name"] != without}
    boundary = secrets.token_hex(16)
    body = b"".join(
        (
            f"--{boundary}\r\n".encode(),
            b'Content-Disposition: form-data; name="file"; filename="labels.jsonl"\r\n',
            b"Content-Type: application/octet-stream\r\n\r\n",
            data,
            f"\r\n--{boundary}--\r\n".encode(),
        )
    )
    host, port = base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        connection.request(
            "PUT",
            f"/_stcore/upload_file/{session_id}/{secrets.token_hex(8)}",
            body=body,
            headers={
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "X-Xsrftoken": cookies["_streamlit_xsrf"],
                "Cookie": "; ".join(f"{name}={value}" for name, value in cookies.items()),
            },
        )
        return connection.getresponse().status
    except (ConnectionError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def test_a_signed_out_visitor_cannot_upload_and_costs_the_server_no_memory(page, app_server):
    seen = watch_session_id(page)
    open_app(page, app_server)
    expect(page.get_by_role("button", name=text("login.submit"), exact=True)).to_be_visible()
    assert seen.get("id"), "the websocket gave this tab no session id"
    assert put_file(page, app_server.base_url, seen["id"], b'{"case_id": "CC-0001"}\n') == 400
    pid = server_pid(app_server.base_url)
    before = resident_mb(pid)
    for _ in range(3):
        status = put_file(page, app_server.base_url, seen["id"], b"x" * (LARGE_UPLOAD_MB * 1024 * 1024))
        assert status != 204
    grown = resident_mb(pid) - before
    assert grown < 40, f"the server grew by {grown:.0f} MB on refused uploads"


def test_an_admin_uploads_and_the_import_page_reads_the_file(page, app_server, accounts):
    seen = watch_session_id(page)
    login(page, app_server, accounts("admin"))
    assert seen.get("id")
    assert put_file(page, app_server.base_url, seen["id"], b'{"case_id": "CC-0001"}\n') == 204
    # The import page: a file with one bad line is read and refused by name and line, the database untouched.
    open_app(page, app_server, "admin-import")
    expect(page.get_by_text(text("language.upload_limit", mb=MAX_UPLOAD_MB))).to_be_visible()
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "upload-gate.jsonl", "mimeType": "application/octet-stream", "buffer": b"{not json\n"}]
    )
    expect(page.get_by_text("upload-gate.jsonl").first).to_be_visible()
    wait_for_app_run(page)  # the upload's own rerun ends first, or the click may be taken by it
    page.get_by_role("button", name=text("admin.import.submit")).click()
    wait_for_app_run(page)
    refusal = page.get_by_role("alert").filter(has_text="upload-gate.jsonl").first
    expect(refusal).to_be_visible(timeout=ACTION_TIMEOUT_MS)


def test_an_annotator_cannot_upload(page, app_server, accounts):
    seen = watch_session_id(page)
    login(page, app_server, accounts("annotator", 1))
    assert seen.get("id")
    assert put_file(page, app_server.base_url, seen["id"], b'{"case_id": "CC-0001"}\n') == 400


def test_an_admins_session_id_without_the_sign_in_cookie_cannot_upload(page, app_server, accounts):
    """The gate is keyed on the sign-in cookie too: the admin's Streamlit session id, sent without the cookie
    or with another sign-in's, opens nothing; with it, the same request lands."""
    from ui.session_cookie import COOKIE_NAME

    seen = watch_session_id(page)
    login(page, app_server, accounts("admin"))
    assert seen.get("id")
    page.wait_for_function(f"document.cookie.includes('{COOKIE_NAME}=')")
    assert put_file(page, app_server.base_url, seen["id"], b"{}\n", without=COOKIE_NAME) == 400
    page.context.add_cookies([{"name": COOKIE_NAME, "value": secrets.token_urlsafe(32), "url": app_server.base_url}])
    assert put_file(page, app_server.base_url, seen["id"], b"{}\n") == 400
