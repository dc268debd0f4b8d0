"""Adjudication on one screen: the response beside the disputed criteria, one key per decision.

Only responses the checker has taken into adjudication are listed and counted (db.access.independence): taking
checked responses in closes the checker's group's labels on them, so no figure here moves with a label the
checker can still change. Each disputed criterion shows the two groups' final labels as A and B (in an
order that does not tell the groups apart, decided in db/review). `1`/`0` decides a cell, `E` writes its own rationale,
`R` the rationale for every cell that has none of its own, and Ctrl+Enter saves: the decisions are
gold. Every rule (who may adjudicate, a rationale is required, someone else decided since) is
db/review's; a refusal is shown on the workbench and nothing is saved. Decisions and rationales are
kept as a server-side draft (db/review/drafts.py) until saved: a refresh loses nothing.
"""

from __future__ import annotations

import streamlit as st

from db import review
from db.access import users
from db.review import drafts
from db.rules.errors import ClinConsensusError, StaleEdit
from db.store.models import Role
from ui import shell, workbench as wb
from ui.checker import draft_note, met_text
from ui.shell import t
from ui.widgets import asker_text, error_text, plain, show_error

PICK_KEY = "review_adj_pick"
LOADED_KEY = "review_adj_loaded"
MESSAGE_KEY = "review_adj_message"
RERUN_KEY = "review_adj_rerun_app"
TAKEN_KEY = "review_adj_taken"
TAKE_KEY = "review_adj_take"


def _queue(username: str) -> list[review.AdjudicationQueueItem]:
    # Kept figures (db/counts/figures.py): cheap enough to read on every run, so the queue is never stale.
    with shell.db_session(read_only=True) as session:
        return review.adjudication_queue(session, users.get_user(session, username=username))


def _ready(username: str) -> list[int]:
    with shell.db_session(read_only=True) as session:
        return review.ready_for_adjudication(session, users.get_user(session, username=username))


