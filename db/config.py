"""Settings read from the environment, with defaults that work on a fresh checkout."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DATA_DIR = Path("data")
DEFAULT_SQLITE_FILE = DEFAULT_DATA_DIR / "clinconsensus.db"

#: Criteria per case (DESIGN §3.1); an installation may change it, the benchmark uses 30.
RUBRIC_SIZE = int(os.environ.get("CLINCONSENSUS_RUBRIC_SIZE", "30"))

#: Failed sign-ins of one username (known or not) within the window before it is locked, and for how long.
MAX_FAILED_LOGINS = 5
LOCKOUT_MINUTES = 15

#: A browser sign-in ends after this long without use (besides its absolute lifetime of 12 hours).
IDLE_TIMEOUT_MINUTES = int(os.environ.get("CLINCONSENSUS_IDLE_MINUTES", "30"))


def database_url() -> str:
    """The SQLAlchemy URL of the database: `DATABASE_URL`, else a SQLite file under ./data/."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if url:
        return url
    DEFAULT_DATA_DIR.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{DEFAULT_SQLITE_FILE.resolve()}"
