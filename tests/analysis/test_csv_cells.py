"""CSV cells a spreadsheet would run as a formula, including after leading spaces and in fullwidth forms."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from analysis.exports.csv_cells import csv_text, neutral_text

# (cell, written) pairs spelled out by hand: what a spreadsheet would run gets an apostrophe.
CASES = [
    (" =1+1", "' =1+1"),
    ('\u00a0=HYPERLINK("x")', '\'\u00a0=HYPERLINK("x")'),
    ("\u3000@SUM(A1)", "'\u3000@SUM(A1)"),
    ("  \u00a0\u3000-2+3", "'  \u00a0\u3000-2+3"),
    ("\uff1d1+1", "'\uff1d1+1"),
    ("\uff0bcmd", "'\uff0bcmd"),
    ("\uff0dcmd", "'\uff0dcmd"),
    ("\uff20cmd", "'\uff20cmd"),
    ("\u3000\uff1dcmd", "'\u3000\uff1dcmd"),
    ("   plain text", "   plain text"),
    ("\u3000胸痛 3 天", "\u3000胸痛 3 天"),
    ("ＡＢＣ-model", "ＡＢＣ-model"),
    ("a = b", "a = b"),
    ("", ""),
]


@pytest.mark.parametrize(("cell", "written"), CASES)
def test_a_cell_after_spaces_or_in_fullwidth_form_is_marked(cell, written):
    assert neutral_text(cell) == written


def test_every_text_cell_of_a_written_csv_is_marked_and_numbers_stay():
    frame = pd.DataFrame({"model": [cell for cell, _ in CASES], "n": range(len(CASES))})
    rows = list(csv.reader(io.StringIO(csv_text(frame), newline="")))
    assert [row[0] for row in rows[1:]] == [written for _, written in CASES]
    assert [int(row[1]) for row in rows[1:]] == list(range(len(CASES)))
