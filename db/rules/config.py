"""Every setting ClinConsensus Studio reads from the environment, in one place (`Settings`).

`DATABASE_URL` keeps its conventional name; the others start with `CLINCONSENSUS_`. The
environment is read again on every `get_settings()`, so a command or a test that changes a
variable is honoured at once; `RUBRIC_SIZE` is read once, when the application starts.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATA_DIR = Path("data")
DEFAULT_SQLITE_FILE = DEFAULT_DATA_DIR / "clinconsensus.db"
#: The data folder as the process found it when it started: a later change of the working directory
#: must not make the audit key file (and so the chain's key) another one.
DATA_DIR_AT_START = DEFAULT_DATA_DIR.resolve()
AUDIT_KEY_FILE_NAME = "audit.key"

#: Failed sign-ins of one username (known or not) within the window before it is locked, and for how long.
MAX_FAILED_LOGINS = 5
LOCKOUT_MINUTES = 15


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CLINCONSENSUS_", extra="ignore", frozen=True)

    #: Any SQLAlchemy URL; empty means a SQLite file under ./data/.
    database_url: str = Field(default="", validation_alias="DATABASE_URL")
    #: Criteria per case (docs/REFERENCE.md §3.1); the benchmark and the public release use 30.
    rubric_size: int = Field(default=30, ge=1, le=1000)
    #: A browser sign-in ends after this long without use (besides its absolute lifetime of 12 hours).
    idle_minutes: int = Field(default=30, ge=1)
    #: The audit chain's key, or the file that holds it (default: `audit_key_path()`).
    audit_key: str = ""
    audit_key_file: Path | None = None
    #: The time zone of times shown when the browser does not say its own (an IANA name).
    timezone: str = ""
    #: Where reports of a server database (PostgreSQL) are kept per data version (default: the folder of
    #: the audit key file; a SQLite database keeps them beside its file).
    cache_dir: Path | None = None
    #: A taxonomy file replacing the shipped db/rules/taxonomy.json.
    taxonomy: Path | None = None
    #: Environment variables an admin allows a judge's API key to come from, besides names ending in
    #: `_API_KEY` (comma-separated names; DATABASE_URL, CLINCONSENSUS_* and STREAMLIT_* never: judge.api_keys).
    api_key_vars: str = ""
    #: The gold basis of every figure, export and snapshot unless a command says otherwise (`--gold`):
    #: `final` (checked and adjudicated gold only) or `provisional` (every decision that has gold;
    #: docs/REFERENCE.md §4.1). Checked where it is read (`db.rules.gold.check_basis`: one line, not a traceback).
    gold_basis: str = "final"
    #: The ranking minimum: complete responses a model needs to be ranked (`--min-responses`; at least 1,
    #: checked where it is read: `db.rules.gold.check_min_responses`).
    min_responses: int = 20
    #: One password for every demo account (else each gets a fresh random one, shown once).
    demo_password: str = ""
    #: Test suite: fail (rather than skip) when no PostgreSQL server or no browser can be started.
    require_postgres: bool = False
    require_browser: bool = False
    #: The Chrome/Chromium that draws static figures and that the browser tests drive (unset: the
    #: figures look on PATH, the tests use Debian's /usr/bin/chromium); BROWSER_PATH is kaleido's name.
    chromium: Path | None = None
    browser_path: Path | None = Field(default=None, validation_alias="BROWSER_PATH")

    @field_validator("database_url", mode="before")
    @classmethod
    def _strip(cls, value: object) -> object:
        return value.strip() if isinstance(value, str) else value

    @field_validator("audit_key", "timezone", "api_key_vars", "gold_basis", mode="before")
    @classmethod
    def _strip_text(cls, value: object) -> object:
        return value.strip() if isinstance(value, str) else value

    @field_validator("taxonomy", "audit_key_file", "chromium", "browser_path", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("require_postgres", "require_browser", mode="before")
    @classmethod
    def _switch(cls, value: object) -> object:
        # As the test suite always read them: unset, empty or "0" is off, anything else is on.
        return value not in ("", "0") if isinstance(value, str) else value

    def audit_key_path(self) -> Path:
        """The audit key file, always absolute: `CLINCONSENSUS_AUDIT_KEY_FILE`, else `audit.key` beside the database.

        Beside the database is the SQLite file's folder; for any other database (PostgreSQL) it is the
        data folder under the directory the process started in, resolved when it started.
        """
        if self.audit_key_file is not None:
            return self.audit_key_file.expanduser().resolve()
        return (_database_folder(self.database_url) or DATA_DIR_AT_START) / AUDIT_KEY_FILE_NAME


def _database_folder(url: str) -> Path | None:
    """The folder of a SQLite database file (the default one when `url` is empty); None for any other database."""
    if not url:
        return DEFAULT_SQLITE_FILE.resolve().parent
    scheme, _, rest = url.partition(":///")
    if not scheme.startswith("sqlite") or not rest:
        return None
    file = rest.split("?", 1)[0]
    if not file or file == ":memory:" or file.startswith("file:"):
        return None
    return Path(file).expanduser().resolve().parent


#: Variables read outside the CLINCONSENSUS_ prefix (names compared without case, as pydantic-settings does).
_UNPREFIXED = ("DATABASE_URL", "BROWSER_PATH")


def get_settings() -> Settings:
    """The settings as the environment says now (parsed again only when a variable of ours changed)."""
    ours = tuple(
        sorted(
            (name.upper(), value)
            for name, value in os.environ.items()
            if name.upper().startswith("CLINCONSENSUS_") or name.upper() in _UNPREFIXED
        )
    )
    return _settings_for(ours)


@lru_cache(maxsize=16)
def _settings_for(_environment: tuple[tuple[str, str], ...]) -> Settings:
    # Settings are frozen; parsing every variable costs about a millisecond, and a save asks several times.
    return Settings()


#: Criteria per case (docs/REFERENCE.md §3.1); an installation may change it, the benchmark uses 30.
RUBRIC_SIZE = get_settings().rubric_size
#: A browser sign-in ends after this long without use (CLINCONSENSUS_IDLE_MINUTES).
IDLE_TIMEOUT_MINUTES = get_settings().idle_minutes


def database_url() -> str:
    """The SQLAlchemy URL of the database: `DATABASE_URL`, else a SQLite file under ./data/."""
    url = get_settings().database_url
    if url:
        return url
    DEFAULT_DATA_DIR.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{DEFAULT_SQLITE_FILE.resolve()}"
