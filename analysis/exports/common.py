"""What every export shares: record constants, the summary, deterministic writers and the frames of current rubrics."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.engine import Engine

from analysis.exports.paths import StreamedFile, open_for_writing, output_dir, write_text
from analysis.loader import load_criteria, load_responses
from analysis.prompt import DEFAULT_TEMPLATE, TEMPLATE_FIELDS, user_message  # noqa: F401  (shared names)
from db.rules.gold import FINAL, gold_states
from db.rules.progress_report import Progress
from db.rules.records import (
    DIFFICULTIES as DIFFICULTIES,
    FORBIDDEN_KEY_PARTS as FORBIDDEN_KEY_PARTS,
    OPTIONAL_CASE_FIELDS,
    REQUIRED_CASE_FIELDS,
    is_forbidden_key as is_forbidden_key,
)

EXPORT_KINDS = ("gold", "release", "judgements", "judge-items", "sft")
DEFAULT_SEED = 20260101
RELEASE_LICENSE = "CC BY 4.0"

#: A released case has the fields of an imported one (`db.rules.records`).
RELEASE_FIELDS = REQUIRED_CASE_FIELDS
OPTIONAL_RELEASE_FIELDS = OPTIONAL_CASE_FIELDS

#: Explanations for SFT rows without a physician's note (the label alone).
GENERIC_EXPLANATION = {True: "回答满足该评分标准的要求。", False: "回答未满足该评分标准的要求。"}

#: Lines written between two progress reports.
PROGRESS_CHUNK = 20_000
#: Items a printed summary lists one by one (left-out cases, removed keys, warnings); the rest are counted.
MAX_LISTED = 50
BOOLEAN_TEXTS = ["false", "true", "null"]


# Summaries ------------------------------------------------------------------------------------


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


# Writing helpers ------------------------------------------------------------------------------


def json_text(value) -> str:
    """One value as the exports write JSON: Chinese as is, no NaN."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def json_texts(values) -> np.ndarray:
    """JSON text of each value, encoding each distinct value once."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))
    encoded = np.array([json_text(value) for value in uniques] or [""], dtype=object)
    return encoded[codes]


def json_texts_arrow(values: pd.Series) -> pa.Array:
    """As `json_texts`, as an Arrow string array (for `write_joined`)."""
    codes, uniques = pd.factorize(values)
    return chosen_texts(codes, [json_text(value) for value in uniques])


def chosen_texts(codes: np.ndarray, texts: list[str]) -> pa.Array:
    """texts[code] for each code, as an Arrow string array."""
    return pa.array(texts or [""], type=pa.large_string()).take(pa.array(codes, type=pa.int64()))


def nullable_codes(series: pd.Series) -> np.ndarray:
    """A nullable boolean column as codes into ("false", "true", "null")."""
    codes = series.fillna(False).to_numpy(bool).astype(np.int64)
    codes[series.isna().to_numpy()] = 2
    return codes


#: The slices a joined buffer is written in, so a large file is written through as it goes (`StreamedFile`).
WRITE_BLOCK_BYTES = 8 << 20


def write_joined(path: Path, parts: list, rows: int) -> None:
    """Write one line per row, each the concatenation of `parts` (Arrow string arrays or str constants).

    Arrow joins the pieces in C; the joined array's data buffer is the file's bytes, lines in order.
    """
    with StreamedFile(path) as handle:
        if rows == 0:
            return
        pieces = [part if isinstance(part, pa.Array) else pa.scalar(part, type=pa.large_string()) for part in parts]
        lines = pc.binary_join_element_wise(
            *pieces, pa.scalar("\n", type=pa.large_string()), pa.scalar("", type=pa.large_string())
        )
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + rows + 1]
        data = memoryview(lines.buffers()[2])[int(offsets[0]) : int(offsets[-1])]
        for start in range(0, len(data), WRITE_BLOCK_BYTES):
            handle.write(data[start : start + WRITE_BLOCK_BYTES])


def sha256_file(path: Path) -> str:
    """The sha256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_lines(path: Path, lines: Iterable[str], total: int, progress: Progress, note: str) -> tuple[int, str]:
    """Write JSON lines, reporting progress; returns (number of lines, sha256 of the file)."""
    writer = HashingWriter(path)
    try:
        for line in lines:
            writer.add(line + "\n")
            if writer.lines % PROGRESS_CHUNK == 0:
                progress(writer.lines, total, note)
    finally:
        writer.close()
    progress(writer.lines, total, note)
    return writer.lines, writer.sha256


