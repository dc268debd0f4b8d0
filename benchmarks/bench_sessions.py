"""Real browser sessions labeling at once: click-to-idle of save-and-next on one server, then on two replicas.

bench_load.py puts many labelers in one process with AppTest, so it measures the server's share only.
Here each labeler is a browser: one Chromium (Debian's, driven through Playwright), one browser context
per session, each signed in as its own annotator (its sign-in cookie holds a session token opened for it,
as after a password sign-in), on the labeling page of the app served as it is deployed:

1. one server, `streamlit run streamlit_app.py` (tools/app_server.py, as the browser tests serve it), on SQLite:
   1 session alone (the baseline), then --sessions (default 20) at once;
2. two `clinconsensus serve` replicas on one PostgreSQL database behind Debian's nginx running the
   shipped deploy/nginx-clinconsensus.conf (as tests/e2e/test_replicas.py runs them): 1 session, then
   --replica-sessions (default 40) at once; nginx's route cookie spreads the browsers over the replicas.

A session works through its queue from the keyboard as a physician does: reads the response (--think),
decides every criterion with 1 or 0 (--decision-gap between keys; the server keeps each decision as a
draft, a rerun of the workbench), reads it over (--think), presses Ctrl+Enter (save and next), --saves
times. Think times and gaps are drawn uniformly from ±50% around their mean.

Click-to-idle of one save-and-next is measured in the page's own clock, so Playwright's round trips are
not in it: from the Ctrl+Enter keydown (a capturing listener the page installs before the app's own) to
the first animation frame at which both hold:
- the app is idle: `[data-testid=stApp]` carries `data-test-script-state="notRunning"` and
  `data-test-connection-state="CONNECTED"`;
- the workbench's response title (`.wb-pane-title` in the component's shadow root, "回答 <code>") names
  another response than it did at the key.
Printed per run: p50, p95 and max of click-to-idle over every save of every session, saves per second
(all saves over the run's wall time, think times included), and where the CPU went meanwhile: the app's
servers, Chromium, the driving of it (this process and Playwright's driver), and everything else on the
machine (PostgreSQL, nginx, any other work).

Data: the demo at full scale, or `--cases N`, built here on SQLite and on a throw-away PostgreSQL server
(benchmarks/full_scale.py); or given: `--database URL` for part 1 and `--replica-database URL`
(PostgreSQL) for part 2, each worked on as a copy (bench_load.copy_database). Every response of the
demo is labeled by both groups already, so an annotator's queue would hold nothing to do: each database
gets responses of one more model (the texts of an existing model's, written as an import writes them)
and one new annotator per session plus one for the baseline (bench_load.add_labelers), each assigned
--saves + 1 of them. Without nginx or a PostgreSQL server, part 2 is left out and the reason printed.

Checked at the end of each run: every annotator's labels in the database, counted against what its
session saved (one label per criterion decided, one labeled response per save); any difference, or a
session that fails, makes the exit status 1. Nothing about speed is asserted.

    .venv/bin/python -m benchmarks.bench_sessions [--cases N | --database URL --replica-database URL]
        [--sessions 20] [--replica-sessions 40] [--saves 6] [--think 1.0] [--decision-gap 0.3]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import func, select  # noqa: E402

from benchmarks.bench_load import add_labelers, copy_database, percentile  # noqa: E402
from db.access.audit_key import KEY_FILE_ENV, audit_key_file  # noqa: E402
from db.importers.responses import write_responses  # noqa: E402
from db.migrations.upgrade import upgrade  # noqa: E402
from db.rules.enums import Stage  # noqa: E402
from db.store.current_rubric import current_versions  # noqa: E402
from db.store.engine import make_engine, session_scope  # noqa: E402
from db.store.models import Case, Label, Response  # noqa: E402
from tools.app_server import CHROMIUM, CHROMIUM_ARGS, AppServer, free_port, served_app, stop_process  # noqa: E402
from tools.replicas import ROUTE_COOKIE, Nginx, find_nginx, start_replica  # noqa: E402
from ui.session_cookie import COOKIE_NAME  # noqa: E402

#: The model whose responses the benchmark's annotators label (a number follows when one per case is too few).
BENCH_MODEL = "bench-sessions"
LABELING_PATH = "annotate-labeling"
#: Opening pages is not measured; a few at a time keep it from starving the sessions already open.
OPENING_AT_ONCE = 4
#: Each session is a person at their own screen: none of the pages may be throttled as a background tab.
FOREGROUND_ARGS = [
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
]
#: Installed before the app's scripts, so it sees the keydown before the workbench's own listener.
SAVE_CLOCK_JS = """
window.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) window.__benchSaveAt = performance.now();
}, true);
"""
#: The page is idle with a response shown other than `before`: its title and the milliseconds since Ctrl+Enter
#: (or the error the workbench shows).
IDLE_WITH_ANOTHER_RESPONSE_JS = """
(before) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.dataset.testScriptState !== "notRunning" || app.dataset.testConnectionState !== "CONNECTED") {
    return false;
  }
  let title = window.__benchTitle;
  if (!title || !title.isConnected) {
    title = document.querySelector(".wb-pane-title");
    for (const host of document.querySelectorAll('[data-testid^="stBidiComponent"]')) {
      if (title) break;
      title = host.shadowRoot && host.shadowRoot.querySelector(".wb-pane-title");
    }
    window.__benchTitle = title;
  }
  // A refused save leaves the response on screen and says why: no reason to wait any longer.
  const message = title && title.getRootNode().querySelector(".wb-message");
  if (message && message.dataset.kind === "error" && message.textContent) return { error: message.textContent };
  if (!title || !title.textContent || title.textContent === before) return false;
  const pressed = window.__benchSaveAt;
  return { title: title.textContent, ms: typeof pressed === "number" ? performance.now() - pressed : null };
}
"""


# Data ---------------------------------------------------------------------------------------------


@dataclass
class Annotator:
    user_id: int
    username: str
    token: str


@dataclass
class Database:
    url: str
    #: A copy's audit key file: its original's, which the app would look for beside the original, not the copy.
    audit_key_file: str | None = None

    def use(self) -> None:
        """Points this process, and the servers it starts from now on, at this database's audit key."""
        if self.audit_key_file:
            os.environ[KEY_FILE_ENV] = self.audit_key_file


