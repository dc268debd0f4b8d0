"""Feedback after a round (annotator): where gold differed from their own label, once an admin opened the round.

Who sees what (own labels only, open rounds only, responses under their code) is db/work/feedback.py's rule;
this page lays it out. Case, criterion and rationale texts are user text and shown as text.
"""

from __future__ import annotations

import streamlit as st

from db.rules.enums import Role
from db.rules.gold import ADJUDICATED
from db.work import feedback
from ui import shell, widgets
from ui.times import local_time

t = shell.t
PAGE_SIZE = 20  # responses per page: a full-scale round gives an annotator thousands


def _met(value: bool) -> str:
    return t("annotate.feedback.met") if value else t("annotate.feedback.not_met")


def _decision(decision: feedback.FeedbackDecision) -> None:
    with st.container(border=True):
        text, labels, why = st.columns([5, 2, 4])
        with text:
            st.caption(
                t("annotate.feedback.criterion", position=decision.position, id=widgets.plain(decision.criterion_id))
            )
            widgets.show_text(decision.criterion_text)
        with labels:
            st.markdown(t("annotate.feedback.yours", label=_met(decision.my_met)))
            st.markdown(t("annotate.feedback.gold", label=_met(decision.gold_met)))
            st.caption(t(f"annotate.feedback.source.{decision.gold_source}"))
        with why:
            st.caption(t("annotate.feedback.rationale"))
            if decision.gold_source != ADJUDICATED:
                st.caption(t("annotate.feedback.no_rationale"))
            elif decision.rationale and decision.rationale.strip():
                widgets.show_text(decision.rationale)
            else:
                st.caption(t("annotate.feedback.rationale_missing"))


def _response(item: feedback.FeedbackResponse) -> None:
    st.subheader(t("annotate.feedback.response", case=widgets.plain(item.case.case_id), code=widgets.plain(item.code)))
    st.caption(t("annotate.feedback.response_caption", n=len(item.decisions), round=local_time(item.round_at)))
    with st.expander(t("annotate.feedback.case_and_response")):
        widgets.case_card(item.case)
        st.caption(t("annotate.feedback.response_text"))
        widgets.show_text(item.text)
    for decision in item.decisions:
        _decision(decision)


def render() -> None:
    user = shell.require_user(Role.annotator)
    st.title(t("annotate.feedback.title"))
    page = int(st.session_state.get("annotate_feedback_page") or 0)
    with shell.db_session(read_only=True) as session:
        view = feedback.my_feedback(session, user, page=page, page_size=PAGE_SIZE)
        if page and not view.responses and view.total_responses:  # fewer pages since the last visit
            page = 0
            st.session_state["annotate_feedback_page"] = 0
            view = feedback.my_feedback(session, user, page=0, page_size=PAGE_SIZE)
    if view.open_rounds == 0:
        st.info(t("annotate.feedback.not_open"))
        return
    st.caption(t("annotate.feedback.intro", rounds=view.open_rounds))
    columns = st.columns(4)
    columns[0].metric(t("annotate.feedback.compared"), f"{view.compared:,}")
    columns[1].metric(t("annotate.feedback.differing"), f"{view.differing:,}")
    columns[2].metric(
        t("annotate.feedback.agreement"), "—" if view.agreement is None else f"{100 * view.agreement:.1f}%"
    )
    columns[3].metric(t("annotate.feedback.awaiting"), f"{view.awaiting_gold:,}")
    if view.provisional_responses or view.open_responses:
        st.info(
            t(
                "annotate.feedback.not_final",
                provisional=f"{view.provisional_responses:,}",
                open=f"{view.open_responses:,}",
            )
        )
    if not view.responses:
        st.success(t("annotate.feedback.nothing_differs"))
        return
    total = view.total_responses
    pages = (total + PAGE_SIZE - 1) // PAGE_SIZE
    if pages > 1:
        st.selectbox(
            t("annotate.feedback.page"),
            range(pages),
            key="annotate_feedback_page",
            format_func=lambda i: t(
                "annotate.feedback.page_of",
                page=i + 1,
                pages=pages,
                first=i * PAGE_SIZE + 1,
                last=min((i + 1) * PAGE_SIZE, total),
                total=total,
            ),
        )
    for item in view.responses:
        _response(item)
