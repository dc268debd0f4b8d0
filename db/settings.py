"""Every setting ClinConsensus Studio reads from the environment, in one place.

`DATABASE_URL` keeps its conventional name; the others start with `CLINCONSENSUS_`. The
environment is read again on every `get_settings()`, so a command or a test that changes a
variable is honoured at once.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CLINCONSENSUS_", extra="ignore", frozen=True)

    #: Any SQLAlchemy URL; empty means a SQLite file under ./data/.
    database_url: str = Field(default="", validation_alias="DATABASE_URL")
    #: Criteria per case (DESIGN §3.1); the benchmark and the public release use 30.
    rubric_size: int = Field(default=30, ge=1, le=1000)
    #: A taxonomy file replacing the shipped db/taxonomy.json.
    taxonomy: Path | None = None
    #: One password for every demo account (else each gets a fresh random one, shown once).
    demo_password: str = ""
    #: Test suite: fail (rather than skip) when no PostgreSQL server or no browser can be started.
    require_postgres: bool = False
    require_browser: bool = False
    #: Test suite: the Chromium the browser tests drive.
    chromium: Path = Path("/usr/bin/chromium")

    @field_validator("database_url", mode="before")
    @classmethod
    def _strip(cls, value: object) -> object:
        return value.strip() if isinstance(value, str) else value

    @field_validator("taxonomy", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("require_postgres", "require_browser", mode="before")
    @classmethod
    def _switch(cls, value: object) -> object:
        # As the test suite always read them: unset, empty or "0" is off, anything else is on.
        return isinstance(value, str) and value not in ("", "0") if isinstance(value, str) else value


def get_settings() -> Settings:
    return Settings()