def _take_in(user, ready: list[int]) -> None:
    """How many checked responses the checker takes into adjudication (closing their group's labels on them)."""
    if not ready:
        st.caption(t("review.adjudication.none_ready"))
        return
    st.caption(t("review.adjudication.ready", n=f"{len(ready):,}"))
    how_many = st.number_input(
        t("review.adjudication.take_how_many"), min_value=1, max_value=len(ready), value=len(ready), step=1
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


def _message(kind: str, text: str, focus: str | None = None, *, transient: bool = False) -> None:
    # "fresh": set by this run's action; a restored-draft note does not cover it. "focus": the criterion the
    # workbench opens the rationale of (the one a refusal is about).
    # "transient": a notice that has said what it had to once work resumes (the workbench drops it).
    st.session_state[MESSAGE_KEY] = {
        "id": wb.new_token(),
        "kind": kind,
        "text": text,
        "fresh": True,
        "focus": focus,
        "transient": transient,
    }


def _drop_transient_message() -> None:
    if (st.session_state.get(MESSAGE_KEY) or {}).get("transient"):
        st.session_state.pop(MESSAGE_KEY, None)


def _missing_rationale(view: review.AdjudicationView, missing: list[str]) -> None:
    """Names the first decision without a rationale and sends the cursor to its rationale field."""
    cell = next(cell for cell in view.cells if cell.criterion_id == missing[0])
    text = t(
        "workbench.adj.rationale_missing",
        position=cell.position,
        criterion=cell.criterion_id,
        text=cell.text,
        n=len(missing),
    )
    _message("error", text, focus=cell.criterion_id)


def _loaded(user, response_id: int) -> dict:
    """The response on screen, read once per token (not on every decision)."""
    loaded = st.session_state.get(LOADED_KEY)
    if loaded is not None and loaded["response_id"] == response_id:
        return loaded
    with shell.db_session(read_only=True) as session:
        view = review.adjudication_view(session, user, response_id)
        draft = drafts.adjudication_draft(session, user, view)
    unsaved = draft is not None and draft.differs_from(*_saved_states(view))
    loaded = {
        "response_id": response_id,
        "token": wb.new_token(),
        "view": view,
        "items": _items(view, draft),
        "shared_note": draft.shared_note if draft is not None else "",
        "unsaved": unsaved,
        # When the draft shown was kept (None: what is shown is what was saved).
        "draft_at": draft.at if unsaved and draft is not None else None,
        # the revision of each decision as first seen: a save over someone else's newer one is refused
        "seen": {cell.criterion_id: cell.decision.lock_version if cell.decision else None for cell in view.cells},
    }
    st.session_state[LOADED_KEY] = loaded
    note = draft_note(draft, unsaved)
    if note and not (st.session_state.get(MESSAGE_KEY) or {}).get("fresh"):
        # Cells someone saved since stay worth reading; a plain restore is said once.
        _message("info", note, transient=draft is not None and not draft.dropped)
    return loaded


def _saved_states(view: review.AdjudicationView) -> tuple[dict[str, bool | None], dict[str, str]]:
    """What the workbench shows without a draft: each cell's saved decision and rationale, if any."""
    states = {cell.criterion_id: cell.decision.met if cell.decision else None for cell in view.cells}
    notes = {cell.criterion_id: (cell.decision.note or "") if cell.decision else "" for cell in view.cells}
    return states, notes


def _changes(loaded: dict, sent: dict) -> list[review.AdjudicationInput]:
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


def _keep_draft() -> None:
    user = shell.current_user()
    loaded = st.session_state.get(LOADED_KEY)
    sent = wb.sent_for(loaded, "adjudication", "work")
    if user is None or loaded is None or sent is None:
        return
    try:
        with shell.db_session() as session:
            loaded["draft_at"] = drafts.keep_adjudication_draft(
                session,
                user,
                loaded["response_id"],
                decisions=sent.get("decisions") or {},
                notes=sent.get("notes") or {},
                shared_note=str(sent.get("shared_note") or ""),
                seen=loaded["seen"],
            )
    except ClinConsensusError as error:
        _message("error", t("workbench.draft_failed", reason=plain(error)))
    else:
        _drop_transient_message()


def _save() -> None:
    user = shell.current_user()
    loaded = st.session_state.get(LOADED_KEY)
    sent = wb.sent_for(loaded, "adjudication", "save")
    if user is None or loaded is None or sent is None:
        return
    changes = _changes(loaded, sent)
    if not changes:
        _message("error", t("review.adjudication.nothing"))
        return
    missing = [change.criterion_id for change in changes if not change.rationale]
    if missing:
        # db/review refuses these too; here the checker is told which one and taken to it.
        _missing_rationale(loaded["view"], missing)
        return
    code = loaded["view"].code
    try:
        with shell.db_session() as session:
            saved = review.adjudicate_many(session, user, response_id=loaded["response_id"], decisions=changes)
            drafts.discard_adjudication_draft(session, user, loaded["response_id"])
    except StaleEdit as stale:
        current = stale.current
        if isinstance(stale, review.SavedSince) and isinstance(current, review.LabelView):
            key = "review.adjudication.stale_you" if stale.by_self else "review.adjudication.stale_other"
            _message("error", t(key, criterion=current.criterion_id, value=met_text(current.met)))
        else:
            _message("error", t("review.stale_generic"))
        st.session_state.pop(LOADED_KEY, None)
        return
    except ClinConsensusError as error:
        _message("error", error_text(error, markdown=False))
        return
    _message("success", t("review.adjudication.saved", n=saved, code=code))
    st.session_state.pop(LOADED_KEY, None)
    st.session_state[RERUN_KEY] = loaded["response_id"]


def _texts() -> dict[str, str]:
    keys = ("request", "context_toggle", "met", "not_met", "unjudged", "confirm_yes", "confirm_no")
    texts = {key: t(f"workbench.{key}") for key in keys}
    texts.update(
        legend=t("workbench.legend_adjudication"),
        count=t("workbench.count_decided", judged="{judged}", total="{total}"),
        save=t("workbench.adj.save"),
        note_label=t("workbench.rationale_label"),
        note_hint=t("workbench.rationale_hint"),
        shared_note=t("workbench.shared_rationale"),
        shared_hint=t("workbench.shared_rationale_hint"),
    )
    return texts


def _person(label: review.LabelView) -> str:
    """Who decided, by name (the username when it is their only name)."""
    return label.user_name or label.user or "—"


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
                    "value": f"{met_text(cell.decision.met)} · {_person(cell.decision)}",
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
def _workbench(user, response_id: int) -> None:
    if st.session_state.pop(RERUN_KEY, None) is not None:
        st.rerun(scope="app")
    try:
        loaded = _loaded(user, response_id)
    except ClinConsensusError as error:
        show_error(error)
        return
    view: review.AdjudicationView = loaded["view"]
    wb.workbench(
        key=wb.session_key("adjudication"),
        token=loaded["token"],
        texts=_texts(),
        request=view.case.user_request,
        context=view.case.clinical_context,
        meta=t("workbench.adj.meta", case_id=view.case.case_id, user_role=asker_text(view.case.user_role)),
        text_title=t("workbench.response", code=view.code),
        text=view.response_text,
        items_title=t("review.adjudication.cells", n=view.n_open),
        items=loaded["items"],
        unsaved=loaded["unsaved"],
        draft_state=wb.draft_state(loaded["draft_at"]),
        shared_note=loaded["shared_note"],
        message=st.session_state.get(MESSAGE_KEY),
        on_work=_keep_draft,
        on_save=_save,
    )
    message = st.session_state.get(MESSAGE_KEY)
    if message:
        message["fresh"] = False


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
        message = st.session_state.pop(MESSAGE_KEY, None)
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
            format_func=names.get,
            label_visibility="collapsed",
        )
        with st.popover(t("review.adjudication.take_panel", n=f"{len(ready):,}"), width="content"):
            _take_in(user, ready)
    # The sidebar's count on the same two bases (db.review.my_open_disagreements sums this queue's figures),
    # on a line of its own rather than squeezed into a column beside the picker.
    decisions = sum(item.n_unresolved for item in queue)
    st.caption(
        t("review.adjudication.intro", decisions=f"{decisions:,}", responses=f"{len(queue):,}"),
        help=t("review.adjudication.basis"),
    )
    _workbench(user, response_id)
