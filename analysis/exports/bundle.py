"""Any export run into a temporary folder and returned as a zip, for a page's download button."""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from sqlalchemy.engine import Engine

from analysis.exports.export_summary import EXPORT_KINDS, ExportSummary, LeftOut
from analysis.exports.gold import export_gold
from analysis.exports.judge_items import export_judge_items
from analysis.exports.judgements import export_judgements
from analysis.exports.manifest import manifest_beside
from analysis.exports.release import export_release
from analysis.exports.sft import export_sft
from db.rules.errors import ValidationFailed
from db.rules.progress_report import Progress, no_progress

# Downloads ------------------------------------------------------------------------------------

_BUNDLE_TARGET = {
    "gold": "gold.jsonl",
    "release": "release",
    "judgements": "judgements",
    "judge-items": "judge_items.jsonl",
    "sft": "sft",
}
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


class Bundle(NamedTuple):
    """One export as a download: its zip (with SUMMARY.txt) and what it left out, for the page to say."""

    filename: str
    data: bytes
    left_out: list[LeftOut]


def export_bundle(engine: Engine, what: str, progress: Progress = no_progress, **options) -> tuple[str, bytes]:
    """(file name, zip bytes) of one export, for a download button; the zip also holds SUMMARY.txt."""
    bundle = build_bundle(engine, what, progress, **options)
    return bundle.filename, bundle.data


def build_bundle(engine: Engine, what: str, progress: Progress = no_progress, **options) -> Bundle:
    """One export zipped, with what it left out and why."""
    runners: dict[str, Callable[..., ExportSummary]] = {
        "gold": export_gold,
        "release": export_release,
        "judgements": export_judgements,
        "judge-items": export_judge_items,
        "sft": export_sft,
    }
    if what not in runners:
        raise ValidationFailed(f"export {what!r}: expected one of {', '.join(EXPORT_KINDS)}")
    with tempfile.TemporaryDirectory(prefix="clinconsensus-export-") as temporary:
        target = Path(temporary) / _BUNDLE_TARGET[what]
        summary = runners[what](engine, target, progress=progress, **options)
        paths = sorted(target.rglob("*")) if target.is_dir() else [target, manifest_beside(target)]
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in paths:
                if path.is_file():
                    info = zipfile.ZipInfo(str(path.relative_to(temporary)), date_time=_ZIP_DATE)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    with open(path, "rb") as handle:
                        archive.writestr(info, handle.read())
            # Paths as the zip names its entries ("gold.jsonl", "sft/train.jsonl"), never "/gold.jsonl".
            summary_text = str(summary).replace(temporary + os.sep, "").replace(temporary, ".").replace("\\", "/")
            archive.writestr(zipfile.ZipInfo("SUMMARY.txt", date_time=_ZIP_DATE), summary_text + "\n")
    return Bundle(f"clinconsensus-{what}.zip", buffer.getvalue(), summary.left_out)
