"""Which environment variable a judge's API key may come from (docs/REFERENCE.md §3.7): secrets stay home.

The key is sent as a bearer token to whatever URL the run names, so the variable must be one an
admin meant for API keys: by default a name ending in `_API_KEY`, or one listed in
`CLINCONSENSUS_API_KEY_VARS`. The app's own secrets (`DATABASE_URL`, `CLINCONSENSUS_*`,
`STREAMLIT_*`) are never read, whatever the configuration. Names are compared in upper case, as
the settings read them.
"""

from __future__ import annotations

import os
import re

from db.rules.config import get_settings
from db.rules.errors import ValidationFailed

DEFAULT_SUFFIX = "_API_KEY"
NEVER_NAMES = ("DATABASE_URL",)
NEVER_PREFIXES = ("CLINCONSENSUS_", "STREAMLIT_")
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def configured_variables() -> frozenset[str]:
    """The extra names an admin allowed (CLINCONSENSUS_API_KEY_VARS), upper-cased."""
    return frozenset(name.strip().upper() for name in get_settings().api_key_vars.split(",") if name.strip())


def is_never_allowed(variable: str) -> bool:
    """The app's own secrets: refused whatever the configuration says."""
    name = variable.upper()
    return name in NEVER_NAMES or name.startswith(NEVER_PREFIXES)


def check_api_key_variable(variable: str) -> None:
    """Raises ValidationFailed unless `variable` may hold a judge's API key."""
    if not _VARIABLE_NAME.match(variable):
        raise ValidationFailed(
            f"--api-key-env {variable!r}: not an environment variable name",
            key="judge.error.api_key_env_name",
            params={"variable": variable},
        )
    name = variable.upper()
    if is_never_allowed(name) or not (name.endswith(DEFAULT_SUFFIX) or name in configured_variables()):
        raise ValidationFailed(
            f"--api-key-env {variable}: not an API-key variable; use a name ending in {DEFAULT_SUFFIX} "
            "(an admin may allow others in CLINCONSENSUS_API_KEY_VARS; DATABASE_URL, CLINCONSENSUS_* "
            "and STREAMLIT_* never)",
            key="judge.error.api_key_env_refused",
            params={"variable": variable, "suffix": DEFAULT_SUFFIX},
        )


def api_key(variable: str | None) -> str:
    """The API key from the named, allowed environment variable ("" when no variable is named)."""
    if not variable:
        return ""
    check_api_key_variable(variable)
    value = os.environ.get(variable)
    if value is None:
        raise ValidationFailed(
            f"--api-key-env {variable}: that environment variable is not set",
            key="judge.error.api_key_env_unset",
            params={"variable": variable},
        )
    return value
