"""Who the command line is in the audit log: the system actor `@cli`, never an account.

Whoever runs `clinconsensus` holds the database, so the policies take it as an admin explicitly
(`db.access.policies.SystemActor`); `--actor NAME` only adds a note, recorded as `@cli:NAME`, and no
account (whose names have no "@" or ":") can be mistaken for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from db.access.policies import SystemActor

ACTOR_HELP = "a note on who ran it, recorded in the audit log as @cli:NAME (default @cli)"


def command_line(args: argparse.Namespace | None = None) -> SystemActor:
    """The command line as a system actor, with the `--actor` note when one was given."""
    # Imported here: building the parser (`--help`) should not load every table's model.
    from db.access.policies import SystemActor

    return SystemActor.command_line(getattr(args, "actor", None))


def command_line_name(args: argparse.Namespace | None = None) -> str:
    """The audit log's name for the command line (runs record who started them by this name)."""
    return command_line(args).name
