"""The authoring page's draft helpers (annotate/authoring_drafts.py): moves by number and the row height."""

from __future__ import annotations

from annotate.authoring_drafts import LINE_PX, MAX_LINES, ROW_PADDING_PX, apply_moves, row_height, rows_from_draft
from db.rubrics.provenance import OfferedDraft


def test_a_row_moves_to_the_number_typed_and_out_of_range_numbers_are_clamped():
    rows = [{"text": str(i)} for i in range(5)]
    assert [r["text"] for r in apply_moves(rows, [(3, 1)])] == ["3", "0", "1", "2", "4"]
    assert [r["text"] for r in apply_moves(rows, [(0, 99)])] == ["1", "2", "3", "4", "0"]
    assert [r["text"] for r in apply_moves(rows, [(2, 3), (9, 1)])] == ["0", "1", "2", "3", "4"]
    assert [r["text"] for r in rows] == ["0", "1", "2", "3", "4"], "the rows given are not changed"


def test_one_line_rows_only_when_every_text_fits():
    one, three = ROW_PADDING_PX + LINE_PX, ROW_PADDING_PX + LINE_PX * MAX_LINES
    assert row_height(["说明随访时间", "", "ok"], 330) == one
    assert row_height(["说明" * 30], 330) == three
    assert row_height([], 330) == one


def test_a_short_draft_leaves_empty_rows():
    draft = OfferedDraft(1, "g", [{"criterion": "甲", "tags": ["x"]}, {"criterion": "乙"}], None)  # type: ignore[arg-type]
    rows = rows_from_draft(draft, ["c01", "c02", "c03"])
    assert rows == [
        {"criterion_id": "c01", "text": "甲", "tags": ["x"]},
        {"criterion_id": "c02", "text": "乙", "tags": []},
        {"criterion_id": "c03", "text": "", "tags": []},
    ]
