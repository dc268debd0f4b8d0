"""`write_json_without_floats` writes what `write_json` writes (`json.dumps(indent=2, ensure_ascii=False)` and a
newline), byte for byte, for the values a judgements file holds, awkward strings included."""

from __future__ import annotations

import json
import os
import stat

import pytest
from hypothesis import given, settings, strategies as st

from analysis.exports.file_writers import write_json, write_json_without_floats
from db.rules.errors import ValidationFailed

AWKWARD = [
    "CC-0001",
    "病例 一：“胸痛”",
    'quote " and backslash \\ and slash /',
    "control \x00 \x01 \x08 \t \n \r \x1f \x7f",
    "line separators \u2028 \u2029",
    "emoji 🩺 and a combining mark é",
    "",
]
DOCUMENT = [
    {
        "case_id": case_id,
        "criteria_results": [{"criterion_id": f"c{i:02d}", "criteria_met": i % 2 == 0} for i in range(3)],
    }
    for case_id in AWKWARD
] + [{"empty list": [], "empty dict": {}, "none": None, "int": -(2**62), "nested": [[[]], {"a": {"b": [1, 2]}}]}]


def _as_write_json(tmp_path, value) -> bytes:
    write_json(tmp_path / "reference.json", value)
    return (tmp_path / "reference.json").read_bytes()


def test_the_same_bytes_as_write_json(tmp_path):
    write_json_without_floats(tmp_path / "fast.json", DOCUMENT)
    written = (tmp_path / "fast.json").read_bytes()
    assert written == (json.dumps(DOCUMENT, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    assert written == _as_write_json(tmp_path, DOCUMENT)
    assert json.loads(written) == DOCUMENT
    assert stat.S_IMODE(os.stat(tmp_path / "fast.json").st_mode) == 0o600


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES)
def test_the_same_bytes_for_any_document_without_floats(tmp_path_factory, value):
    folder = tmp_path_factory.mktemp("json")
    try:
        expected = (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return  # a lone surrogate: neither writer can write it as UTF-8
    write_json_without_floats(folder / "fast.json", value)
    assert (folder / "fast.json").read_bytes() == expected


def test_a_symbolic_link_at_the_target_is_refused(tmp_path):
    (tmp_path / "elsewhere.json").write_text("kept")
    (tmp_path / "link.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ValidationFailed):
        write_json_without_floats(tmp_path / "link.json", DOCUMENT)
    assert (tmp_path / "elsewhere.json").read_text() == "kept"
