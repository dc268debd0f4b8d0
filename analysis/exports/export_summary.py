"""What an export says it did: the kinds of export, their default seed, what was left out and the summary the
command line prints and a page shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

EXPORT_KINDS = ("gold", "release", "judgements", "judge-items", "sft")
DEFAULT_SEED = 20260101
#: Items a printed summary lists one by one (left-out cases, removed keys, warnings); the rest are counted.
MAX_LISTED = 50


@dataclass(frozen=True)
class LeftOut:
    """One kind of thing an export left out: the reason's code (named in the catalog as
    `admin.export.left_out.<reason>`), how many, and the first `MAX_LISTED` of them by id."""

    reason: str
    count: int
    items: tuple[str, ...] = ()


def left_out(reason: str, items: list[str], count: int | None = None) -> LeftOut:
    """What was left out for `reason`: `count` (default: every item), the first `MAX_LISTED` items kept."""
    return LeftOut(reason, len(items) if count is None else count, tuple(items[:MAX_LISTED]))


@dataclass
class ExportSummary:
    """What an export wrote; `str()` is the text the command line prints."""

    what: str
    target: Path
    counts: dict = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # file name → sha256
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: What was left out and why, as data a page shows in its reader's language (the notes say it in English).
    left_out: list[LeftOut] = field(default_factory=list)

    def lines(self) -> list[str]:
        lines = [f"export {self.what}: {self.target}"]
        lines += [f"  {key}: {_plain(value)}" for key, value in self.counts.items()]
        lines += [f"  {name}  sha256 {digest}" for name, digest in self.files.items()]
        lines += [f"  {note}" for note in self.notes]
        if self.warnings:
            lines.append(f"  warnings ({len(self.warnings)}):")
            lines += [f"    {warning}" for warning in self.warnings[:MAX_LISTED]]
            if len(self.warnings) > MAX_LISTED:
                lines.append(f"    … and {len(self.warnings) - MAX_LISTED} more")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())


def list_text(items: list[str], separator: str) -> str:
    """The first `MAX_LISTED` items joined by `separator`, then how many more there are."""
    shown = separator.join(items[:MAX_LISTED])
    return shown + (f"{separator}… and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else "")


def _plain(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key} {count}" for key, count in value.items()) or "none"
    return str(value)
