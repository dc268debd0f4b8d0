"""CSV for spreadsheets: every CSV the app writes (report tables, page downloads) goes through here.

A spreadsheet reads a cell that starts with `=`, `+`, `-` or `@` (or a tab or carriage return
before one) as a formula, so a model name like `=HYPERLINK(...)` would run when the file is opened.
Spreadsheets also skip leading spaces (ASCII, NBSP, the ideographic U+3000) before such a start, and
some read the fullwidth forms ＝＋－＠ as their ASCII twins (an input method types them). Such text
cells (and column headers) are written with a leading apostrophe, which spreadsheets show as text;
numeric columns are written as numbers, untouched.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.exports.paths import open_for_writing

#: First characters that make a spreadsheet read a cell as a formula (OWASP "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
#: Spaces a spreadsheet skips before it looks at the first character: ASCII, no-break and ideographic.
LEADING_SPACES = " \u00a0\u3000"


def neutral_text(value: object) -> object:
    """`value` with an apostrophe in front when it is text a spreadsheet would read as a formula."""
    if isinstance(value, str) and value.lstrip(LEADING_SPACES).startswith(FORMULA_STARTS):
        return "'" + value
    return value


def neutralised(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` whose text cells and headers cannot start a formula; numbers stay numbers."""
    result = frame.rename(columns=neutral_text)
    for position in range(result.shape[1]):
        column = result.iloc[:, position]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            continue
        result.isetitem(position, column.map(neutral_text).to_numpy(dtype=object))
    return result


def csv_text(frame: pd.DataFrame) -> str:
    """The frame as CSV text, without its index, formula-safe."""
    return neutralised(frame).to_csv(index=False)


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """`csv_text` encoded as UTF-8 (a page's download)."""
    return csv_text(frame).encode("utf-8")


def write_csv(frame: pd.DataFrame, path: str | Path) -> None:
    """Write `csv_text(frame)` to `path` (UTF-8), never through a symbolic link."""
    with open_for_writing(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(csv_text(frame))
