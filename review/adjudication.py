"""Adjudication on one screen: the response beside the disputed criteria, one key per decision.

Only responses the checker has taken into adjudication are listed and counted (db.access.independence): taking
checked responses in closes the checker's group's labels on them, so no figure here moves with a label the
checker can still change. Each disputed criterion shows the two groups' final labels as A and B (in an
order that does not tell the groups apart, decided in db/review). `1`/`0` decides a cell, `E` writes its own rationale,
`R` the rationale for every cell that has none of its own, and Ctrl+Enter saves: the decisions are
gold. Every rule (who may adjudicate, a rationale is required, someone else decided since) is
db/review's; a refusal is shown on the workbench and nothing is saved. Decisions and rationales are
kept as a server-side draft (db/review/drafts.py) until saved: a refresh loses nothing. Opening, drafts,
saves and messages are the workbench controller's (ui/workbench_controller.py).
"""

from __future__ import annotations

from datetime import datetime

import streamlit as st
from sqlmodel import Session

from db import labels, review
from db.access import users
from db.review import drafts
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError, StaleEdit
from db.store.models import User
from ui import shell, workbench as wb
from ui.checker import draft_note, met_text
from ui.shell import t
from ui.widgets import asker_text, show_error
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

PICK_KEY = "review_adj_pick"
TAKEN_KEY = "review_adj_taken"
TAKE_KEY = "review_adj_take"


def _signed_in(session: Session, username: str) -> User:
    """The signed-in checker as `session` reads them."""
    user = users.get_user(session, username=username)
    assert user is not None  # signed in this run, so the account exists
    return user


def _queue(username: str) -> list[review.AdjudicationQueueItem]:
    # Kept figures (db.counts): cheap enough to read on every run, so the queue is never stale.
    with shell.db_session(read_only=True) as session:
        return review.adjudication_queue(session, _signed_in(session, username))


def _ready(username: str) -> int:
    # The number only: the list is read when responses are taken in (db.review.take_into_adjudication).
    with shell.db_session(read_only=True) as session:
        return review.count_ready_for_adjudication(session, _signed_in(session, username))


def _take_in(user: User, ready: int) -> None:
    """How many checked responses the checker takes into adjudication (closing their group's labels on them)."""
    if not ready:
        st.caption(t("review.adjudication.none_ready"))
        return
    st.caption(t("review.adjudication.ready", n=f"{ready:,}"))
    how_many = st.number_input(
        t("review.adjudication.take_how_many"), min_value=1, max_value=ready, value=ready, step=1
    )
    if st.button(t("review.adjudication.take"), key=TAKE_KEY, type="primary", icon=":material/move_to_inbox:"):
        try:
            with shell.db_session() as session:
                taken = review.take_into_adjudication(session, user, limit=int(how_many))
        except ClinConsensusError as error:
            show_error(error)
            return
        st.session_state[TAKEN_KEY] = t("review.adjudication.taken", n=f"{taken:,}")
        st.rerun()


def _saved_states(view: review.AdjudicationView) -> tuple[dict[str, bool | None], dict[str, str]]:
    """What the workbench shows without a draft: each cell's saved decision and rationale, if any."""
    states = {cell.criterion_id: cell.decision.met if cell.decision else None for cell in view.cells}
    notes = {cell.criterion_id: (cell.decision.note or "") if cell.decision else "" for cell in view.cells}
    return states, notes


def _changes(loaded: Loaded, sent: Sent) -> list[review.AdjudicationInput]:
    """The decisions made or changed on the workbench; a cell's own rationale, else the shared one."""
    view: review.AdjudicationView = loaded["view"]
    decisions = sent.get("decisions") or {}
    notes = sent.get("notes") or {}
    shared = str(sent.get("shared_note") or "").strip()
    changes = []
    for cell in view.cells:
        met = decisions.get(cell.criterion_id)
        if met is None:
            continue
        rationale = str(notes.get(cell.criterion_id) or shared).strip()
        if cell.decision is not None and (cell.decision.met, cell.decision.note or "") == (met, rationale):
            continue
        changes.append(
            review.AdjudicationInput(cell.criterion_id, bool(met), rationale, loaded["seen"].get(cell.criterion_id))
        )
    return changes