class HashingWriter:
    """Appends text lines to a UTF-8 file in large blocks, hashing the bytes on the way (no second read)."""

    def __init__(self, path: Path, block: int = 2000) -> None:
        self.handle = StreamedFile(path)  # closed by close(), which the callers call in finally
        self.digest = hashlib.sha256()
        self.pending: list[str] = []
        self.block = block
        self.lines = 0

    def add(self, line: str) -> None:
        self.pending.append(line)
        self.lines += 1
        if len(self.pending) >= self.block:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            data = "".join(self.pending).encode("utf-8")
            self.digest.update(data)
            self.handle.write(data)
            self.pending.clear()

    def close(self) -> None:
        self.flush()
        self.handle.close()

    @property
    def sha256(self) -> str:
        return self.digest.hexdigest()


def write_json(path: Path, value, indent: int | None = 2) -> None:
    """One JSON document (indented by default) and a newline, written where exports may write."""
    write_text(path, json.dumps(value, ensure_ascii=False, indent=indent, allow_nan=False) + "\n")


def write_json_without_floats(path: Path, value) -> None:
    """`write_json(path, value)` for a document of strings, booleans, integers, None, lists and dicts only (a
    judgements file): the same bytes, by orjson, whose 2-space layout is `json.dumps`'s for these values (a
    float could be spelled otherwise, and NaN would not be refused), where `indent` calls for the pure-Python
    encoder."""
    with open_for_writing(path, "wb") as handle:
        handle.write(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))


def prepare_dir(directory: Path, names: Iterable[str]) -> Path:
    """Create the output directory and remove earlier outputs of ours, so no stale file survives."""
    directory = output_dir(directory)
    for name in names:
        (directory / name).unlink(missing_ok=True)
    return directory


# Shared frames --------------------------------------------------------------------------------


def response_keys(engine: Engine) -> pd.DataFrame:
    """response_id, case_pk, case_id and model of every response."""
    return load_responses(engine)[["response_id", "case_pk", "case_id", "model"]]


def current_criteria(engine: Engine, *, text: bool = False) -> pd.DataFrame:
    """case_pk, criterion_id and position of each current approved rubric's criteria (with text and tags when
    `text`)."""
    columns = ["case_pk", "criterion_id", "position"] + (["text", "tags"] if text else [])
    return load_criteria(engine, text=text)[columns]


def in_current_rubric(decisions: pd.DataFrame, responses: pd.DataFrame, criteria: pd.DataFrame) -> pd.DataFrame:
    """Decisions on a criterion of their case's current approved rubric, with case and position."""
    frame = decisions.merge(responses, on="response_id", how="inner")
    return frame.merge(criteria[["case_pk", "criterion_id", "position"]], on=["case_pk", "criterion_id"], how="inner")


def in_decision_order(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in export order: case (import order), model, criterion position, criterion id."""
    return frame.sort_values(
        ["case_pk", "model", "position", "criterion_id"], na_position="last", kind="stable", ignore_index=True
    )


def response_gold_states(
    labels: pd.DataFrame, responses: pd.DataFrame, criteria: pd.DataFrame, finals: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per response of `responses` (response_id, case_pk): checked1, checked2, complete, final and state by
    `db.rules.gold.gold_states`, N being its case's current criteria (`criteria`: case_pk, criterion_id)."""
    n_of_case = criteria.groupby("case_pk").size()
    n = responses["case_pk"].map(n_of_case).fillna(0).to_numpy(np.int64)
    return gold_states(labels, pd.Series(n, index=responses["response_id"].to_numpy(np.int64)), finals)


def on_basis(frame: pd.DataFrame, states: pd.DataFrame, basis: str) -> pd.DataFrame:
    """Decision rows (with response_id, group1, group2) on gold basis `basis` (docs/REFERENCE.md §4.1), with a
    `final` column: under `final`, only rows of final responses, and a group's labels only where that group
    is checked (null elsewhere); under `provisional`, every row as it is."""
    merged = frame.merge(states[["response_id", "final", "checked1", "checked2"]], on="response_id", how="left")
    merged["final"] = merged["final"].fillna(False).astype(bool)
    if basis == FINAL:
        merged = merged.loc[merged["final"].to_numpy()].reset_index(drop=True)
        for group in ("group1", "group2"):
            checked = merged[f"checked{group[-1]}"].fillna(False).to_numpy(bool)
            merged[group] = merged[group].where(checked, pd.NA).astype("boolean")
    return merged.drop(columns=["checked1", "checked2"])