def copied(url: str, stack: ExitStack) -> Database:
    """A throw-away copy of the database at `url` (dropped when `stack` closes), written with its audit key."""
    key = os.environ.get(KEY_FILE_ENV)
    if key is None:
        before = os.environ.get("DATABASE_URL")
        os.environ["DATABASE_URL"] = url
        key = str(audit_key_file())
        if before is None:
            os.environ.pop("DATABASE_URL")
        else:
            os.environ["DATABASE_URL"] = before
    copy, drop = copy_database(url)
    stack.callback(drop)
    return Database(copy, key)


def add_work(url: str, annotators: int, per_annotator: int) -> list[Annotator]:
    """`annotators` new annotators, each assigned `per_annotator` new responses nobody has labeled."""
    engine = make_engine(url)
    try:
        upgrade(engine)
        needed = annotators * per_annotator
        with session_scope(engine) as s:
            # One response text per case with an approved rubric (the lowest id: the first model's).
            rubrics = current_versions().subquery()
            first = select(func.min(Response.id)).join(rubrics, rubrics.c.case_pk == Response.case_pk)
            texts = s.execute(
                select(Case.case_id, Response.text)
                .join(Case, Case.id == Response.case_pk)
                .where(Response.id.in_(first.group_by(Response.case_pk)))
                .order_by(Response.id)
            ).all()
            if not texts:
                raise SystemExit("the database has no case with an approved rubric")
            models = [f"{BENCH_MODEL}-{n}" for n in range(1, math.ceil(needed / len(texts)) + 1)]
            rows = [(case_id, model, text) for model in models for case_id, text in texts][:needed]
            summary = write_responses(s, "bench_sessions", "bench_sessions", rows)
            if summary.inserted != needed:
                raise SystemExit(
                    f"{BENCH_MODEL} responses were in the database already: {summary.inserted} of {needed}"
                )
            responses = s.execute(
                select(Response.id, Response.case_pk).where(Response.model.in_(models)).order_by(Response.id)
            ).all()
        people = add_labelers(engine, annotators, per_user=per_annotator, responses=responses)
        return [Annotator(user.id, user.username, token) for user, token, _ids in people]
    finally:
        engine.dispose()


