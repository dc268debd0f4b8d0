"""The Judge runs page follows a run to its end without a reload: the history row moves from waiting to
finished while the admin only watches, and a run that fails says why in the reader's language.

The judge is the loopback endpoint of tools/llm_server.py; each run is limited to a few items so the
shared demo database gains only a handful of decisions of a judge no other test reads.
Screenshots: tests/artifacts/screenshots/judge-runs-live-*.png.
"""

from __future__ import annotations

import socket

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import login, open_app, screenshot, text, wait_for_app_run
from tools.llm_server import LLMServer

pytestmark = pytest.mark.browser

#: Long enough for a run of a few items at the server's pace plus the page's two-second refresh.
RUN_END_MS = 60_000


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the block ends: nothing listens there


def _start(page, url: str, judge: str, limit: int) -> None:
    form = page.get_by_test_id("stForm").first  # the judge's form; the generate form follows it
    form.get_by_role("textbox", name=text("judge.form.base_url")).fill(url)
    form.get_by_role("textbox", name=text("judge.form.model"), exact=True).fill("judge-test")
    form.get_by_role("textbox", name=text("judge.form.judge"), exact=True).fill(judge)
    form.get_by_role("spinbutton", name=text("judge.form.limit")).fill(str(limit))
    form.get_by_role("button", name=text("judge.form.start")).click()
    wait_for_app_run(page)


def _wait_for_history_row(page, judge: str, *statuses: str) -> None:
    """The history table (a canvas grid with an accessible table behind it) shows `judge` in one of `statuses`."""
    page.wait_for_function(
        """([judge, statuses]) => Array.from(document.querySelectorAll('[data-testid=stDataFrame] tr'))
            .some(row => row.textContent.includes(judge) && statuses.some(s => row.textContent.includes(s)))""",
        arg=[judge, list(statuses)],
        timeout=RUN_END_MS,
    )


def test_a_run_is_followed_to_its_end_and_a_failure_is_said_in_the_readers_language(page, app_server, accounts):
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, app_server, accounts("admin"))
    open_app(page, app_server, "admin-judge-runs")
    with LLMServer(latency=1.0) as server:
        _start(page, server.url, "e2e-live-judge", limit=6)
        # The click's own rerun drew the history while the run's process was still starting.
        _wait_for_history_row(page, "e2e-live-judge", text("judge.status.pending"), text("judge.status.running"))
        screenshot(page, "judge-runs-live-started-1440x900", settle=False)
        # No reload from here on: the live part sees the run end and the history follows.
        _wait_for_history_row(page, "e2e-live-judge", text("judge.status.finished"))
        expect(page.get_by_text(text("judge.live.none"))).to_be_visible(timeout=RUN_END_MS)
    page.get_by_text(text("judge.live.heading"), exact=True).scroll_into_view_if_needed()
    screenshot(page, "judge-runs-live-finished-1440x900")

    _start(page, f"http://127.0.0.1:{_closed_port()}/v1", "e2e-unreachable-judge", limit=20)
    _wait_for_history_row(page, "e2e-unreachable-judge", text("judge.status.failed"))
    note = page.get_by_text("无法连接服务", exact=False).first
    expect(note).to_be_visible(timeout=RUN_END_MS)
    expect(page.get_by_text("cannot reach the endpoint")).to_have_count(0)
    note.scroll_into_view_if_needed()
    screenshot(page, "judge-runs-live-failed-1440x900")
