"""How every export writes: JSON text as the exports spell it, joined and streamed lines, sha256 of what was
written, and the output directory cleared of earlier outputs. Deterministic: the same data gives the same bytes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from analysis.exports.paths import StreamedFile, open_for_writing, output_dir, write_text
from db.rules.progress_report import Progress

#: Lines written between two progress reports.
PROGRESS_CHUNK = 20_000
BOOLEAN_TEXTS = ["false", "true", "null"]


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
