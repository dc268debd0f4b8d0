"""The exports of docs/REFERENCE.md §3.5: gold, the public release, judgement files, judge items and SFT data.

Every export reads the database through `analysis.loader`, takes gold from `db.gold` (the one
definition), writes UTF-8 JSON with Chinese as is, and is deterministic: the same data gives the
same bytes. Rows follow case order (import order), then model, then criterion position.

`export_bundle` runs any of them into a temporary directory and returns a zip, for a page's
download button.
"""

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
