"""`--gold final|provisional` and `--min-responses N` (docs/REFERENCE.md §3.7, §4.1), shared by the commands
that publish gold figures: each resolves to the option given, else `CLINCONSENSUS_GOLD_BASIS` /
`CLINCONSENSUS_MIN_RESPONSES`, else final and 20. A bad value is one line before anything is read or written.
"""

from __future__ import annotations

import argparse

from db.rules.errors import ValidationFailed


def add_gold_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gold",
        default=None,
        metavar="final|provisional",
        help="gold basis: final (checked and adjudicated; default CLINCONSENSUS_GOLD_BASIS, else final) or"
        " provisional (every decision that has gold)",
    )


def add_min_responses_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--min-responses",
        default=None,
        metavar="N",
        help="ranking minimum: complete responses a model needs to be ranked"
        " (default CLINCONSENSUS_MIN_RESPONSES, else 20)",
    )


def _settings():
    from pydantic import ValidationError

    from db.rules.config import get_settings

    try:
        return get_settings()
    except ValidationError as error:
        first = error.errors()[0]
        name = "CLINCONSENSUS_" + str(first["loc"][0]).upper() if first.get("loc") else "a CLINCONSENSUS_ variable"
        raise ValidationFailed(f"{name}: {first['msg']}") from None


def gold_basis(args: argparse.Namespace) -> str:
    """The gold basis the command stands on (`--gold`, else the setting)."""
    from db.rules.gold import check_basis

    given = getattr(args, "gold", None)
    if given is not None:
        return check_basis(given)
    return check_basis(_settings().gold_basis, "CLINCONSENSUS_GOLD_BASIS")


def min_responses(args: argparse.Namespace) -> int:
    """The ranking minimum of the command (`--min-responses`, else the setting)."""
    from db.rules.gold import check_min_responses

    given = getattr(args, "min_responses", None)
    if given is None:
        return check_min_responses(_settings().min_responses, "CLINCONSENSUS_MIN_RESPONSES")
    try:
        value = int(given)
    except ValueError:
        raise ValidationFailed(f"--min-responses must be a whole number of at least 1, got {given!r}") from None
    return check_min_responses(value)
