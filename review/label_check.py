"""Label check within the checker's group: confirm or correct an annotator's labels, with a note.

Every decision and note is kept as a server-side draft (db/review/drafts.py) until Ctrl+Enter saves
it, so a refresh loses nothing and a reopened response shows its draft and when it was kept, not submitted.
Opening, drafts, saves and messages are the workbench controller's (ui/workbench_controller.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import streamlit as st
from sqlmodel import Session

from db import labels, review
from db.review import drafts
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError, StaleEdit
from db.store.models import User
from ui import shell, workbench as wb
from ui.checker import draft_note, met_text
from ui.shell import t
from ui.widgets import asker_text, error_text, plain, progress_bar
from ui.workbench_controller import (
    Content,
    Loaded,
    Opened,
    Sent,
    WorkbenchController,
    person,
    saved_since_text,
    workbench_texts,
)

MODES = (review.CHECK_ALL, review.CHECK_SAMPLE, review.CHECK_JUDGE)
PICK_KEY = "review_check_pick"
#: The response ids of the queue's window the picker shows, in queue order (save-and-next and J/K move in it).
WINDOW_KEY = "review_check_window"
PICKER_BEFORE, PICKER_AFTER = 20, 300


def _choose_queue(user: User) -> review.CheckQueueWindow | None:
    with shell.db_session(read_only=True) as session:
        annotators = review.check_annotators(session, user)
        judges = review.judge_names(session)
    if not annotators:
        st.info(t("review.check.no_annotators"))
        return None
    names = {a.user_id: t("review.check.annotator_item", name=a.display_name, n=a.n_responses) for a in annotators}
    left, right = st.columns([2, 3])
    annotator_id = left.selectbox(
        t("review.check.annotator"), list(names), key="review_check_annotator", format_func=names.__getitem__
    )
    modes = {m: t(f"review.check.mode.{m}") for m in (MODES if judges else MODES[:2])}
    mode = right.radio(
        t("review.check.mode"), list(modes), format_func=modes.get, horizontal=True, key="review_check_mode"
    )
    options: dict[str, Any] = {}
    if mode == review.CHECK_SAMPLE:
        a, b, _ = st.columns([1, 1, 3])
        options["percent"] = a.number_input(
            t("review.check.percent"), min_value=1, max_value=100, value=10, step=1, key="review_check_percent"
        )
        options["seed"] = b.number_input(t("review.check.seed"), min_value=0, value=1, step=1, key="review_check_seed")
        # Unchecked work is provisional gold: it counts in no published figure until checked (docs/REFERENCE.md §4).
        st.caption(t("gold_basis.check.sample_note"))
    elif mode == review.CHECK_JUDGE:
        options["judge"] = st.selectbox(t("review.check.judge"), judges, key="review_check_judge", format_func=plain)
    if not judges:
        st.caption(t("review.check.no_judges"))
    with shell.db_session(read_only=True) as session:
        return review.check_queue_window(
            session,
            user,
            annotator_id=annotator_id,
            mode=mode,
            around=st.session_state.get(PICK_KEY),
            before=PICKER_BEFORE,
            after=PICKER_AFTER,
            **options,
        )


def _queue_label(item: review.CheckQueueItem) -> str:
    text = t("review.check.queue_item", code=item.code, case=item.case_id, checked=item.n_checked, n=item.n_labels)
    if item.judge_disagreement is not None:
        text += " · " + t("review.check.judge_share", share=f"{item.judge_disagreement:.1%}")
    return text


def _pick(window: review.CheckQueueWindow) -> int:
    """The picker shows a window of the queue around the chosen response: an annotator's queue holds
    thousands of responses, and reading and sending them all on every run cost more than the rest of the page."""
    by_id = {item.response_id: item for item in window.items}
    if st.session_state.get(PICK_KEY) not in by_id:
        st.session_state[PICK_KEY] = window.items[
            min(window.position - window.offset, len(window.items) - 1)
        ].response_id
    labels = {rid: _queue_label(item) for rid, item in by_id.items()}  # in this run's language
    return st.selectbox(
        t("review.check.pick"), list(by_id), key=PICK_KEY, format_func=labels.__getitem__, label_visibility="collapsed"
    )


def _checkable(view: review.CheckView) -> list[review.CheckRow]:
    """Rows with an annotation the checker did not make themselves."""
    return [row for row in view.rows if row.annotation is not None and not row.own]


class _CheckWorkbench(WorkbenchController[int]):
    """The checker's workbench: an annotator's labels of one response, each confirmed or corrected."""

    name = "check"
    prefix = "review_check"
    response_keys = True

    def open(self, user: User, response_id: int) -> Opened:
        with shell.db_session(read_only=True) as session:
            view = review.check_view(session, user, response_id)
            draft = drafts.check_draft(session, user, view)
        unsaved = draft is not None and draft.differs_from(*_saved_states(view))
        state = {
            "view": view,
            "items": _items(view, draft),
            "unsaved": unsaved,
            # The revision the checker first saw: a save by someone else since then is refused, not overwritten.
            "seen": {row.criterion_id: row.check.lock_version if row.check is not None else None for row in view.rows},
        }
        draft_at = draft.at if unsaved and draft is not None else None
        # Cells someone saved since stay worth reading; a plain restore is said once.
        return Opened(state, draft_at, draft_note(draft, unsaved), transient=draft is not None and not draft.dropped)

    def keep(self, session: Session, user: User, loaded: Loaded, sent: Sent) -> datetime:
        checkable = {row.criterion_id for row in _checkable(loaded["view"])}
        return drafts.keep_check_draft(
            session,
            user,
            loaded["response_id"],
            decisions={cid: v for cid, v in (sent.get("decisions") or {}).items() if cid in checkable},
            notes={cid: v for cid, v in (sent.get("notes") or {}).items() if cid in checkable},
            seen={cid: v for cid, v in loaded["seen"].items() if cid in checkable},
        )

    def save(self, user: User, loaded: Loaded, sent: Sent) -> int:
        view: review.CheckView = loaded["view"]
        decided = sent.get("decisions") or {}
        notes = sent.get("notes") or {}
        decisions = [
            review.CheckInput(
                row.criterion_id,
                bool(decided[row.criterion_id]),
                notes.get(row.criterion_id) or "",
                loaded["seen"].get(row.criterion_id),
            )
            for row in _checkable(view)
            if decided.get(row.criterion_id) is not None
        ]
        with shell.db_session() as session:
            return labels.save(session, user, "check", view.response_id, decisions=decisions)

    def refused(self, error: ClinConsensusError, user: User, loaded: Loaded, sent: Sent) -> None:
        """A refusal in words; one about a criterion (a correction without its note) names it and goes there."""
        if isinstance(error, StaleEdit):
            super().refused(error, user, loaded, sent)  # the newer value is shown; the next save starts from it
            return
        view: review.CheckView = loaded["view"]
        criterion = error.params.get("criterion")
        row = next((row for row in view.rows if row.criterion_id == criterion), None)
        if error.key == "errors.note_required_criterion" and row is not None:
            text = t("workbench.check.note_needed", position=row.position, criterion=row.criterion_id, text=row.text)
            self.say("error", text, focus=row.criterion_id)
        else:
            self.say("error", error_text(error, markdown=False))

    def stale_text(self, stale: StaleEdit) -> str:
        return saved_since_text(stale, "review.check.stale_you", "review.check.stale_member")

    def saved(self, outcome: int, user: User, loaded: Loaded, sent: Sent) -> None:
        """Say what was saved (a re-save with nothing changed since the last save: "unchanged"), open the next."""
        view: review.CheckView = loaded["view"]
        code = plain(view.code)
        said = t("review.check.saved", n=outcome, code=code) if outcome else t("review.check.unchanged", code=code)
        following = _neighbour(view.response_id, 1)
        if following is None:
            said = f"{said} {t('review.check.queue_end')}"
        self.say("success" if outcome else "info", said)
        # Set even when it stays, so the browser shows the picker's new label ("已审核 30/30").
        st.session_state[PICK_KEY] = following if following is not None else view.response_id
        self.reload()
        self.rerun_app()

    def go(self, user: User, loaded: Loaded, direction: int) -> None:
        target = _neighbour(loaded["response_id"], direction)
        if target is None:
            self.say("info", t("review.check.queue_end" if direction > 0 else "review.check.queue_start"))
            return
        st.session_state[PICK_KEY] = target
        self.rerun_app()

    def content(self, loaded: Loaded) -> Content:
        view: review.CheckView = loaded["view"]
        items = loaded["items"]
        return Content(
            texts=_texts(),
            request=view.case.user_request,
            context=view.case.clinical_context,
            meta=t("workbench.adj.meta", case_id=view.case.case_id, user_role=asker_text(view.case.user_role)),
            text_title=t("workbench.response", code=view.code),
            text=view.response_text,
            items_title=t("workbench.check.items", n=len(items), group=view.group_no),
            items=items,
            unsaved=loaded["unsaved"],
        )


WORKBENCH = _CheckWorkbench()


def _texts() -> dict[str, str]:
    return workbench_texts(
        "request",
        "context_toggle",
        "met",
        "not_met",
        "unjudged",
        "confirm_yes",
        "confirm_no",
        "note_hint",
        legend=t("workbench.legend_check"),
        count=t("workbench.count", judged="{judged}", total="{total}"),
        save=t("workbench.check.save"),
        note_label=t("workbench.note_label"),
    )


def _saved_states(view: review.CheckView) -> tuple[dict[str, bool | None], dict[str, str]]:
    """What the workbench shows without a draft: the check where there is one, else the annotation."""
    states: dict[str, bool | None] = {}
    notes: dict[str, str] = {}
    for row in _checkable(view):
        assert row.annotation is not None  # _checkable keeps annotated rows only
        states[row.criterion_id] = row.check.met if row.check is not None else row.annotation.met
        notes[row.criterion_id] = (row.check.note or "") if row.check is not None else ""
    return states, notes


def _items(view: review.CheckView, draft: drafts.CheckerDraft | None = None) -> list[wb.Item]:
    items = []
    for row in _checkable(view):
        annotation = row.annotation
        assert annotation is not None  # _checkable keeps annotated rows only
        lines = [
            {
                "label": t("workbench.check.annotator", name=person(annotation)),
                "value": met_text(annotation.met),
                "note": annotation.note or "",
            }
        ]
        if row.check is not None:
            lines.append(
                {
                    "label": t("workbench.check.checked", name=person(row.check)),
                    "value": met_text(row.check.met),
                    "note": "",
                }
            )
        # The checker confirms by default what is there (their check, else the annotation); 1/0 corrects.
        current: bool | None = row.check.met if row.check is not None else annotation.met
        note = (row.check.note or "") if row.check is not None else ""
        if draft is not None and row.criterion_id in draft.decisions:
            current = draft.decisions[row.criterion_id]
            note = draft.notes.get(row.criterion_id, "")
        items.append(wb.Item(row.criterion_id, str(row.position), row.text, current, note, lines))
    return items


def _neighbour(response_id: int, step: int) -> int | None:
    """The response `step` places from `response_id` in the queue's window the picker shows, or None."""
    ids: list[int] = st.session_state.get(WINDOW_KEY) or []
    if response_id not in ids:
        return None
    at = ids.index(response_id) + step
    return ids[at] if 0 <= at < len(ids) else None


@st.fragment
def _workbench(user: User, response_id: int) -> None:
    """The workbench alone reruns on each decision; a save reruns the whole page (picker, progress)."""
    WORKBENCH.show(user, response_id)


def render() -> None:
    user = shell.require_user(Role.checker)
    wb.compact_page()
    window = _choose_queue(user)
    if window is None:
        return
    if not window.items:
        st.info(t("review.check.empty"))
        return
    st.session_state[WINDOW_KEY] = [item.response_id for item in window.items]
    pick, progress = st.columns([6, 3], vertical_alignment="center")
    with pick:
        response_id = _pick(window)
    with progress:
        progress_bar(window.checked, window.total, label_key="review.check.progress")
    _workbench(user, response_id)
