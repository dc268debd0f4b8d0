"""Hit labeling: the annotator's queue, one blinded response beside its case, and the rubric as one checklist.

The N criteria are ONE `st.data_editor` (a `met` checkbox and an optional note per row) that does
not rerun the page on each tick: the ticks travel with the save. "Save and next" (Ctrl+Enter)
runs as a callback: it saves through db/labeling.py (which refuses a save against a changed rubric
or over someone else's newer labels), says what happened, and moves to the next open response.

The queue (thousands of responses at full scale) is read once and kept for QUEUE_TTL_S seconds;
the page's own saves update it in place, and a button reads it again at once.
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from ui import shell, widgets
from ui.case_panel import case_panel
from db import labeling
from db.errors import ClinConsensusError, StaleEdit, ValidationFailed
from db.labeling import LabelInput, LabelingView, LabelQueue, RubricChanged
from db.models import Role

t = shell.t
CURRENT_KEY = "annotate_label_current"
LOADED_KEY = "annotate_label_loaded"
QUEUE_KEY = "annotate_label_queue"
FLASH_KEY = "annotate_label_flash"
GENERATION_KEY = "annotate_label_generation"
QUEUE_TTL_S = 120.0
#: Queue entries offered in the picker: a few before the current one and the next ones.
PICKER_BEFORE, PICKER_AFTER = 20, 300
PANE_HEIGHT = 340
ROW_HEIGHT = 35
TEXT_WIDTH = 520
#: Case, response and checklist fit one screen; the checklist scrolls inside itself.
CHECKLIST_MAX_HEIGHT = 500


# Ctrl+Enter (⌘+Enter) anywhere on the page, the checklist included: the grid keeps the keys it
# receives to itself, so Streamlit's own button shortcut never hears them while a physician is
# ticking boxes. A cell still being edited is committed first (its Enter), then the button pressed.
SAVE_SHORTCUT_SCRIPT = """
<script>
(() => {
  if (window.__clinconsensusSaveShortcut) return;
  window.__clinconsensusSaveShortcut = true;
  window.addEventListener("keydown", (event) => {
    if (!(event.ctrlKey || event.metaKey) || event.key !== "Enter") return;
    const button = document.querySelector(".st-key-annotate_label_save_next button");
    if (!button || button.disabled) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    const editing = document.activeElement;
    if (editing && editing.classList && editing.classList.contains("gdg-input")) {
      editing.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter", code: "Enter", bubbles: true}));
      setTimeout(() => button.click(), 250);
    } else {
      button.click();
    }
  }, true);
})();
</script>
"""


def _status_text(item: labeling.QueueItem) -> str:
    return t(f"annotate.labeling.status.{item.status}", labeled=item.labeled, size=item.size)


def _flash(kind: str, message: str) -> None:
    st.session_state[FLASH_KEY] = (kind, message)


def _reload_editor() -> None:
    st.session_state[GENERATION_KEY] = st.session_state.get(GENERATION_KEY, 0) + 1


# Actions --------------------------------------------------------------------------------------


def _current_decisions(loaded: dict) -> list[LabelInput]:
    """The checklist as the user left it: the loaded rows with the editor's edits applied."""
    rows = [dict(row) for row in loaded["rows"]]
    edits = (st.session_state.get(loaded["editor_key"]) or {}).get("edited_rows") or {}
    for row, changes in edits.items():
        index = int(row)
        if 0 <= index < len(rows):
            if "met" in changes:
                rows[index]["met"] = bool(changes["met"])
            if "note" in changes:
                rows[index]["note"] = changes["note"]
    return [LabelInput(row["criterion_id"], bool(row["met"]), row["note"]) for row in rows]


def _load_queue(user, *, fresh: bool = False) -> LabelQueue:
    """The user's queue, read again when older than QUEUE_TTL_S, when asked, or for another user."""
    cached = st.session_state.get(QUEUE_KEY)
    if fresh or cached is None or cached["user_id"] != user.id or time.monotonic() - cached["loaded_at"] > QUEUE_TTL_S:
        with shell.db_session(read_only=True) as session:
            queue = labeling.labeling_queue(session, user)
        cached = {"user_id": user.id, "loaded_at": time.monotonic(), "queue": queue}
        st.session_state[QUEUE_KEY] = cached
    return cached["queue"]


