"""The authoring page's LLM draft (docs/REFERENCE.md §4.3) and its keyboard work on 30 rows.

- The rows start from the draft waiting for the author (`db.rubrics.offered_draft`) when the case has
  no version yet; each row then shows its origin, recomputed on every edit with the rule submission
  records (`db.rules.drafting.origins`): AI 草稿 · generator, edited (with the edit distance), or
  written. Drafted criteria no longer in the rubric are listed under the grid (deleted).
- Reordering by keyboard: the № column is editable; typing another number moves the row there.
- The row height follows the longest criterion: one line when every criterion fits the text column,
  else three wrapped lines (the grid wraps a cell's text only in rows taller than 64 px), so a rubric of
  30 one-line criteria shows 15+ rows in view.
"""

from __future__ import annotations

import math
import unicodedata

import streamlit as st

from db.rubrics.provenance import OfferedDraft
from db.rules.drafting import DELETED, DRAFTED, EDITED, WRITTEN, origins
from ui import shell

t = shell.t
#: Pixels a line of the grid's 14 px text needs, and a row's padding; a wide (CJK) character is ~14 px.
LINE_PX, ROW_PADDING_PX = 21, 13
WIDE_CHAR_PX, NARROW_CHAR_PX = 14.2, 7.6
MAX_LINES = 3


def text_px(text: str) -> float:
    return sum(WIDE_CHAR_PX if unicodedata.east_asian_width(char) in "WF" else NARROW_CHAR_PX for char in text)


def row_height(texts: list[str], column_px: int) -> int:
    """The grid's row height: one line when every text fits a column `column_px` wide, else three."""
    usable = max(column_px - 16, 40)
    lines = max((math.ceil(text_px(text) / usable) for text in texts if text), default=1)
    return ROW_PADDING_PX + LINE_PX * (1 if lines <= 1 else MAX_LINES)


def rows_from_draft(draft: OfferedDraft, ids: list[str]) -> list[dict]:
    """The editor's N rows filled from the draft in its order (fewer drafted criteria leave empty rows)."""
    rows = [
        {"criterion_id": cid, "text": item["criterion"], "tags": list(item.get("tags") or [])}
        for cid, item in zip(ids, draft.criteria, strict=False)
    ]
    rows += [{"criterion_id": cid, "text": "", "tags": []} for cid in ids[len(rows) :]]
    return rows


def origin_column(draft: OfferedDraft | None, rows: list[dict]) -> tuple[list[str], list[str]]:
    """(each row's origin label, the drafted criteria no row keeps); empty labels without a draft."""
    if draft is None:
        return [""] * len(rows), []
    texts = [row["text"] or "" for row in rows]
    found = origins(texts, draft.texts())
    labels = [""] * len(rows)
    written_rows = {o.row for o in found if o.origin == WRITTEN}
    for o in found:
        if o.row is None:
            continue
        if o.origin == DRAFTED:
            labels[o.row] = t("drafts.origin.drafted", generator=draft.generator)
        elif o.origin == EDITED:
            labels[o.row] = t("drafts.origin.edited", generator=draft.generator, distance=o.distance)
    for row in written_rows:
        if row is not None:
            labels[row] = t("drafts.origin.written")
    deleted = [draft.texts()[o.draft] for o in found if o.origin == DELETED and o.draft is not None]
    return labels, deleted


def apply_moves(rows: list[dict], moves: list[tuple[int, int]]) -> list[dict]:
    """Rows after each (row index, new 1-based position) move, in the order given; positions are clamped."""
    moved = list(rows)
    for index, position in moves:
        if not 0 <= index < len(moved):
            continue
        target = min(max(position, 1), len(moved)) - 1
        if target != index:
            moved.insert(target, moved.pop(index))
    return moved


def draft_notice(draft: OfferedDraft | None, started_from_draft: bool) -> None:
    """One line above the grid: the draft is in the rows (marked), and nothing is submitted without the author."""
    if draft is None or not started_from_draft:
        return
    dropped = sum(int(value) for value in (draft.dropped or {}).values())
    line = t("drafts.notice", generator=draft.generator, n=len(draft.criteria))
    if dropped:
        line += " " + t("drafts.notice_dropped", n=dropped)
    st.info(line, icon=":material/auto_awesome:")


def deleted_list(deleted: list[str]) -> None:
    if not deleted:
        return
    with st.expander(t("drafts.deleted", n=len(deleted))):
        for text in deleted:
            st.text(text)


def keys_help(editable: bool) -> None:
    """Every key action of the page, on the page: shown while the rubric can be edited."""
    if not editable:
        return
    with st.expander(t("drafts.keys_title")):
        st.markdown(t("drafts.keys_body"))
