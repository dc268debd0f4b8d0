"""The exports of docs/REFERENCE.md §3.5: gold, the public release, judgement files, judge items and SFT data.

Every export reads the database through `analysis.loader`, takes gold from `db.rules.gold` (the one
definition), writes UTF-8 JSON with Chinese as is, and is deterministic: the same data gives the
same bytes. Rows follow case order (import order), then model, then criterion position.

`export_bundle` runs any of them into a temporary directory and returns a zip, for a page's
download button.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analysis.exports.bundle import Bundle, build_bundle, export_bundle
    from analysis.exports.common import (
        DEFAULT_SEED,
        DEFAULT_TEMPLATE,
        EXPORT_KINDS,
        FORBIDDEN_KEY_PARTS,
        GENERIC_EXPLANATION,
        OPTIONAL_RELEASE_FIELDS,
        RELEASE_FIELDS,
        ExportSummary,
        LeftOut,
        is_forbidden_key,
        sha256_file,
        user_message,
    )
    from analysis.exports.gold import export_gold, gold_frame
    from analysis.exports.healthbench_meta import export_healthbench_meta
    from analysis.exports.judge_items import export_judge_items
    from analysis.exports.judgements import export_judgements, model_filename, parse_source, source_decisions
    from analysis.exports.release import RELEASE_FILES, export_release, release_records, release_schema
    from analysis.exports.sft import PromptTemplate, export_sft, fill_template, judge_answer, read_template, split_cases

#: Where each name of the package lives. Imported on first use: writing a report file (`paths`) must not
#: pay for every export's imports (scipy through the judgement files).
_HOMES = {
    "Bundle": "analysis.exports.bundle",
    "build_bundle": "analysis.exports.bundle",
    "export_bundle": "analysis.exports.bundle",
    "DEFAULT_SEED": "analysis.exports.common",
    "DEFAULT_TEMPLATE": "analysis.exports.common",
    "EXPORT_KINDS": "analysis.exports.common",
    "FORBIDDEN_KEY_PARTS": "analysis.exports.common",
    "GENERIC_EXPLANATION": "analysis.exports.common",
    "OPTIONAL_RELEASE_FIELDS": "analysis.exports.common",
    "RELEASE_FIELDS": "analysis.exports.common",
    "ExportSummary": "analysis.exports.common",
    "LeftOut": "analysis.exports.common",
    "is_forbidden_key": "analysis.exports.common",
    "sha256_file": "analysis.exports.common",
    "user_message": "analysis.exports.common",
    "export_gold": "analysis.exports.gold",
    "gold_frame": "analysis.exports.gold",
    "export_healthbench_meta": "analysis.exports.healthbench_meta",
    "export_judge_items": "analysis.exports.judge_items",
    "export_judgements": "analysis.exports.judgements",
    "model_filename": "analysis.exports.judgements",
    "parse_source": "analysis.exports.judgements",
    "source_decisions": "analysis.exports.judgements",
    "RELEASE_FILES": "analysis.exports.release",
    "export_release": "analysis.exports.release",
    "release_records": "analysis.exports.release",
    "release_schema": "analysis.exports.release",
    "PromptTemplate": "analysis.exports.sft",
    "export_sft": "analysis.exports.sft",
    "fill_template": "analysis.exports.sft",
    "judge_answer": "analysis.exports.sft",
    "read_template": "analysis.exports.sft",
    "split_cases": "analysis.exports.sft",
}


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_SEED",
    "DEFAULT_TEMPLATE",
    "EXPORT_KINDS",
    "FORBIDDEN_KEY_PARTS",
    "GENERIC_EXPLANATION",
    "OPTIONAL_RELEASE_FIELDS",
    "RELEASE_FIELDS",
    "RELEASE_FILES",
    "Bundle",
    "ExportSummary",
    "LeftOut",
    "PromptTemplate",
    "build_bundle",
    "export_bundle",
    "export_gold",
    "export_healthbench_meta",
    "export_judge_items",
    "export_judgements",
    "export_release",
    "export_sft",
    "fill_template",
    "gold_frame",
    "is_forbidden_key",
    "judge_answer",
    "model_filename",
    "parse_source",
    "read_template",
    "release_records",
    "release_schema",
    "sha256_file",
    "source_decisions",
    "split_cases",
    "user_message",
]