def _cached_queue() -> LabelQueue | None:
    cached = st.session_state.get(QUEUE_KEY)
    return cached["queue"] if cached else None


def _refresh_queue() -> None:
    st.session_state.pop(QUEUE_KEY, None)


def _go_next(current_id: int) -> bool:
    queue = _cached_queue()
    following = queue.next_after(current_id) if queue else None
    if following is None:
        return False
    st.session_state[CURRENT_KEY] = following.response_id
    return True


def _save(advance: bool) -> None:
    user = shell.current_user()
    loaded = st.session_state.get(LOADED_KEY)
    if user is None or loaded is None:
        return
    try:
        with shell.db_session() as session:
            outcome = labeling.save_labels(
                session,
                user,
                loaded["response_id"],
                _current_decisions(loaded),
                rubric_version_id=loaded["rubric_version_id"],
                expected_versions=loaded["expected"],
            )
    except RubricChanged as error:
        _flash("error", t("annotate.labeling.rubric_changed", version=error.current))
        _reload_editor()
        _refresh_queue()
        return
    except StaleEdit:
        _flash("error", t("annotate.labeling.conflict"))
        _reload_editor()
        return
    except ClinConsensusError as error:
        _flash("error", t("error.generic", reason=widgets.plain(error)))
        return
    cached = st.session_state.get(QUEUE_KEY)
    if cached:
        cached["queue"] = cached["queue"].with_saved(loaded["response_id"])
    # The sidebar's figure catches up within its minute; recounting the whole queue after every
    # save would cost more than the save itself.
    code = widgets.plain(loaded["code"])
    if outcome.changed:
        _flash("success", t("annotate.labeling.saved", code=code, created=outcome.created, updated=outcome.updated))
    else:
        _flash("info", t("annotate.labeling.unchanged", code=code))
    _reload_editor()
    if advance and not _go_next(loaded["response_id"]):
        _flash("success", t("annotate.labeling.all_done"))


def _skip() -> None:
    loaded = st.session_state.get(LOADED_KEY)
    if loaded is not None:
        _go_next(loaded["response_id"])


# Page -----------------------------------------------------------------------------------------


def _pick(queue: LabelQueue) -> int:
    by_id = {item.response_id: item for item in queue.items}
    if st.session_state.get(CURRENT_KEY) not in by_id:
        requested = st.query_params.get("r")
        match = [item.response_id for item in queue.items if item.code == requested]
        following = queue.next_after(None)
        st.session_state[CURRENT_KEY] = (match or [following.response_id if following else queue.items[0].response_id])[
            0
        ]
    ids = list(by_id)
    position = ids.index(st.session_state[CURRENT_KEY])
    window = ids[max(0, position - PICKER_BEFORE) : position + PICKER_AFTER]
    choose, progress, refresh = st.columns([6, 4, 1.3], vertical_alignment="bottom")
    refresh.button(
        t("annotate.labeling.refresh_short"),
        icon=":material/refresh:",
        key="annotate_label_refresh",
        on_click=_refresh_queue,
        help=t("annotate.labeling.refresh"),
    )
    with choose:
        response_id = st.selectbox(
            t("annotate.labeling.pick"),
            window,
            key=CURRENT_KEY,
            format_func=lambda rid: t(
                "annotate.labeling.item",
                case_id=by_id[rid].case_id,
                code=by_id[rid].code,
                status=_status_text(by_id[rid]),
            ),
        )
    with progress:
        widgets.progress_bar(queue.done, queue.total)
    stale = sum(item.status == labeling.STALE for item in queue.items)
    if stale:
        st.warning(t("annotate.labeling.stale_count", n=stale))
    st.query_params["r"] = by_id[response_id].code
    return response_id


