"""What the three workbench pages share: labeling, label check and adjudication (the decision workbench's controller).

Each of these pages shows one response at a time on the decision workbench (ui/workbench.py) and does
the same things with it: reads it once per token, not on every decision; keeps every decision the
workbench sends as a server-side draft; saves on Ctrl+Enter; says a refusal on the workbench (a stale
edit reads the saved labels again); and after a save reruns the whole page, so the picker and the
sidebar follow. `WorkbenchController` holds all of that. A page subclasses it and names only what
differs: how it opens, keeps and saves a response (its db functions), what a refusal and a save say,
and what the workbench shows (its texts and items).

A page keeps three entries in session state under its prefix: `<prefix>_loaded` (the response on
screen: `response_id`, `token`, `draft_at` and what the page reads), `<prefix>_message` (what the
workbench says) and `<prefix>_rerun_app` (a save asks the next run of the fragment for the whole page).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

import streamlit as st
from sqlmodel import Session

from db.label_rows.refusals import SavedSince
from db.label_rows.view import LabelView
from db.rules.errors import ClinConsensusError, StaleEdit, ValidationFailed
from db.rules.notes import MAX_NOTE_CHARS
from db.store.models import User
from ui import shell, workbench as wb
from ui.checker import met_text
from ui.widgets import error_text, plain, show_error

#: The response on screen, as the page keeps it in session state.
Loaded = dict[str, Any]
#: What the workbench sent with a decision or a save: `token`, `decisions`, `notes`, `active_ms`, ….
Sent = dict[str, Any]
#: What a page's save returns when it saved.
Outcome = TypeVar("Outcome")


@dataclass
class Opened:
    """A response read for the workbench: what the page keeps of it, and what to say about its draft."""

    state: dict[str, Any]  # the page's own entries of the loaded response
    draft_at: datetime | None = None  # when the draft shown was kept (None: what is shown is what was saved)
    notice: str | None = None  # said (as info) unless this run's action has said something already
    transient: bool = False  # the notice has said what it had to once work resumes


@dataclass
class Content:
    """What the workbench shows of the loaded response (the arguments of ui.workbench.workbench)."""

    texts: dict[str, str]
    request: str
    context: str
    meta: str
    text_title: str
    text: str
    items_title: str
    items: list[wb.Item] = field(default_factory=list)
    unsaved: bool = False
    active_ms: int = 0
    shared_note: str = ""
    note_max: int = MAX_NOTE_CHARS  # the longest note, comment or rationale anyone may save
    readonly: bool = False
    notice: str | None = None  # a line shown above the workbench


def workbench_texts(*names: str, **texts: str) -> dict[str, str]:
    """The workbench's texts: each of `names` from its catalog entry `workbench.<name>`, then `texts` as given."""
    return {**{name: shell.t(f"workbench.{name}") for name in names}, **texts}


def person(label: LabelView) -> str:
    """Who made a label, by name as the pickers name them (the username when it is their only name)."""
    return label.user_name or label.user or "—"


def saved_since_text(stale: StaleEdit, you_key: str, other_key: str) -> str:
    """A refused checker's save in words: who saved the label in between ("you, in another tab" or someone
    else, never a name) and what they saved; a generic line when the refusal does not say."""
    current = stale.current
    if isinstance(stale, SavedSince) and isinstance(current, LabelView):
        key = you_key if stale.by_self else other_key
        return shell.t(key, criterion=current.criterion_id, value=met_text(current.met))
    return shell.t("review.stale_generic")