def labels_by_user(url: str, user_ids: list[int]) -> dict[int, tuple[int, int]]:
    """Each user's annotation labels in the database: (labels, labeled responses)."""
    engine = make_engine(url)
    try:
        with session_scope(engine, read_only=True) as s:
            rows = s.execute(
                select(Label.user_id, func.count(), func.count(func.distinct(Label.response_id)))
                .where(Label.user_id.in_(user_ids), Label.stage == Stage.annotation)
                .group_by(Label.user_id)
            ).all()
        return {user_id: (labels, responses) for user_id, labels, responses in rows}
    finally:
        engine.dispose()


@contextmanager
def databases(args) -> Iterator[tuple[Database, Database | None, str]]:
    """The database of part 1, the PostgreSQL database of part 2 (or None, and why): copies, or built here."""
    replicas_wanted = not args.skip_replicas
    with ExitStack() as stack:
        built: list[str] = []
        if args.database is None or (replicas_wanted and args.replica_database is None):
            from benchmarks.full_scale import built_databases

            # (it sets the audit key file of the databases it builds for this process and its children)
            built = stack.enter_context(
                built_databases(cases=args.cases, postgres=replicas_wanted and args.replica_database is None)
            )
        single = copied(args.database, stack) if args.database else Database(built[0])
        replicated, why_not = None, "--skip-replicas"
        if args.replica_database:
            replicated = copied(args.replica_database, stack)
        elif replicas_wanted:
            replicated = next((Database(url) for url in built if url.startswith("postgresql")), None)
            why_not = "no PostgreSQL server could start"
        yield single, replicated, why_not


# CPU ----------------------------------------------------------------------------------------------

TICKS = os.sysconf("SC_CLK_TCK")
CHROMIUM_NAMES = ("chrom", "headless")


