"""Feedback after a round (admin): each labeling round's state, and opening or closing its feedback.

A round is the label assignments of one assignment run (db/work/feedback.py). The rules (admin only,
only a finished round opens, every change audit-logged) are db.work.feedback's; this page shows them, and the
label imports that overrode a round's freeze (db.work.freeze_overrides).
"""

from __future__ import annotations

from datetime import UTC, datetime

import streamlit as st

from db.rules.enums import Role
from db.rules.errors import ClinConsensusError
from db.store.models import User
from db.work import feedback
from db.work.freeze_overrides import freeze_overrides
from ui import shell, widgets
from ui.times import local_time

t = shell.t
FLASH_KEY = "admin_feedback_flash"


def _round_name(state: feedback.RoundState) -> str:
    # No open/closed state here: the picker keeps showing the label it drew before an opening's rerun.
    return t("admin.feedback.round_name", number=state.number, time=local_time(state.round_at, seconds=True))


def _switch(admin: User, state: feedback.RoundState, is_open: bool) -> None:
    try:
        with shell.db_session() as session:
            feedback.set_feedback_open(session, actor=admin, round_at=state.round_at, is_open=is_open)
    except feedback.RoundUnfinished as refused:
        st.error(
            t(
                "admin.feedback.unfinished",
                number=state.number,
                done=f"{refused.done:,}",
                total=f"{refused.total:,}",
                share=f"{refused.done / refused.total:.1%}" if refused.total else "0.0%",
            )
        )
        return
    except ClinConsensusError as error:
        widgets.show_error(error)
        return
    key = "admin.feedback.opened" if is_open else "admin.feedback.closed"
    st.session_state[FLASH_KEY] = t(key, number=state.number)
    st.rerun()


def _utc_key(at: datetime) -> datetime:
    return (at.astimezone(UTC) if at.tzinfo else at).replace(tzinfo=None)


def _freeze_overrides(admin: User, states: list[feedback.RoundState]) -> None:
    """Label imports that changed labels of a round whose feedback was opened (audited, `--override-freeze`)."""
    with shell.db_session(read_only=True) as session:
        overrides = freeze_overrides(session, actor=admin)
    if not overrides:
        return
    numbers = {_utc_key(state.round_at): state.number for state in states}
    st.warning(t("admin.feedback.overrides", n=len(overrides)))
    st.dataframe(
        [
            {
                t("admin.feedback.override.at"): local_time(override.at),
                t("admin.feedback.col.by"): override.actor,
                t("admin.feedback.override.file"): override.source,
                t("admin.feedback.override.rounds"): " · ".join(
                    t("admin.feedback.override.round", number=numbers.get(_utc_key(at), "?"), n=f"{n:,}")
                    for at, n in override.rounds.items()
                ),
            }
            for override in overrides
        ],
        hide_index=True,
        width="stretch",
    )


def render() -> None:
    admin = shell.require_user(Role.admin)
    st.title(t("admin.feedback.title"))
    st.caption(t("admin.feedback.intro"))
    flash = st.session_state.pop(FLASH_KEY, None)
    if flash:
        st.success(flash)
    with shell.db_session(read_only=True) as session:
        states = feedback.round_states(session, actor=admin)
    if not states:
        st.info(t("admin.feedback.no_rounds"))
        return
    st.dataframe(
        [
            {
                t("admin.feedback.col.round"): t("admin.feedback.round_number", number=state.number),
                t("admin.feedback.col.assigned_at"): local_time(state.round_at, seconds=True),
                t("admin.feedback.col.by"): state.assigned_by or "—",
                t("admin.feedback.col.responses"): f"{state.responses:,}",
                t("admin.feedback.col.annotators"): f"{state.annotators:,}",
                t("admin.feedback.col.done"): f"{state.done:,} / {state.assignments:,}",
                t("admin.feedback.col.share"): f"{state.done_share:.1%}",
                t("admin.feedback.col.state"): (
                    t("admin.feedback.state.open") if state.is_open else t("admin.feedback.state.closed")
                ),
                t("admin.feedback.col.changed"): (
                    f"{local_time(state.changed_at)} · {state.changed_by}" if state.changed_at else "—"
                ),
            }
            for state in states
        ],
        hide_index=True,
        width="stretch",
    )
    _freeze_overrides(admin, states)
    by_number = {state.number: state for state in states}
    with st.container(border=True):
        number = st.selectbox(
            t("admin.feedback.choose"),
            list(by_number),
            index=len(by_number) - 1,
            key="admin_feedback_round",
            format_func=lambda n: _round_name(by_number[n]),
        )
        chosen = by_number[number]
        if chosen.is_open:
            st.caption(t("admin.feedback.is_open_hint"))
            if st.button(t("admin.feedback.close"), key="admin_feedback_close"):
                _switch(admin, chosen, False)
        else:
            st.caption(
                t("admin.feedback.ready_hint")
                if chosen.finished
                else t("admin.feedback.unfinished_hint", share=f"{chosen.done_share:.1%}")
            )
            if st.button(t("admin.feedback.open"), key="admin_feedback_open", type="primary"):
                _switch(admin, chosen, True)