class _AdjudicationWorkbench(WorkbenchController[int]):
    """The adjudicator's workbench: the disputed cells of one response, each decided into gold with a rationale."""

    name = "adjudication"
    prefix = "review_adj"

    def open(self, user: User, response_id: int) -> Opened:
        with shell.db_session(read_only=True) as session:
            view = review.adjudication_view(session, user, response_id)
            draft = drafts.adjudication_draft(session, user, view)
        unsaved = draft is not None and draft.differs_from(*_saved_states(view))
        state = {
            "view": view,
            "items": _items(view, draft),
            "shared_note": draft.shared_note if draft is not None else "",
            "unsaved": unsaved,
            # the revision of each decision as first seen: a save over someone else's newer one is refused
            "seen": {cell.criterion_id: cell.decision.lock_version if cell.decision else None for cell in view.cells},
        }
        draft_at = draft.at if unsaved and draft is not None else None
        # Cells someone saved since stay worth reading; a plain restore is said once.
        return Opened(state, draft_at, draft_note(draft, unsaved), transient=draft is not None and not draft.dropped)

    def keep(self, session: Session, user: User, loaded: Loaded, sent: Sent) -> datetime:
        return drafts.keep_adjudication_draft(
            session,
            user,
            loaded["response_id"],
            decisions=sent.get("decisions") or {},
            notes=sent.get("notes") or {},
            shared_note=str(sent.get("shared_note") or ""),
            seen=loaded["seen"],
        )

    def save(self, user: User, loaded: Loaded, sent: Sent) -> int | None:
        changes = _changes(loaded, sent)
        if not changes:
            self.say("error", t("review.adjudication.nothing"))
            return None
        missing = [change.criterion_id for change in changes if not change.rationale]
        if missing:
            # db/review refuses these too; here the checker is told which one and taken to it.
            self._missing_rationale(loaded["view"], missing)
            return None
        with shell.db_session() as session:
            return labels.save(session, user, "adjudication", loaded["response_id"], decisions=changes)

    def _missing_rationale(self, view: review.AdjudicationView, missing: list[str]) -> None:
        """Names the first decision without a rationale and sends the cursor to its rationale field."""
        cell = next(cell for cell in view.cells if cell.criterion_id == missing[0])
        text = t(
            "workbench.adj.rationale_missing",
            position=cell.position,
            criterion=cell.criterion_id,
            text=cell.text,
            n=len(missing),
        )
        self.say("error", text, focus=cell.criterion_id)

    def stale_text(self, stale: StaleEdit) -> str:
        return saved_since_text(stale, "review.adjudication.stale_you", "review.adjudication.stale_other")

    def saved(self, outcome: int, user: User, loaded: Loaded, sent: Sent) -> None:
        self.say("success", t("review.adjudication.saved", n=outcome, code=loaded["view"].code))
        self.reload()
        self.rerun_app()

    def content(self, loaded: Loaded) -> Content:
        view: review.AdjudicationView = loaded["view"]
        return Content(
            texts=_texts(),
            request=view.case.user_request,
            context=view.case.clinical_context,
            meta=t("workbench.adj.meta", case_id=view.case.case_id, user_role=asker_text(view.case.user_role)),
            text_title=t("workbench.response", code=view.code),
            text=view.response_text,
            items_title=t("review.adjudication.cells", n=view.n_open),
            items=loaded["items"],
            unsaved=loaded["unsaved"],
            shared_note=loaded["shared_note"],
        )


WORKBENCH = _AdjudicationWorkbench()


