"""Adjudication: decide the cells where the two groups' final labels differ; the decision is gold."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from db import review, users
from db.errors import ClinConsensusError, StaleEdit
from db.models import Role
from ui import shell
from ui.checker import met_names, met_text, page_start, response_box
from ui.shell import t
from ui.widgets import case_card, plain, show_error, show_text


def _seen_key(response_id: int) -> str:
    return f"review_adj_seen_{response_id}"


def _queue(username: str) -> list[review.AdjudicationQueueItem]:
    # Kept figures (db/kept.py): cheap enough to read on every run, so the queue is never stale.
    with shell.db_session(read_only=True) as session:
        return review.adjudication_queue(session, users.get_user(session, username=username))


def _queue_table(queue: list[review.AdjudicationQueueItem]) -> None:
    frame = pd.DataFrame(
        {
            t("review.adjudication.col.code"): [item.code for item in queue],
            t("review.adjudication.col.case"): [item.case_id for item in queue],
            t("review.adjudication.col.open"): [item.n_unresolved for item in queue],
            t("review.adjudication.col.agreement"): [item.agreement * 100 for item in queue],
        }
    )
    st.dataframe(
        frame,
        hide_index=True,
        height=min(38 + 35 * len(frame), 260),
        width="stretch",
        column_config={
            t("review.adjudication.col.agreement"): st.column_config.ProgressColumn(
                min_value=0, max_value=100, format="%.0f%%"
            )
        },
    )


def _side(title: str, side: review.Side) -> None:
    with st.container(border=True):
        st.markdown(f"**{title}** · {met_text(side.met)}")
        if side.note:
            show_text(side.note)
        else:
            st.caption(t("review.adjudication.no_note"))


def _cell(view: review.AdjudicationView, cell: review.AdjudicationCell) -> review.AdjudicationInput | None:
    key = f"review_adj_{view.response_id}_{cell.criterion_id}"
    with st.container(border=True):
        st.markdown(f"**{cell.position}** · {plain(cell.criterion_id)}")
        show_text(cell.text)
        a, b = st.columns(2)
        with a:
            _side(t("review.adjudication.label_a"), cell.a)
        with b:
            _side(t("review.adjudication.label_b"), cell.b)
        if cell.decision is not None:
            st.caption(
                t(
                    "review.adjudication.decided",
                    name=plain(cell.decision.user or "—"),
                    value=met_text(cell.decision.met),
                )
            )
        choice_col, why_col = st.columns([2, 3])
        current = None if cell.decision is None else (0 if cell.decision.met else 1)
        met = choice_col.radio(
            t("review.adjudication.decision"),
            [True, False],
            index=current,
            format_func=met_names().get,
            horizontal=True,
            key=f"{key}_met",
        )
        rationale = why_col.text_input(
            t("review.adjudication.rationale"),
            key=f"{key}_why",
            value=(cell.decision.note or "") if cell.decision else "",
            placeholder=t("review.adjudication.rationale_hint"),
        )
    if met is None:
        return None
    return review.AdjudicationInput(cell.criterion_id, bool(met), rationale, None)


def render() -> None:
    user = shell.require_user(Role.checker)
    page_start("review.adjudication.title", "review_adj_done")
    with shell.db_session(read_only=True) as session:
        queue = _queue(user.username)
        names = {
            item.response_id: t(
                "review.adjudication.queue_item",
                code=item.code,
                case=item.case_id,
                n=item.n_unresolved,
                share=f"{item.agreement:.0%}",
            )
            for item in queue
        }
        # The response on screen stays while its form is sent, even if others resolved it meanwhile.
        working = st.session_state.get("review_adj_pick")
        if working is not None and working not in names and _seen_key(working) in st.session_state:
            view = review.adjudication_view(session, user, working)
            names[working] = t("review.adjudication.queue_item_closed", code=view.code, case=view.case.case_id)
    if not names:
        st.info(t("review.adjudication.empty"))
        return
    if queue:
        st.caption(t("review.adjudication.intro", n=len(queue)))
        _queue_table(queue)
    else:
        st.info(t("review.adjudication.empty"))
    response_id = st.selectbox(t("review.adjudication.pick"), list(names), key="review_adj_pick", format_func=names.get)
    with shell.db_session(read_only=True) as session:
        view = review.adjudication_view(session, user, response_id)
    seen = st.session_state.setdefault(
        _seen_key(view.response_id),
        {cell.criterion_id: cell.decision.lock_version if cell.decision else None for cell in view.cells},
    )
    case_card(view.case, expanded_text=False)
    st.subheader(t("review.response", code=plain(view.code)))
    response_box(view.response_text)
    st.subheader(t("review.adjudication.cells", n=view.n_open))
    st.caption(t("review.adjudication.how"))
    with st.form(f"review_adj_form_{view.response_id}", enter_to_submit=False):
        chosen = [d for d in (_cell(view, cell) for cell in view.cells) if d is not None]
        save = st.form_submit_button(t("review.adjudication.save"), type="primary")
    if not save:
        return
    # Only new decisions and changed ones are written; each names the revision first seen.
    decided = {cell.criterion_id: cell.decision for cell in view.cells if cell.decision is not None}
    changes = [
        review.AdjudicationInput(d.criterion_id, d.met, d.rationale, seen.get(d.criterion_id))
        for d in chosen
        if d.criterion_id not in decided
        or (decided[d.criterion_id].met, decided[d.criterion_id].note or "") != (d.met, d.rationale.strip())
    ]
    if not changes:
        st.warning(t("review.adjudication.nothing"))
        return
    try:
        with shell.db_session() as session:
            saved = review.adjudicate_many(session, user, response_id=view.response_id, decisions=changes)
    except StaleEdit as stale:
        st.session_state.pop(_seen_key(view.response_id), None)
        current = stale.current
        if isinstance(current, review.LabelView):
            st.warning(
                t(
                    "review.adjudication.stale",
                    criterion=plain(current.criterion_id),
                    name=plain(current.user or "—"),
                    value=met_text(current.met),
                )
            )
            st.caption(t("review.adjudication.their_rationale"))
            show_text(current.note)
        else:
            st.warning(t("review.stale_generic"))
        return
    except ClinConsensusError as error:
        show_error(error)
        return
    st.session_state.pop(_seen_key(view.response_id), None)
    st.session_state["review_adj_done"] = t("review.adjudication.saved", n=saved, code=plain(view.code))
    st.rerun()
