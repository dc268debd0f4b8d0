"""The batch files of the Judge runs page in the browser: an admin exports a judge batch, downloads it, and
uploads the results an engine wrote (the script playing `vllm run-batch` against the loopback endpoint).

Only the first two requests are answered (the others fail in the results file), so the shared demo database
gains two decisions of a judge no other test reads. Screenshot: tests/artifacts/screenshots/judge-batch-*.png.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect
from sqlalchemy import text as sql

from db.store.engine import make_engine
from tests.e2e.conftest import login, open_app, screenshot, text, wait_for_app_run
from tools.batch_runner import run_batch
from tools.llm_server import LLMServer

pytestmark = pytest.mark.browser


def _batch_folder(database_url: str, judge: str) -> tuple[int, Path]:
    engine = make_engine(database_url)
    with engine.connect() as connection:
        rows = connection.execute(sql("SELECT id, params FROM judge_run WHERE judge = :j"), {"j": judge}).all()
    engine.dispose()
    run_id, params = rows[-1]
    params = json.loads(params) if isinstance(params, str) else params
    return run_id, Path(params["batch"]["dir"])


def test_an_admin_exports_a_batch_and_uploads_its_results(page, app_server, accounts, tmp_path):
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, app_server, accounts("admin"))
    open_app(page, app_server, "admin-judge-runs")
    form = page.get_by_test_id("stForm").filter(has=page.get_by_role("button", name=text("batch.page.export")))
    form.get_by_role("textbox", name=text("batch.page.model"), exact=True).fill("e2e-batch-model")
    form.get_by_role("textbox", name=text("batch.page.name"), exact=True).fill("e2e-batch-judge")
    form.get_by_role("button", name=text("batch.page.export")).click()
    wait_for_app_run(page)
    run_id, folder = _batch_folder(app_server.database_url, "e2e-batch-judge")
    requests = [json.loads(line) for line in (folder / "requests.jsonl").read_text(encoding="utf-8").splitlines()]
    expect(page.get_by_text(text("batch.page.exported", id=run_id, n=len(requests), reasks=0))).to_be_visible()
    expect(page.get_by_role("button", name=text("batch.page.download"))).to_be_visible()

    results = tmp_path / "results.jsonl"
    with LLMServer() as server:
        run_batch(folder / "requests.jsonl", results, server.url, only=2)
    failed = [
        {"id": f"e-{n}", "custom_id": line["custom_id"], "response": None, "error": {"message": "engine stopped"}}
        for n, line in enumerate(requests[2:5])
    ]
    with results.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in failed)
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "results.jsonl", "mimeType": "application/octet-stream", "buffer": results.read_bytes()}]
    )
    wait_for_app_run(page)
    page.get_by_role("button", name=text("batch.page.import")).click()
    wait_for_app_run(page)
    said = text("batch.imported.judge", n=2, lines=5, unreadable=0, errors=3, already=0, stale=0)
    expect(page.get_by_test_id("stAlertContentSuccess").get_by_text(said)).to_be_visible()
    expect(page.get_by_test_id("stText").get_by_text(said)).to_be_visible()  # the run's note in the history
    screenshot(page, "judge-batch-imported-1440x900")