def _stat(pid: int) -> tuple[str, int, float] | None:
    """(command name, parent pid, CPU seconds so far) of a live process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS


def processes_under_this_one() -> tuple[dict[int, tuple[str, int, float]], list[int]]:
    """Every live process's (name, parent, CPU seconds), and the pids of those under this process."""
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(int(p))) is not None}
    children: dict[int, list[int]] = {}
    for pid, (_name, parent, _cpu) in stats.items():
        children.setdefault(parent, []).append(pid)
    under, stack = [], list(children.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        under.append(pid)
        stack.extend(children.get(pid, []))
    return stats, under


def cpu_snapshot() -> dict[str, float]:
    """CPU seconds so far: the app's servers (the Python processes under this one), Chromium, the driving of
    the browser (this process and Playwright's driver), and the whole machine."""
    stats, under = processes_under_this_one()
    seconds = {"app": 0.0, "chromium": 0.0, "driving": stats[os.getpid()][2]}
    for pid in under:
        name, _parent, cpu = stats[pid]
        if name.startswith(("python", "streamlit")):
            seconds["app"] += cpu
        elif name.startswith(CHROMIUM_NAMES):
            seconds["chromium"] += cpu
        elif name.startswith("node"):
            seconds["driving"] += cpu
    with open("/proc/stat") as proc_stat:
        # user nice system idle iowait irq softirq steal (guest time is counted in user already)
        values = [int(v) for v in proc_stat.readline().split()[1:9]]
    seconds["machine"] = (sum(values) - values[3] - values[4]) / TICKS
    return seconds


def cpu_text(before: dict[str, float], after: dict[str, float], wall: float) -> str:
    spent = {kind: after[kind] - before[kind] for kind in before}
    rest = spent["machine"] - spent["app"] - spent["chromium"] - spent["driving"]
    cores = os.cpu_count() or 1
    return (
        f"CPU over {wall:.0f} s on {cores} cores ({spent['machine'] / (wall * cores):.0%} busy): "
        f"app {spent['app']:.0f} s, Chromium {spent['chromium']:.0f} s, driving it {spent['driving']:.0f} s, "
        f"everything else {max(rest, 0):.0f} s"
    )


# Sessions -----------------------------------------------------------------------------------------


@dataclass
class Session:
    """One annotator in one browser context."""

    annotator: Annotator
    rng: random.Random
    page: Any = None
    title: str = ""
    route: str | None = None  # behind nginx: the route cookie it gave this browser
    millis: list[float] = field(default_factory=list)
    decided: int = 0  # criteria decided in saves that went through

    async def open(self, browser, base_url: str, timeout_s: float) -> None:
        context = await browser.new_context(
            viewport={"width": 1440, "height": 900}, locale="zh-CN", timezone_id="Asia/Shanghai"
        )
        context.set_default_timeout(timeout_s * 1000)
        await context.add_cookies([{"name": COOKIE_NAME, "value": self.annotator.token, "url": base_url}])
        await context.add_init_script(SAVE_CLOCK_JS)
        self.page = await context.new_page()
        await self.page.goto(f"{base_url}/{LABELING_PATH}")
        shown = await self._idle_with_another_response(before="", timeout_s=timeout_s)
        self.title = shown["title"]
        self.route = next((c["value"] for c in await context.cookies() if c["name"] == ROUTE_COOKIE), None)

    async def close(self) -> None:
        await self.page.context.close()

    async def _idle_with_another_response(self, *, before: str, timeout_s: float) -> dict:
        handle = await self.page.wait_for_function(
            IDLE_WITH_ANOTHER_RESPONSE_JS, arg=before, polling="raf", timeout=timeout_s * 1000
        )
        shown = await handle.json_value()
        if "error" in shown:
            raise RuntimeError(f"{self.annotator.username} on {before or 'opening'}: {shown['error']}")
        return shown

    async def pause(self, mean_s: float) -> None:
        await asyncio.sleep(self.rng.uniform(0.5, 1.5) * mean_s)

    async def label(self, saves: int, think: float, decision_gap: float, timeout_s: float) -> None:
        page = self.page
        for _ in range(saves):
            await self.pause(think)
            items = await page.locator(".wb-item").count()
            for _ in range(items):
                await page.keyboard.press(self.rng.choice("10"))
                await self.pause(decision_gap)
            undecided = await page.locator('.wb-item[data-state="none"]').count()
            if items == 0 or undecided:
                raise RuntimeError(
                    f"{self.annotator.username}: {undecided} of {items} criteria undecided on {self.title}"
                )
            await self.pause(think)
            await page.keyboard.press("Control+Enter")
            shown = await self._idle_with_another_response(before=self.title, timeout_s=timeout_s)
            if shown["ms"] is None:
                raise RuntimeError(f"{self.annotator.username}: the page did not see the Ctrl+Enter keydown")
            self.millis.append(shown["ms"])
            self.decided += items
            self.title = shown["title"]


@dataclass
class RunResult:
    sessions: int
    millis: list[float]
    wall_s: float
    cpu: str
    failures: list[str]


async def run_sessions(browser, base_url: str, annotators: list[Annotator], args) -> tuple[list[Session], RunResult]:
    """Opens a page per annotator, then all label at once; the sessions (for the label check) and the figures."""
    sessions = [Session(annotator, random.Random(i)) for i, annotator in enumerate(annotators)]
    opening = asyncio.Semaphore(OPENING_AT_ONCE)

    async def open_one(session: Session) -> None:
        async with opening:
            await session.open(browser, base_url, args.timeout)

    failures: list[str] = []
    try:
        opened = await asyncio.gather(*(open_one(s) for s in sessions), return_exceptions=True)
        failures += [f"{s.annotator.username} could not open the page: {e}" for s, e in zip(sessions, opened) if e]
        cpu_before, started = cpu_snapshot(), time.perf_counter()
        if not failures:
            done = await asyncio.gather(
                *(s.label(args.saves, args.think, args.decision_gap, args.timeout) for s in sessions),
                return_exceptions=True,
            )
            failures += [f"{s.annotator.username}: {e!r}" for s, e in zip(sessions, done) if e]
        wall = time.perf_counter() - started
        cpu = cpu_text(cpu_before, cpu_snapshot(), wall)
    finally:
        await asyncio.gather(*(s.close() for s in sessions if s.page is not None), return_exceptions=True)
    millis = [ms for s in sessions for ms in s.millis]
    return sessions, RunResult(len(sessions), millis, wall, cpu, failures)


def check_labels(url: str, sessions: list[Session]) -> list[str]:
    """Each session's saves against its annotator's labels in the database; the differences."""
    found = labels_by_user(url, [s.annotator.user_id for s in sessions])
    differences = []
    for s in sessions:
        saved = (s.decided, len(s.millis))
        stored = found.get(s.annotator.user_id, (0, 0))
        if stored != saved:
            differences.append(
                f"{s.annotator.username}: saved {saved[0]} labels on {saved[1]} responses, "
                f"the database holds {stored[0]} on {stored[1]}"
            )
    return differences


def print_header() -> None:
    print(f"  {'sessions':>8}  {'p50 ms':>8}  {'p95 ms':>8}  {'max ms':>8}  {'saves/s':>7}", flush=True)


def print_result(result: RunResult, note: str = "") -> None:
    if not result.millis:
        print(f"  {result.sessions:>8}  no save completed", flush=True)
        return
    print(
        f"  {result.sessions:>8}  {statistics.median(result.millis):8.0f}  {percentile(result.millis, 0.95):8.0f}"
        f"  {max(result.millis):8.0f}  {len(result.millis) / result.wall_s:7.2f}   {note}".rstrip(),
        flush=True,
    )
    print(f"  {'':>8}  {result.cpu}", flush=True)


async def measure(browser, base_url: str, url: str, annotators: list[Annotator], args, spread=None) -> list[str]:
    """The baseline (first annotator alone), then the others at once; printed. The problems found."""
    problems: list[str] = []
    print_header()
    for group in (annotators[:1], annotators[1:]):
        sessions, result = await run_sessions(browser, base_url, group, args)
        note = spread(sessions) if spread and not result.failures else ""
        print_result(result, note)
        problems += result.failures
        if not result.failures:
            problems += check_labels(url, sessions)
    return problems


# Servers ------------------------------------------------------------------------------------------


def server_env(url: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
    env.pop("STREAMLIT_SERVER_PORT", None)
    return env


async def one_server(browser, url: str, annotators: list[Annotator], args, folder: Path) -> list[str]:
    with served_app(folder, server_env(url), url) as server:
        problems = await measure(browser, server.base_url, url, annotators, args)
        if problems:
            print(f"--- server log (tail)\n{server.log_tail()}", flush=True)
    return problems


async def two_replicas(browser, url: str, annotators: list[Annotator], args, folder: Path) -> list[str]:
    env = server_env(url)
    # Every replica must sign Streamlit's cookies alike, as in a deployment.
    env["STREAMLIT_SERVER_COOKIE_SECRET"] = secrets.token_hex(16)
    ports = [free_port(), free_port()]
    replicas = []
    nginx = None
    try:
        for number, port in enumerate(ports, start=1):
            replicas.append(start_replica(port, env, folder / f"replica{number}.log"))
        # A browser holds a websocket and up to six pooled connections; nginx two sockets for each proxied one.
        nginx = Nginx(find_nginx(), ports, worker_connections=16 * (args.replica_sessions + 8))
        problems = await measure(browser, nginx.base_url, url, annotators, args, spread=routes_spread(nginx))
        if problems:
            for number in range(1, len(ports) + 1):
                log = AppServer("", url, folder / f"replica{number}.log")
                print(f"--- replica {number} log (tail)\n{log.log_tail()}", flush=True)
            print(f"--- nginx error log (tail)\n{nginx.log('error.log')[-4000:]}", flush=True)
        return problems
    finally:
        if nginx is not None:
            nginx.stop()
        for process in replicas:
            stop_process(process)


def routes_spread(nginx: Nginx):
    """Says how many sessions each replica served: nginx's route cookie in each browser, looked up in its log."""

    def spread(sessions: list[Session]) -> str:
        served: dict[str, int] = {}
        for s in sessions:
            if s.route:
                replica = nginx.replica_of(s.route)
                served[replica] = served.get(replica, 0) + 1
        return "(sessions per replica: " + " + ".join(str(n) for n in sorted(served.values(), reverse=True)) + ")"

    return spread


# Main ---------------------------------------------------------------------------------------------


async def run(args, single: Database, replicated: Database | None, why_not: str) -> int:
    from playwright.async_api import async_playwright

    problems: list[str] = []
    pace = (
        f"think {args.think:.1f} s before deciding and before saving, {args.decision_gap:.2f} s between decisions, "
        f"{args.saves} save-and-next per session (means; ±50%)"
    )
    if replicated is not None and find_nginx() is None:
        replicated, why_not = None, "nginx not found (Debian: apt-get install nginx)"
    with tempfile.TemporaryDirectory(prefix="cc-bench-sessions-") as folder:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, *FOREGROUND_ARGS], headless=True
            )
            try:
                single.use()
                annotators = add_work(single.url, args.sessions + 1, args.saves + 1)
                print(f"\n== one server (streamlit run) on {dialect(single.url)}: 1 session, then {args.sessions}")
                print(f"  {pace}", flush=True)
                problems += await one_server(browser, single.url, annotators, args, Path(folder))
                if replicated is None:
                    print(f"\n== two replicas behind nginx not measured: {why_not}", flush=True)
                else:
                    replicated.use()
                    annotators = add_work(replicated.url, args.replica_sessions + 1, args.saves + 1)
                    print(
                        f"\n== two replicas (clinconsensus serve) behind nginx on {dialect(replicated.url)}: "
                        f"1 session, then {args.replica_sessions}"
                    )
                    print(f"  {pace}", flush=True)
                    problems += await two_replicas(browser, replicated.url, annotators, args, Path(folder))
            finally:
                await browser.close()
    if problems:
        print("\nFAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print("\nevery session's saves are in the database, label for label")
    return 0


def dialect(url: str) -> str:
    return "PostgreSQL" if url.startswith("postgresql") else "SQLite" if url.startswith("sqlite") else url.split(":")[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="SQLAlchemy URL for the one server, not changed (default: build one)")
    parser.add_argument(
        "--replica-database", help="PostgreSQL URL for the two replicas, not changed (default: build one)"
    )
    parser.add_argument("--cases", type=int, default=None, help="cases of the databases built here (default 2,500)")
    parser.add_argument("--skip-replicas", action="store_true", help="the one server only")
    parser.add_argument("--sessions", type=int, default=20, help="browser sessions at once on the one server")
    parser.add_argument("--replica-sessions", type=int, default=40, help="browser sessions at once on the replicas")
    parser.add_argument("--saves", type=int, default=6, help="save-and-next per session")
    parser.add_argument("--think", type=float, default=1.0, help="mean seconds of reading before and after deciding")
    parser.add_argument("--decision-gap", type=float, default=0.3, help="mean seconds between two decisions")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a page may take to answer")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} not found (Debian: apt-get install chromium fonts-noto-cjk)", file=sys.stderr)
        return 1
    if min(args.sessions, args.replica_sessions, args.saves) < 1:
        parser.error("--sessions, --replica-sessions and --saves take 1 or more")
    with databases(args) as (single, replicated, why_not):
        return asyncio.run(run(args, single, replicated, why_not))


if __name__ == "__main__":
    raise SystemExit(main())
