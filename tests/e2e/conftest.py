"""End-to-end fixtures: the real app on a seeded database, driven by Debian's Chromium.

The session seeds a fresh SQLite file with the small demo (fixed passwords through
CLINCONSENSUS_DEMO_PASSWORD), starts `streamlit run streamlit_app.py` on a free port against it,
and hands tests a Playwright page. Screenshots land in tests/artifacts/screenshots/.

Without /usr/bin/chromium the browser tests skip; with CLINCONSENSUS_REQUIRE_BROWSER=1 (CI sets it)
they fail instead. Playwright's own browser download is never used.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from db.rules.config import get_settings
from tools.app_server import (  # noqa: F401  (names the browser tests import from here)
    CHROMIUM,
    CHROMIUM_ARGS,
    REPO_ROOT,
    SERVER_START_TIMEOUT,
    AppServer,
    free_port as _free_port,
    served_app,
    stop_process as _stop,
    wait_until_healthy as _wait_until_healthy,
)

ARTIFACTS = REPO_ROOT / "tests" / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
#: Every demo account's password in the browser tests.
DEMO_PASSWORD = "e2e-Demo-password-2026"
#: Playwright's default wait for an element or navigation, in milliseconds.
ACTION_TIMEOUT_MS = 30_000
CJK = re.compile(r"[\u4e00-\u9fff]")


def _browser_required() -> bool:
    return get_settings().require_browser


# Database ----------------------------------------------------------------------------------


def _run_cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"clinconsensus {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def seed_database(env: dict) -> str:
    """Fills the database as a first `make run` does (the small demo); returns what it printed."""
    return _run_cli(["demo", "--scale", "small"], env).stdout


@dataclass
class Account:
    username: str
    role: str
    group_no: int | None
    display_name: str
    password: str = DEMO_PASSWORD


def find_account(database_url: str, role: str, group_no: int | None = None) -> Account:
    """An active account of `role` (and group) in the seeded database."""
    from db.access import users
    from db.store.engine import make_engine, session_scope

    engine = make_engine(database_url)
    try:
        with session_scope(engine, read_only=True) as session:
            for user in users.list_users(session, actor=users.SYSTEM_ACTOR):
                if user.role == role and user.is_active and (group_no is None or user.group_no == group_no):
                    return Account(user.username, user.role, user.group_no, user.display_name or user.username)
    finally:
        engine.dispose()
    raise LookupError(f"the seeded database has no active {role}" + (f" in group {group_no}" if group_no else ""))


# Server ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} not found (Debian: apt-get install chromium fonts-noto-cjk)"
        if _browser_required():
            pytest.fail(f"the browser tests are required here: {message}")
        pytest.skip(message)
    return CHROMIUM


@pytest.fixture(scope="session")
def app_server(chromium_path, tmp_path_factory) -> AppServer:
    """The app on a freshly seeded SQLite database, served for the whole session."""
    folder = tmp_path_factory.mktemp("e2e-app")
    database_url = f"sqlite:///{folder / 'studio.db'}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CLINCONSENSUS_DEMO_PASSWORD": DEMO_PASSWORD,
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("STREAMLIT_SERVER_PORT", None)
    seed_output = seed_database(env)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "e2e-seed.txt").write_text(seed_output, encoding="utf-8")

    try:
        with served_app(folder, env, database_url) as server:
            yield server
    finally:  # after the server stopped, so its log is whole; also when it never became healthy
        if (folder / "server.log").exists():
            shutil.copyfile(folder / "server.log", ARTIFACTS / "e2e-server.log")


# Browser -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def context(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="zh-CN", timezone_id="Asia/Shanghai")
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    yield context
    context.close()


@pytest.fixture
def page(context, app_server, request):
    """A fresh tab (own cookies and session state) per test; on failure the server log is attached."""
    page = context.new_page()
    yield page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        try:
            screenshot(page, f"FAILED-{request.node.name}", settle=False)
        except Exception as error:  # a crashed page must not hide the test's own failure
            print(f"no failure screenshot: {error}")
        print(f"--- streamlit server log (tail)\n{app_server.log_tail()}")
    page.close()


def pytest_collection_modifyitems(config, items):
    # Everything here drives the browser, whether or not the file says so.
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


# Helpers -----------------------------------------------------------------------------------


def screenshot(page, name: str, *, settle: bool = True) -> Path:
    """Saves the full page to tests/artifacts/screenshots/<name>.png and returns the path.

    With `settle`, waits for the script run to finish first, so the picture is the final page.
    """
    if settle:
        wait_for_app_run(page)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


#: A click's rerun reaches the page's "running" state a moment after the click; waiting this long first
#: keeps `wait_for_app_run` from seeing the run before it as the one that finished.
RUN_START_MS = 150


def wait_for_app_run(page, timeout_ms: int = ACTION_TIMEOUT_MS) -> None:
    """Waits until the browser is connected and the script has finished its current run."""
    page.wait_for_timeout(RUN_START_MS)
    page.locator('[data-testid="stApp"][data-test-connection-state="CONNECTED"]').wait_for(timeout=timeout_ms)
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(timeout=timeout_ms)


def open_app(page, app_server: AppServer, path: str = "") -> None:
    page.goto(f"{app_server.base_url}/{path.lstrip('/')}")
    wait_for_app_run(page)


def text(key: str, lang: str = "zh", **values) -> str:
    """The user-visible text of a catalog key, so tests follow the catalog rather than copies of it."""
    from i18n import translate

    return translate(key, lang, **values)


def fill_login(page, username: str, password: str, lang: str = "zh") -> None:
    """Fills the login form by its accessible labels and presses the sign-in button."""
    page.get_by_label(text("login.username", lang), exact=True).fill(username)
    page.get_by_label(text("login.password", lang), exact=True).fill(password)
    page.get_by_role("button", name=text("login.submit", lang), exact=True).click()


def login(page, app_server: AppServer, account: Account, lang: str = "zh") -> None:
    """Opens the app and signs in; returns once the signed-in sidebar is shown."""
    from playwright.sync_api import expect

    open_app(page, app_server)
    fill_login(page, account.username, account.password, lang)
    expect(page.get_by_text(text("sidebar.signed_in_as", lang, name=account.display_name))).to_be_visible()
    wait_for_app_run(page)
    # The sign-in cookie is written by our component just after the signed-in run; a test that opens
    # another URL at once must not outrun it.
    from ui.session_cookie import COOKIE_NAME

    for _ in range(100):
        if any(cookie["name"] == COOKIE_NAME and cookie["value"] for cookie in page.context.cookies()):
            return
        page.wait_for_timeout(100)
    raise AssertionError("the sign-in cookie was not written within 10 s")


@pytest.fixture(scope="session")
def accounts(app_server):
    """Demo accounts by role: accounts("admin"), accounts("annotator", 1)…"""

    def lookup(role: str, group_no: int | None = None) -> Account:
        return find_account(app_server.database_url, role, group_no)

    return lookup


def choose_in_picker(page, label: str, pattern: str, attempts: int = 3) -> None:
    """Picks the option containing `pattern` in the selectbox named `label` (typing filters the long list);
    tries again when a rerun redrew the picker while it was being typed in."""
    import re as _re

    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(attempts):
        wait_for_app_run(page)
        box = page.get_by_role("combobox", name=label)
        box.click()
        page.keyboard.press("Control+A")
        page.keyboard.type(pattern)
        option = page.get_by_role("option", name=_re.compile(_re.escape(pattern))).first
        try:
            option.click(timeout=8_000)
            break
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
            if attempt == attempts - 1:
                raise
    wait_for_app_run(page)
