"""Large exports are written through to the disk as they go (`StreamedFile`), with the same bytes.

The thresholds are lowered here so a few kilobytes cross them many times, at block edges that cut
Chinese characters' UTF-8 bytes in two."""

from __future__ import annotations

import hashlib
import os
import stat

import pyarrow as pa
import pytest

from analysis.exports import file_writers, paths
from analysis.exports.file_writers import HashingWriter, write_joined
from analysis.exports.paths import StreamedFile
from db.rules.errors import ValidationFailed

LINES = [f"第 {n} 行：患者主诉胸痛 {n * 7}" for n in range(400)]


def test_streamed_file_writes_through_every_threshold(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "STREAM_SYNC_BYTES", 1000)
    data = "\n".join(LINES).encode("utf-8")
    path = tmp_path / "big.jsonl"
    writes = syncs = 0
    with StreamedFile(path) as handle:
        for start in range(0, len(data), 333):
            handle.write(data[start : start + 333])
            writes += 1
            syncs += handle.unsynced == 0
            assert handle.unsynced < 1000
    assert path.read_bytes() == data
    # Three writes of 333 bytes stay under the threshold; the fourth crosses it and is written through.
    assert writes > 8 and syncs == writes // 4
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_streamed_file_keeps_the_refusals_of_open_for_writing(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep", encoding="utf-8")
    link = tmp_path / "export.jsonl"
    link.symlink_to(target)
    with pytest.raises(ValidationFailed, match="symbolic link"):
        StreamedFile(link)
    assert target.read_text(encoding="utf-8") == "keep"


def test_hashing_writer_hash_is_the_file_hash_across_write_throughs(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "STREAM_SYNC_BYTES", 512)
    path = tmp_path / "lines.jsonl"
    writer = HashingWriter(path, block=7)
    for line in LINES:
        writer.add(line + "\n")
    writer.close()
    expected = "".join(line + "\n" for line in LINES).encode("utf-8")
    assert path.read_bytes() == expected
    assert writer.sha256 == hashlib.sha256(expected).hexdigest() and writer.lines == len(LINES)


@pytest.mark.parametrize("block", [1, 5, 64, 1 << 20])
def test_write_joined_in_blocks_writes_the_joined_lines(tmp_path, monkeypatch, block):
    monkeypatch.setattr(file_writers, "WRITE_BLOCK_BYTES", block)
    monkeypatch.setattr(paths, "STREAM_SYNC_BYTES", 300)
    keys = pa.array([f'"{n}"' for n in range(len(LINES))], type=pa.large_string())
    texts = pa.array([f'"{line}"' for line in LINES], type=pa.large_string())
    path = tmp_path / "joined.jsonl"
    write_joined(path, ['{"id": ', keys, ', "text": ', texts, "}"], len(LINES))
    expected = "".join(f'{{"id": "{n}", "text": "{line}"}}\n' for n, line in enumerate(LINES))
    assert path.read_text(encoding="utf-8") == expected
