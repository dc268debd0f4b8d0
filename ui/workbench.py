"""The decision workbench both the annotator's and the checker's pages stand on (a components v2 element).

One text (the response) under its case, beside a list of items (criteria, or disputed cells), one key
per decision: 1/Y met, 0/N not met (each moving to the next), ↑/↓ or J/K move (on the check page J/K
move between responses), E a note, Space /
PageDown and Shift+Space / PageUp scroll the response, C folds the case strip away and back,
Ctrl+Enter saves. The focused criterion's key terms (ui/key_terms.py) are marked in the response.
The JavaScript and CSS live next to this file and are sent as they are.

What goes in is what the user may see: texts from the catalog, the response under its opaque code,
criteria by their rubric ids. The element's key is random per browser session, and each load of an
item gets a random token, so nothing sent carries a database id.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import streamlit as st

from ui.key_terms import key_terms
from ui.keys import widget_key
from ui.narrow_window import fold_sidebar_when_narrow
from ui.shell import t
from ui.times import clock_time

_HERE = Path(__file__).parent
_COMPONENT = None


def _component():
    global _COMPONENT
    if _COMPONENT is None:
        _COMPONENT = st.components.v2.component(
            "clinconsensus_workbench",
            css=(_HERE / "workbench.css").read_text(encoding="utf-8"),
            js=(_HERE / "workbench.js").read_text(encoding="utf-8"),
        )
    return _COMPONENT


@dataclass
class Item:
    key: str  # what the decision is about, as the user may see it (a criterion id)
    title: str
    text: str
    state: bool | None = None  # None: not yet judged
    note: str = ""
    lines: list[dict[str, str]] = field(default_factory=list)  # extra read-only lines: {label, value, note}
    marked: bool = False  # to decide again (a refused save or an older draft differed here); focused first

    def as_data(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "text": self.text,
            "state": self.state,
            "note": self.note,
            "lines": self.lines,
            "marked": self.marked,
        }


def session_key(name: str) -> str:
    """The workbench's widget key for `name`: random per browser session (stable across its reruns)."""
    return widget_key("wb", name)


def new_token() -> str:
    return secrets.token_hex(8)


def workbench(
    *,
    key: str,
    token: str,
    texts: dict[str, str],
    request: str,
    context: str,
    meta: str,
    text_title: str,
    text: str,
    items_title: str,
    items: list[Item],
    unsaved: bool = False,
    draft_state: str | None = None,
    active_ms: int = 0,
    message: dict[str, str] | None = None,
    shared_note: str = "",
    note_max: int = 2000,
    readonly: bool = False,
    response_keys: bool = False,
    on_work: Callable[[], None] | None = None,
    on_save: Callable[[], None] | None = None,
    on_go: Callable[[], None] | None = None,
) -> Any:
    """Mount the workbench; `on_work` runs after each decision, `on_save` on Ctrl+Enter (read `value(key)`).

    `readonly` shows the decisions without taking any (no keys decide, nothing is saved): final labels.
    `draft_state` is what the page says of the kept draft ("" for nothing); without it the workbench
    shows `texts["unsaved"]` while its decisions differ from what was saved. A `message` with
    `transient` set goes at the first key or decision. `response_keys`: J/K move to the next and the
    previous response (`on_go` runs, read `value(key, "go")["direction"]`), ↑/↓ between items.
    """
    data = {
        "token": token,
        "texts": {**_case_texts(), **texts},
        "request": request,
        "context": context,
        "meta": meta,
        "text_title": text_title,
        "text": text,
        "items_title": items_title,
        # The terms each criterion shares with the response, marked in the response while it has the focus.
        "items": [{**item.as_data(), "terms": list(key_terms(item.text, text))} for item in items],
        "unsaved": unsaved,
        "draft_state": draft_state,
        "active_ms": int(active_ms),
        "message": message,
        "note_max": note_max,
        "shared_note": shared_note,
        "readonly": bool(readonly),
        "response_keys": bool(response_keys),
    }
    return _component()(
        key=key,
        data=data,
        on_work_change=on_work or _nothing,
        on_save_change=on_save or _nothing,
        on_go_change=on_go or _nothing,
        height="content",
    )


def draft_state(kept_at: datetime | None) -> str:
    """What is true of a draft kept on the server: when, and that it is not submitted ("" when none is)."""
    return t("workbench.draft_kept", when=clock_time(kept_at)) if kept_at else ""


def _case_texts() -> dict[str, str]:
    return {key: t(f"workbench.{key}") for key in ("case", "case_hide", "case_show")}


#: The page's padding, smaller than Streamlit's default so the workbench gets the height and, at 1024 px
#: beside the sidebar, the width its controls need.
_COMPACT_STYLE = (
    "<style>.stMainBlockContainer { padding: 4rem 1.5rem 0.5rem; max-width: none; }"
    "@media (min-width: 1600px) { .stMainBlockContainer { padding-left: 3rem; padding-right: 3rem; } }</style>"
)


def compact_page() -> None:
    """Less blank space above the page's content, and the sidebar folded away on a narrow window (call once per
    run of a workbench page)."""
    st.html(_COMPACT_STYLE)
    fold_sidebar_when_narrow()


def value(key: str, name: str) -> dict[str, Any] | None:
    """What the workbench under `key` last sent as `name` ("work", "save" or "go"), or None."""
    state = st.session_state.get(key)
    if not state:
        return None
    sent = state.get(name)
    return sent if isinstance(sent, dict) else None


def sent_for(loaded: dict[str, Any] | None, name: str, event: str) -> dict[str, Any] | None:
    """What workbench `name` sent as `event` for the response the page has loaded (`loaded["token"]`), or None.

    A message carrying another token was sent for a response loaded before (a late callback after
    save-and-next or a reload) and is ignored, so it never lands on the response now shown.
    """
    if loaded is None:
        return None
    sent = value(session_key(name), event)
    return sent if sent and sent.get("token") == loaded["token"] else None


def _nothing() -> None:
    return None
