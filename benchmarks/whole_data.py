"""Commands that read everything, measured beside the raw read of the label table in the same run.

docs/REFERENCE.md's bar (DESIGN §6): `report`, the exports and `audit verify` within 2× the raw read of the
label table, under 600 MB. Each command and the raw read run as their own process (`clinconsensus …` as an
admin types it, imports included); the figures are that process's CPU time (user + system, from `wait4`),
wall time and peak resident memory. CPU time is compared: wall time follows the machine's other work.

The raw read is the straightforward reading of the table: `SELECT * FROM label`, every row fetched through
the database's own Python driver (sqlite3, psycopg), in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent

_RAW_READ = """
import sys
url = sys.argv[1]
if url.startswith("sqlite"):
    import sqlite3
    connection = sqlite3.connect(url.split("///", 1)[1])
else:
    import psycopg
    connection = psycopg.connect(url)
rows = connection.cursor().execute("SELECT * FROM label").fetchall()
print(len(rows))
"""


@dataclass(frozen=True)
class Measured:
    cpu: float  # user + system
    wall: float
    peak_mb: float
    output: str
    system: float = 0.0  # of `cpu`, the kernel's (page faults of a large allocation, reads, writes)
    memory_events: str = ""  # what the kernel's memory management did meanwhile (`memory_events`)

    def against(self, raw: Measured) -> str:
        """`x.xx s CPU (r.r× the raw read), w.w s wall, m MB peak`."""
        return (
            f"{self.cpu:.2f} s CPU ({self.cpu / max(raw.cpu, 1e-9):.2f}× the raw read), {self.wall:.2f} s wall, "
            f"{self.peak_mb:,.0f} MB peak"
        )


# The child is started by a small launcher, not forked from the benchmark: a process's peak memory counts
# the memory of the process it was forked from, so a fork of a large benchmark would report the benchmark's.
_LAUNCHER = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as handle:
    json.dump([usage.ru_utime + usage.ru_stime, usage.ru_maxrss, usage.ru_stime], handle)
sys.exit(os.waitstatus_to_exitcode(status))
"""


#: Counters of /proc/vmstat (the whole machine's, since boot) that put a command's kernel time in its place:
#: pages scanned to reclaim memory for an allocation that found none free, allocations that stalled on it,
#: stalls compacting memory into huge pages, and huge pages faulted in.
VMSTAT_EVENTS = {
    "pgscan_direct": "direct reclaim scans",
    "allocstall": "allocation stalls",
    "compact_stall": "compaction stalls",
    "thp_fault_alloc": "huge page faults",
}


def vmstat_counts() -> dict[str, int]:
    """The `VMSTAT_EVENTS` counters now (the `allocstall_*` zones summed); empty where there is no /proc/vmstat."""
    counts = dict.fromkeys(VMSTAT_EVENTS, 0)
    try:
        lines = Path("/proc/vmstat").read_text().splitlines()
    except OSError:
        return {}
    for line in lines:
        name, _, value = line.partition(" ")
        key = "allocstall" if name.startswith("allocstall") else name
        if key in counts:
            counts[key] += int(value)
    return counts


def memory_events(before: dict[str, int], after: dict[str, int]) -> str:
    """`direct reclaim scans 0, allocation stalls 0, …` between two `vmstat_counts` (machine-wide)."""
    return ", ".join(f"{VMSTAT_EVENTS[key]} {after[key] - before[key]:,}" for key in VMSTAT_EVENTS if key in after)


def measure(command: list[str], env: dict[str, str] | None = None) -> Measured:
    """Run `command` as a child process; its own CPU time, wall time and peak memory. Fails on a non-zero exit.

    The writes of earlier work are flushed to disk first, so no measured command shares the machine with the
    writeback of an earlier one (gigabytes after a build's vacuum, or after an export)."""
    os.sync()
    with tempfile.TemporaryDirectory() as folder:
        usage_file, out_file, err_file = (Path(folder) / name for name in ("usage", "out", "err"))
        counts = vmstat_counts()
        started = time.perf_counter()
        with open(out_file, "wb") as out, open(err_file, "wb") as err:
            result = subprocess.run(
                [sys.executable, "-S", "-c", _LAUNCHER, str(usage_file), *command],
                cwd=ROOT,
                env={**os.environ, **(env or {})},
                stdout=out,
                stderr=err,
                check=False,
            )
        wall = time.perf_counter() - started
        events = memory_events(counts, vmstat_counts()) if counts else ""
        if result.returncode != 0:
            error = err_file.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{' '.join(command)} exited with {result.returncode}: {error}")
        cpu, peak_kb, system = json.loads(usage_file.read_text())
        return Measured(cpu, wall, peak_kb / 1024, out_file.read_text(), system, events)


def python_url(url: str) -> str:
    """The URL the driver itself takes (psycopg: without SQLAlchemy's `+psycopg`)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"sqlite:///{parsed.database}"
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def raw_label_read(url: str) -> Measured:
    return measure([sys.executable, "-c", _RAW_READ, python_url(url)])


def _command_environment(url: str, key_file: Path | None) -> dict[str, str]:
    """What `clinconsensus` gets beyond the benchmark's environment: the database, and the audit key when given."""
    return {"DATABASE_URL": url, **({"CLINCONSENSUS_AUDIT_KEY_FILE": str(key_file)} if key_file else {})}


def clinconsensus(url: str, *arguments: str, key_file: Path | None = None) -> Measured:
    """`clinconsensus ARGUMENTS` against the database at `url` (with the audit key in `key_file`, when given)."""
    return measure([sys.executable, "-m", "cli.main", *arguments], _command_environment(url, key_file))


_KEPT_REPORTS_FOLDER = """
import sys
from sqlalchemy.engine import make_url
from analysis.report_cache import cache_folder
print(cache_folder(make_url(sys.argv[1])) or "")
"""


def forget_kept_reports(url: str, *, key_file: Path | None = None) -> int:
    """Remove the reports kept for the database at `url` (`analysis.report_cache`), so the next run computes.

    They are beside a SQLite file, and for a server database in a folder the commands' settings name: the
    folder is asked of a child process with the commands' environment, where `clinconsensus` itself looks."""
    found = subprocess.run(
        [sys.executable, "-c", _KEPT_REPORTS_FOLDER, url],
        cwd=ROOT,
        env={**os.environ, **_command_environment(url, key_file)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not found:
        return 0
    removed = 0
    for path in Path(found).glob("report-*"):
        path.unlink(missing_ok=True)
        removed += 1
    return removed


def load_note() -> str:
    return (
        f"machine load average (1 min) {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores — CPU time is compared, "
        "wall time grows with other work on the machine"
    )
