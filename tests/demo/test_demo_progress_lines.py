"""The demo's progress lines say what their figures count: the file, and lines read or records imported."""

from __future__ import annotations

import io

from db.rules.progress_report import TerminalProgress
from demo.generator import counting


def test_each_line_names_the_file_and_what_is_counted():
    stream = io.StringIO()
    progress = counting(TerminalProgress("demo small", stream=stream, interval=0.0), "labels.jsonl")
    progress(1_000, None, "lines")
    progress(4_912, 4_912, "done")
    first, last = stream.getvalue().splitlines()
    assert first.startswith("demo small: 1,000 ") and first.endswith(" labels.jsonl: lines read")
    assert last.startswith("demo small: 4,912/4,912 (100%) ") and last.endswith(" labels.jsonl: records imported")


def test_a_note_it_does_not_know_is_kept():
    seen = []
    counting(lambda done, total=None, note="": seen.append(note), "cases.jsonl")(3, 10, "rows written")
    assert seen == ["cases.jsonl: rows written"]
