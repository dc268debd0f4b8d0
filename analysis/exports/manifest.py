"""The manifest every export writes: what it is, the sha256 of its files and the audit head it was made at.

`clinconsensus audit verify --anchor MANIFEST` checks that the database still holds that head as the
same entry of its log, so a database restored to before the export (or a log cut short or rewritten
since) is caught. A folder export writes `DIR/manifest.json`; a one-file export writes
`FILE.manifest.json` beside it (outside what the official scorer reads).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from analysis.exports.paths import write_text
from analysis.loader import audit_head

MANIFEST_NAME = "manifest.json"
MANIFEST_SUFFIX = ".manifest.json"


def manifest_beside(path: Path) -> Path:
    """Where a one-file export's manifest goes: `FILE.manifest.json`."""
    path = Path(path)
    return path.with_name(path.name + MANIFEST_SUFFIX)


def export_head(engine: Engine) -> dict[str, Any]:
    """The audit head to anchor an export at: read before the export reads its data."""
    return audit_head(engine)


def write_manifest(target: Path, *, export: str, head: dict[str, Any], files: dict[str, str], **extra: Any) -> Path:
    """Writes the manifest of an export at `target` (a folder or a file) and returns its path."""
    target = Path(target)
    path = target / MANIFEST_NAME if target.is_dir() else manifest_beside(target)
    manifest = {"export": export, **extra, "sha256": dict(sorted(files.items())), "audit_head": head}
    write_text(path, json.dumps(manifest, ensure_ascii=False, indent=2, allow_nan=False) + "\n")
    return path