def _panes(view: LabelingView) -> None:
    case_pane, response_pane = st.columns(2, gap="medium")
    with case_pane:
        case_panel(view.case, height=PANE_HEIGHT)
    with response_pane:
        with st.container(height=PANE_HEIGHT, border=True):
            st.markdown(f"#### {t('annotate.labeling.response', code=widgets.plain(view.code))}")
            widgets.show_text(view.text)


def _checklist(view: LabelingView) -> pd.DataFrame:
    rows = []
    for criterion in view.criteria:
        label = view.labels.get(criterion.criterion_id)
        rows.append(
            {
                "criterion_id": criterion.criterion_id,
                "text": criterion.text,
                "met": bool(label.met) if label else False,
                "note": (label.note or "") if label else "",
            }
        )
    editor_key = (
        f"annotate_label_editor_{view.response_id}_{view.rubric_version_id}_{st.session_state.get(GENERATION_KEY, 0)}"
    )
    st.session_state[LOADED_KEY] = {
        "response_id": view.response_id,
        "code": view.code,
        "rubric_version_id": view.rubric_version_id,
        "expected": view.expected_versions,
        "rows": rows,
        "editor_key": editor_key,
    }
    config = {
        "criterion_id": st.column_config.TextColumn(t("annotate.labeling.col.id"), width=56, disabled=True),
        "text": st.column_config.TextColumn(t("annotate.labeling.col.text"), width=TEXT_WIDTH, disabled=True),
        "met": st.column_config.CheckboxColumn(t("annotate.labeling.col.met"), width=64),
        "note": st.column_config.TextColumn(
            t("annotate.labeling.col.note"), width=220, max_chars=labeling.MAX_NOTE_CHARS
        ),
    }
    # "ignore": ticking a box does not rerun the page; the edits travel with the save.
    return st.data_editor(
        pd.DataFrame(rows, columns=["criterion_id", "text", "met", "note"]),
        key=editor_key,
        num_rows="fixed",
        hide_index=True,
        column_config=config,
        width="stretch",
        on_change="ignore",
        height=min(ROW_HEIGHT * (len(rows) + 1) + 3, CHECKLIST_MAX_HEIGHT),
        row_height=ROW_HEIGHT,
    )


def render() -> None:
    user = shell.require_user(Role.annotator)
    st.subheader(t("annotate.labeling.title"))
    queue = _load_queue(user)
    if not queue.items:
        st.info(t("annotate.labeling.empty_queue"))
        return
    response_id = _pick(queue)
    flash = st.session_state.pop(FLASH_KEY, None)
    if flash:
        getattr(st, flash[0])(flash[1])
    try:
        with shell.db_session(read_only=True) as session:
            view = labeling.response_for_labeling(session, user, response_id)
    except ValidationFailed:
        st.info(t("annotate.labeling.waiting"))
        st.button(t("annotate.labeling.skip"), on_click=_skip, key="annotate_label_skip_waiting")
        st.session_state[LOADED_KEY] = {"response_id": response_id}
        return
    except ClinConsensusError as error:
        widgets.show_error(error)
        return

    _panes(view)
    st.caption(t("annotate.labeling.rubric_line", version=view.rubric_version, n=len(view.criteria)))
    if any(label.stale for label in view.labels.values()):
        st.warning(t("annotate.labeling.stale_labels"))
    _checklist(view)
    buttons = st.columns([2, 1, 1, 3], vertical_alignment="center")
    buttons[0].button(
        t("annotate.labeling.save_next"),
        type="primary",
        on_click=_save,
        args=(True,),
        shortcut="ctrl+enter",
        key="annotate_label_save_next",
        width="stretch",
    )
    buttons[1].button(
        t("annotate.labeling.save"), on_click=_save, args=(False,), key="annotate_label_save", width="stretch"
    )
    buttons[2].button(t("annotate.labeling.skip"), on_click=_skip, key="annotate_label_skip", width="stretch")
    if view.labels:
        saved_met = sum(label.met for label in view.labels.values())
        buttons[3].caption(t("annotate.labeling.met_count", met=saved_met, n=len(view.criteria)))
    st.html(SAVE_SHORTCUT_SCRIPT, unsafe_allow_javascript=True)
