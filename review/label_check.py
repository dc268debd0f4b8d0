"""Label check within the checker's group: confirm or correct an annotator's labels, with a note."""

from __future__ import annotations

import streamlit as st

from db import review
from db.errors import ClinConsensusError, StaleEdit
from db.models import Role
from ui import shell
from ui.checker import met_names, met_text, page_start, response_box
from ui.keys import widget_key
from ui.shell import t
from ui.widgets import case_card, plain, progress_bar, show_error, show_text

MODES = (review.CHECK_ALL, review.CHECK_SAMPLE, review.CHECK_JUDGE)
PICK_KEY = "review_check_pick"
PICKER_BEFORE, PICKER_AFTER = 20, 300


def _choose_queue(user) -> list[review.CheckQueueItem] | None:
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
        return review.check_queue(session, user, annotator_id=annotator_id, mode=mode, **options)


def _queue_label(item: review.CheckQueueItem) -> str:
    text = t("review.check.queue_item", code=item.code, case=item.case_id, checked=item.n_checked, n=item.n_labels)
    if item.judge_disagreement is not None:
        text += " · " + t("review.check.judge_share", share=f"{item.judge_disagreement:.0%}")
    return text


def _pick(queue: list[review.CheckQueueItem]) -> int:
    """The picker shows a window of the queue around the chosen response: an annotator's queue holds
    thousands of responses, and sending them all on every run cost more than the rest of the page."""
    by_id = {item.response_id: item for item in queue}
    if st.session_state.get(PICK_KEY) not in by_id:
        st.session_state[PICK_KEY] = queue[0].response_id
    ids = list(by_id)
    position = ids.index(st.session_state[PICK_KEY])
    window = ids[max(0, position - PICKER_BEFORE) : position + PICKER_AFTER]
    labels = {rid: _queue_label(by_id[rid]) for rid in window}  # in this run's language
    return st.selectbox(t("review.check.pick"), window, key=PICK_KEY, format_func=labels.get)


def _seen_key(response_id: int) -> str:
    return f"review_check_seen_{response_id}"


def _row(view: review.CheckView, row: review.CheckRow, seen: dict) -> review.CheckInput | None:
    with st.container(border=True):
        text_col, label_col, decide_col = st.columns([4, 2, 3])
        with text_col:
            st.markdown(f"**{row.position}** · {plain(row.criterion_id)}")
            show_text(row.text)
        with label_col:
            if row.annotation is None:
                st.caption(t("review.check.no_label"))
                return None
            st.markdown(
                t("review.check.annotator_said", name=plain(row.annotation.user), value=met_text(row.annotation.met))
            )
            if row.annotation.note:
                st.caption(t("review.note"))
                show_text(row.annotation.note)
            if row.check is not None:
                st.caption(t("review.check.checked_by", name=plain(row.check.user), value=met_text(row.check.met)))
        with decide_col:
            if row.own:
                st.caption(t("review.check.own"))
                return None
            current = row.check.met if row.check is not None else row.annotation.met
            key = widget_key("review_check", view.response_id, row.criterion_id)
            met = st.radio(
                t("review.check.decision"),
                [True, False],
                index=0 if current else 1,
                format_func=met_names().get,
                horizontal=True,
                key=f"{key}_met",
                label_visibility="collapsed",
            )
            note = st.text_input(
                t("review.note"),
                value=(row.check.note or "") if row.check else "",
                key=f"{key}_note",
                placeholder=t("review.check.note_hint"),
                label_visibility="collapsed",
            )
    # The revision the checker first saw: a save by someone else since then is refused, not overwritten.
    return review.CheckInput(row.criterion_id, bool(met), note, seen.get(row.criterion_id))


def _show_stale(stale: StaleEdit) -> None:
    current = stale.current
    if isinstance(current, review.LabelView):
        st.warning(
            t(
                "review.check.stale",
                criterion=plain(current.criterion_id),
                name=plain(current.user or "—"),
                value=met_text(current.met),
            )
        )
    else:
        st.warning(t("review.stale_generic"))


def render() -> None:
    user = shell.require_user(Role.checker)
    page_start("review.check.title", "review_check_done")
    st.caption(t("review.check.intro", group=user.group_no))
    queue = _choose_queue(user)
    if queue is None:
        return
    if not queue:
        st.info(t("review.check.empty"))
        return
    checked = sum(1 for item in queue if item.n_checked >= item.n_labels)
    progress_bar(checked, len(queue), label_key="review.check.progress")
    response_id = _pick(queue)
    with shell.db_session(read_only=True) as session:
        view = review.check_view(session, user, response_id)
    case_card(view.case, expanded_text=False)
    st.subheader(t("review.response", code=plain(view.code)))
    response_box(view.response_text)
    st.subheader(t("review.check.criteria"))
    st.caption(t("review.check.how"))
    seen = st.session_state.setdefault(
        _seen_key(view.response_id),
        {row.criterion_id: row.check.lock_version if row.check is not None else None for row in view.rows},
    )
    with st.form(widget_key("review_check_form", view.response_id), enter_to_submit=False):
        decisions = [d for d in (_row(view, row, seen) for row in view.rows) if d is not None]
        save = st.form_submit_button(t("review.check.save"), type="primary", disabled=not decisions)
    if not save:
        return
    try:
        with shell.db_session() as session:
            written = review.save_checks(session, user, response_id=view.response_id, decisions=decisions)
    except StaleEdit as stale:
        # Show the newer value; the next save starts from it.
        st.session_state.pop(_seen_key(view.response_id), None)
        _show_stale(stale)
        return
    except ClinConsensusError as error:
        show_error(error)
        return
    st.session_state.pop(_seen_key(view.response_id), None)
    st.session_state["review_check_done"] = t("review.check.saved", n=written, code=plain(view.code))
    st.rerun()