class WorkbenchController(ABC, Generic[Outcome]):
    """One workbench page's controller: a subclass sets `name` and `prefix` and names its db work and texts."""

    #: The workbench's name (its widget key, random per browser session, is made from it).
    name: str
    #: The prefix of the page's session-state entries.
    prefix: str
    #: A catalog entry said (as info) instead of the refusal when the response cannot be opened yet.
    waiting: str | None = None
    #: J/K move between the responses of the page's queue (the page names `go`), ↑/↓ between items.
    response_keys: bool = False

    @property
    def loaded_key(self) -> str:
        return f"{self.prefix}_loaded"

    @property
    def message_key(self) -> str:
        return f"{self.prefix}_message"

    @property
    def rerun_key(self) -> str:
        return f"{self.prefix}_rerun_app"

    # What a page names ------------------------------------------------------------------------------

    @abstractmethod
    def open(self, user: User, response_id: int) -> Opened:
        """Read the response for the workbench (refusals raise ClinConsensusError)."""

    @abstractmethod
    def keep(self, session: Session, user: User, loaded: Loaded, sent: Sent) -> datetime:
        """Keep what the workbench sent as the draft of the loaded response; returns when it was kept."""

    @abstractmethod
    def save(self, user: User, loaded: Loaded, sent: Sent) -> Outcome | None:
        """Save what the workbench sent; None when nothing was sent to the database (the page said why)."""

    @abstractmethod
    def saved(self, outcome: Outcome, user: User, loaded: Loaded, sent: Sent) -> None:
        """Say what was saved and move on."""

    @abstractmethod
    def content(self, loaded: Loaded) -> Content:
        """What the workbench shows of the loaded response."""

    def go(self, user: User, loaded: Loaded, direction: int) -> None:
        """J (1) or K (-1): open the next or the previous response of the queue (pages with `response_keys`)."""

    def refused(self, error: ClinConsensusError, user: User, loaded: Loaded, sent: Sent) -> None:
        """A refused save: its reason; a stale edit also reads the saved labels again (the next save starts there)."""
        if isinstance(error, StaleEdit):
            self.say("error", self.stale_text(error))
            self.reload()
        else:
            self.say("error", error_text(error, markdown=False))

    def stale_text(self, stale: StaleEdit) -> str:
        """A refusal because someone saved in between, in words."""
        return error_text(stale, markdown=False)

    def draft_refused(self, error: ClinConsensusError) -> None:
        """A draft that could not be kept (the decisions stay on the workbench)."""
        self.say("error", shell.t("workbench.draft_failed", reason=plain(error)))

    # Messages and state -----------------------------------------------------------------------------

    def say(self, kind: str, text: str, focus: str | None = None, *, transient: bool = False) -> None:
        """Leave a message on the workbench.

        "fresh": set by this run's action, so a restored-draft notice does not cover it. "focus": the item
        whose note the workbench opens (the one a refusal is about). "transient": a notice that has said
        what it had to once work resumes (the workbench drops it at the first key or decision).
        """
        st.session_state[self.message_key] = {
            "id": wb.new_token(),
            "kind": kind,
            "text": text,
            "fresh": True,
            "focus": focus,
            "transient": transient,
        }

    def drop_transient_message(self) -> None:
        if (st.session_state.get(self.message_key) or {}).get("transient"):
            st.session_state.pop(self.message_key, None)

    def reload(self) -> None:
        """Read the response again at the next run (with a new token, which the workbench takes as a new load)."""
        st.session_state.pop(self.loaded_key, None)

    def rerun_app(self) -> None:
        """Have the next run of the workbench's fragment rerun the whole page (the picker and the sidebar follow)."""
        st.session_state[self.rerun_key] = True

    def loaded(self, user: User, response_id: int) -> Loaded:
        """The response on screen: opened once per token, not on every decision."""
        loaded: Loaded | None = st.session_state.get(self.loaded_key)
        if loaded is not None and loaded["response_id"] == response_id:
            return loaded
        opened = self.open(user, response_id)
        loaded = {"response_id": response_id, "token": wb.new_token(), **opened.state, "draft_at": opened.draft_at}
        st.session_state[self.loaded_key] = loaded
        if opened.notice and not (st.session_state.get(self.message_key) or {}).get("fresh"):
            self.say("info", opened.notice, transient=opened.transient)
        return loaded

    # The workbench's callbacks and the fragment's body ----------------------------------------------

    def _callback_input(self, event: str) -> tuple[User, Loaded, Sent] | None:
        """Who acted, the response loaded and what the workbench sent for it as `event` (None: nothing to do)."""
        user = shell.current_user()
        loaded = st.session_state.get(self.loaded_key)
        sent = wb.sent_for(loaded, self.name, event)
        if user is None or loaded is None or sent is None:
            return None
        return user, loaded, sent

    def keep_draft(self) -> None:
        """After each decision: keep what the workbench sent as the loaded response's draft."""
        taken = self._callback_input("work")
        if taken is None:
            return
        user, loaded, sent = taken
        try:
            with shell.db_session() as session:
                loaded["draft_at"] = self.keep(session, user, loaded, sent)
        except ClinConsensusError as error:
            self.draft_refused(error)
        else:
            self.drop_transient_message()

    def save_sent(self) -> None:
        """On Ctrl+Enter: save what the workbench sent for the loaded response."""
        taken = self._callback_input("save")
        if taken is None:
            return
        user, loaded, sent = taken
        try:
            outcome = self.save(user, loaded, sent)
        except ClinConsensusError as error:
            self.refused(error, user, loaded, sent)
            return
        if outcome is not None:
            self.saved(outcome, user, loaded, sent)

    def go_sent(self) -> None:
        """On J or K: move to the next or the previous response (what was decided is kept as a draft already)."""
        taken = self._callback_input("go")
        if taken is None:
            return
        user, loaded, sent = taken
        direction = sent.get("direction")
        if direction in (1, -1):
            self.go(user, loaded, direction)

    def show(self, user: User, response_id: int) -> None:
        """The workbench on response `response_id`; call it from the page's fragment, which reruns alone on
        each decision (a save reruns the whole page)."""
        if st.session_state.pop(self.rerun_key, None):
            st.rerun(scope="app")
        try:
            loaded = self.loaded(user, response_id)
        except ClinConsensusError as error:
            if self.waiting is not None and isinstance(error, ValidationFailed):
                st.info(shell.t(self.waiting))
            else:
                show_error(error)
            return
        content = self.content(loaded)
        if content.notice:
            st.info(content.notice)
        wb.workbench(
            key=wb.session_key(self.name),
            token=loaded["token"],
            texts=content.texts,
            request=content.request,
            context=content.context,
            meta=content.meta,
            text_title=content.text_title,
            text=content.text,
            items_title=content.items_title,
            items=content.items,
            unsaved=content.unsaved,
            draft_state=wb.draft_state(loaded["draft_at"]),
            active_ms=content.active_ms,
            message=st.session_state.get(self.message_key),
            shared_note=content.shared_note,
            note_max=content.note_max,
            readonly=content.readonly,
            response_keys=self.response_keys,
            on_work=self.keep_draft,
            on_save=self.save_sent,
            on_go=self.go_sent,
        )
        message = st.session_state.get(self.message_key)
        if message:
            message["fresh"] = False