def _texts() -> dict[str, str]:
    return workbench_texts(
        "request",
        "context_toggle",
        "met",
        "not_met",
        "unjudged",
        "confirm_yes",
        "confirm_no",
        legend=t("workbench.legend_adjudication"),
        count=t("workbench.count_decided", judged="{judged}", total="{total}"),
        save=t("workbench.adj.save"),
        note_label=t("workbench.rationale_label"),
        note_hint=t("workbench.rationale_hint"),
        shared_note=t("workbench.shared_rationale"),
        shared_hint=t("workbench.shared_rationale_hint"),
    )


def _items(view: review.AdjudicationView, draft: drafts.CheckerDraft | None = None) -> list[wb.Item]:
    items = []
    for cell in view.cells:
        lines = [
            {"label": t("review.adjudication.label_a"), "value": met_text(cell.a.met), "note": cell.a.note or ""},
            {"label": t("review.adjudication.label_b"), "value": met_text(cell.b.met), "note": cell.b.note or ""},
        ]
        if cell.decision is not None:
            lines.append(
                {
                    "label": t("workbench.adj.decided"),
                    "value": f"{met_text(cell.decision.met)} · {person(cell.decision)}",
                    "note": "",
                }
            )
        state = cell.decision.met if cell.decision else None
        note = (cell.decision.note or "") if cell.decision else ""
        if draft is not None and cell.criterion_id in draft.decisions:
            state, note = draft.decisions[cell.criterion_id], draft.notes.get(cell.criterion_id, "")
        items.append(
            wb.Item(
                key=cell.criterion_id, title=str(cell.position), text=cell.text, state=state, note=note, lines=lines
            )
        )
    return items


@st.fragment
def _workbench(user: User, response_id: int) -> None:
    """The workbench alone reruns on each decision; a save reruns the whole page (picker, queue)."""
    WORKBENCH.show(user, response_id)


def render() -> None:
    user = shell.require_user(Role.checker)
    wb.compact_page()
    queue = _queue(user.username)
    names = {
        item.response_id: t(
            "review.adjudication.queue_item",
            code=item.code,
            case=item.case_id,
            n=item.n_unresolved,
            share=f"{item.agreement:.1%}",
        )
        for item in queue
    }
    ready = _ready(user.username)
    taken = st.session_state.pop(TAKEN_KEY, None)
    if taken:
        st.success(taken)
    # The response just saved stays picked (it may have left the queue) until another is chosen.
    working = st.session_state.get(PICK_KEY)
    if working is not None and working not in names and queue:
        st.session_state[PICK_KEY] = queue[0].response_id
    elif working in names:
        st.session_state[PICK_KEY] = working  # set again: the browser shows the label's new count after a save
    if not names:
        st.subheader(t("review.adjudication.title"))
        message = st.session_state.pop(WORKBENCH.message_key, None)
        if message:
            st.success(message["text"])
        st.info(t("review.adjudication.empty"))
        st.caption(t("review.adjudication.basis"))
        _take_in(user, ready)
        return
    # The picker takes what the take-in button, sized to its words, leaves: at 1024 px nothing is cut.
    with st.container(horizontal=True, vertical_alignment="center", gap="small", wrap=False):
        response_id = st.selectbox(
            t("review.adjudication.pick"),
            list(names),
            key=PICK_KEY,
            format_func=names.__getitem__,
            label_visibility="collapsed",
        )
        with st.popover(t("review.adjudication.take_panel", n=f"{ready:,}"), width="content"):
            _take_in(user, ready)
    # The sidebar's count on the same two bases (db.review.my_open_disagreements sums this queue's figures),
    # on a line of its own rather than squeezed into a column beside the picker.
    decisions = sum(item.n_unresolved for item in queue)
    st.caption(
        t("review.adjudication.intro", decisions=f"{decisions:,}", responses=f"{len(queue):,}"),
        help=t("review.adjudication.basis"),
    )
    _workbench(user, response_id)
