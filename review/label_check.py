"""Label check within the checker's group: confirm or correct an annotator's labels, with a note.

Every decision and note is kept as a server-side draft (db/review/drafts.py) until Ctrl+Enter saves
it, so a refresh loses nothing and a reopened response shows its draft and when it was kept, not submitted.
"""

from __future__ import annotations

import streamlit as st

from db import review
from db.review import drafts
from db.rules.errors import ClinConsensusError, StaleEdit
from db.store.models import Role
from ui import shell, workbench as wb
from ui.checker import draft_note, met_text
from ui.shell import t
from ui.widgets import asker_text, error_text, plain, progress_bar, show_error

MODES = (review.CHECK_ALL, review.CHECK_SAMPLE, review.CHECK_JUDGE)
PICK_KEY = "review_check_pick"
PICKER_BEFORE, PICKER_AFTER = 20, 300


def _choose_queue(user) -> review.CheckQueueWindow | None:
    with shell.db_session(read_only=True) as session:
        annotators = review.check_annotators(session, user)
        judges = review.judge_names(session)
    if not annotators:
        st.info(t("review.check.no_annotators"))
        return None
    names = {a.user_id: t("review.check.annotator_item", name=a.display_name, n=a.n_responses) for a in annotators}
    left, right = st.columns([2, 3])
    annotator_id = left.selectbox(
        t("review.check.annotator"), list(names), key="review_check_annotator", format_func=names.get
    )
    modes = {m: t(f"review.check.mode.{m}") for m in (MODES if judges else MODES[:2])}
    mode = right.radio(
        t("review.check.mode"), list(modes), format_func=modes.get, horizontal=True, key="review_check_mode"
    )
    options = {}
    if mode == review.CHECK_SAMPLE:
        a, b, _ = st.columns([1, 1, 3])
        options["percent"] = a.number_input(
            t("review.check.percent"), min_value=1, max_value=100, value=10, step=1, key="review_check_percent"
        )
        options["seed"] = b.number_input(t("review.check.seed"), min_value=0, value=1, step=1, key="review_check_seed")
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


LOADED_KEY = "review_check_loaded"
MESSAGE_KEY = "review_check_message"
RERUN_KEY = "review_check_rerun_app"


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
        t("review.check.pick"), list(by_id), key=PICK_KEY, format_func=labels.get, label_visibility="collapsed"
    )


def _message(kind: str, text: str, focus: str | None = None, *, transient: bool = False) -> None:
    # "fresh": set by this run's action; a restored-draft note does not cover it. "focus": the criterion the
    # workbench opens the note of (the one a refusal is about).
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


def _refusal(error: ClinConsensusError, view: review.CheckView) -> None:
    """A refusal in words; one about a criterion (a correction without its note) names it and goes there."""
    criterion = error.params.get("criterion")
    row = next((row for row in view.rows if row.criterion_id == criterion), None)
    if error.key == "errors.note_required_criterion" and row is not None:
        text = t("workbench.check.note_needed", position=row.position, criterion=row.criterion_id, text=row.text)
        _message("error", text, focus=row.criterion_id)
    else:
        _message("error", error_text(error, markdown=False))


def _loaded(user, response_id: int) -> dict:
    """The response on screen, read once per token (not on every decision)."""
    loaded = st.session_state.get(LOADED_KEY)
    if loaded is not None and loaded["response_id"] == response_id:
        return loaded
    with shell.db_session(read_only=True) as session:
        view = review.check_view(session, user, response_id)
        draft = drafts.check_draft(session, user, view)
    items = _items(view, draft)
    unsaved = draft is not None and draft.differs_from(*_saved_states(view))
    loaded = {
        "response_id": response_id,
        "token": wb.new_token(),
        "view": view,
        "items": items,
        "unsaved": unsaved,
        # When the draft shown was kept (None: what is shown is what was saved).
        "draft_at": draft.at if unsaved and draft is not None else None,
        # The revision the checker first saw: a save by someone else since then is refused, not overwritten.
        "seen": {row.criterion_id: row.check.lock_version if row.check is not None else None for row in view.rows},
    }
    st.session_state[LOADED_KEY] = loaded
    note = draft_note(draft, unsaved)
    if note and not (st.session_state.get(MESSAGE_KEY) or {}).get("fresh"):
        # Cells someone saved since stay worth reading; a plain restore is said once.
        _message("info", note, transient=draft is not None and not draft.dropped)
    return loaded


def _checkable(view: review.CheckView) -> list[review.CheckRow]:
    """Rows with an annotation the checker did not make themselves."""
    return [row for row in view.rows if row.annotation is not None and not row.own]


def _stale_text(stale: StaleEdit) -> str:
    current = stale.current
    if isinstance(stale, review.SavedSince) and isinstance(current, review.LabelView):
        # Who saved in between, as "you, in another tab" or another member: never a name.
        key = "review.check.stale_you" if stale.by_self else "review.check.stale_member"
        return t(key, criterion=current.criterion_id, value=met_text(current.met))
    return t("review.stale_generic")


def _keep_draft() -> None:
    user = shell.current_user()
    loaded = st.session_state.get(LOADED_KEY)
    sent = wb.sent_for(loaded, "check", "work")
    if user is None or loaded is None or sent is None:
        return
    checkable = {row.criterion_id for row in _checkable(loaded["view"])}
    try:
        with shell.db_session() as session:
            loaded["draft_at"] = drafts.keep_check_draft(
                session,
                user,
                loaded["response_id"],
                decisions={cid: v for cid, v in (sent.get("decisions") or {}).items() if cid in checkable},
                notes={cid: v for cid, v in (sent.get("notes") or {}).items() if cid in checkable},
                seen={cid: v for cid, v in loaded["seen"].items() if cid in checkable},
            )
    except ClinConsensusError as error:
        _message("error", t("workbench.draft_failed", reason=plain(error)))
    else:
        _drop_transient_message()


def _save() -> None:
    user = shell.current_user()
    loaded = st.session_state.get(LOADED_KEY)
    sent = wb.sent_for(loaded, "check", "save")
    if user is None or loaded is None or sent is None:
        return
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
    try:
        with shell.db_session() as session:
            written = review.save_checks(session, user, response_id=view.response_id, decisions=decisions)
            drafts.discard_check_draft(session, user, view.response_id)
    except StaleEdit as stale:
        _message("error", _stale_text(stale))
        st.session_state.pop(LOADED_KEY, None)  # the newer value is shown; the next save starts from it
        return
    except ClinConsensusError as error:
        _refusal(error, view)
        return
    _message("success", t("review.check.saved", n=written, code=view.code))
    # Set again so the browser shows the picker's new label ("已审核 30/30"), not the one it last drew.
    st.session_state[PICK_KEY] = view.response_id
    st.session_state.pop(LOADED_KEY, None)
    st.session_state[RERUN_KEY] = True


def _texts() -> dict[str, str]:
    keys = ("request", "context_toggle", "met", "not_met", "unjudged", "confirm_yes", "confirm_no", "note_hint")
    texts = {key: t(f"workbench.{key}") for key in keys}
    texts.update(
        legend=t("workbench.legend_check"),
        count=t("workbench.count", judged="{judged}", total="{total}"),
        save=t("workbench.check.save"),
        note_label=t("workbench.note_label"),
    )
    return texts


def _saved_states(view: review.CheckView) -> tuple[dict[str, bool | None], dict[str, str]]:
    """What the workbench shows without a draft: the check where there is one, else the annotation."""
    states: dict[str, bool | None] = {}
    notes: dict[str, str] = {}
    for row in _checkable(view):
        assert row.annotation is not None  # _checkable keeps annotated rows only
        states[row.criterion_id] = row.check.met if row.check is not None else row.annotation.met
        notes[row.criterion_id] = (row.check.note or "") if row.check is not None else ""
    return states, notes


def _person(label: review.LabelView) -> str:
    """Who made a label, by name as the annotator picker names them (the username when it is their only name)."""
    return label.user_name or label.user or "—"


def _items(view: review.CheckView, draft: drafts.CheckerDraft | None = None) -> list[wb.Item]:
    items = []
    for row in _checkable(view):
        annotation = row.annotation
        assert annotation is not None  # _checkable keeps annotated rows only
        lines = [
            {
                "label": t("workbench.check.annotator", name=_person(annotation)),
                "value": met_text(annotation.met),
                "note": annotation.note or "",
            }
        ]
        if row.check is not None:
            lines.append(
                {
                    "label": t("workbench.check.checked", name=_person(row.check)),
                    "value": met_text(row.check.met),
                    "note": "",
                }
            )
        # The checker confirms by default what is there (their check, else the annotation); 1/0 corrects.
        current = row.check.met if row.check is not None else annotation.met
        note = (row.check.note or "") if row.check is not None else ""
        if draft is not None and row.criterion_id in draft.decisions:
            current = draft.decisions[row.criterion_id]
            note = draft.notes.get(row.criterion_id, "")
        items.append(wb.Item(row.criterion_id, str(row.position), row.text, current, note, lines))
    return items


@st.fragment
def _workbench(user, response_id: int) -> None:
    if st.session_state.pop(RERUN_KEY, False):
        st.rerun(scope="app")
    try:
        loaded = _loaded(user, response_id)
    except ClinConsensusError as error:
        show_error(error)
        return
    view: review.CheckView = loaded["view"]
    items = loaded["items"]
    wb.workbench(
        key=wb.session_key("check"),
        token=loaded["token"],
        texts=_texts(),
        request=view.case.user_request,
        context=view.case.clinical_context,
        meta=t("workbench.adj.meta", case_id=view.case.case_id, user_role=asker_text(view.case.user_role)),
        text_title=t("workbench.response", code=view.code),
        text=view.response_text,
        items_title=t("workbench.check.items", n=len(items), group=view.group_no),
        items=items,
        unsaved=loaded["unsaved"],
        draft_state=wb.draft_state(loaded["draft_at"]),
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
    window = _choose_queue(user)
    if window is None:
        return
    if not window.items:
        st.info(t("review.check.empty"))
        return
    pick, progress = st.columns([6, 3], vertical_alignment="center")
    with pick:
        response_id = _pick(window)
    with progress:
        progress_bar(window.checked, window.total, label_key="review.check.progress")
    _workbench(user, response_id)
