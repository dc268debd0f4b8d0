"""The audit log (admin): filter by entity, actor, date range and key; verify the chain; download JSONL."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from db.audit import verify_chain
from db.audit_search import audit_facets, audit_jsonl, search_audit
from db.engine import session_scope
from db.models import Role
from i18n import catalog
from ui import shell
from ui.shell import t
from ui.times import local_time, reader_zone
from ui.widgets import plain, said


def _named(kind: str, code: str) -> str:
    """An audit code in the reader's language (every code of db.audit has an entry; an unknown one reads "other")."""
    key = f"workbench.audit_{kind}.{code}"
    return t(key) if key in catalog() else t("language.audit_other", code=code)


def _compact(value) -> str:
    return "" if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def render() -> None:
    user = shell.require_user(Role.admin)
    st.title(t("review.audit_log.title"))
    with shell.db_session(read_only=True) as session:
        entities, actors = audit_facets(session, user)
    zone = reader_zone()
    with st.container(border=True):
        first, second = st.columns(2)
        chosen_entities = first.multiselect(
            t("review.audit_log.entity"),
            entities,
            key="audit_log_entities",
            placeholder=t("review.audit_log.any"),
            format_func=lambda entity: _named("entity", entity),
        )
        actor_names = {"": t("review.audit_log.any"), **{a: plain(a) for a in actors}}
        actor = second.selectbox(
            t("review.audit_log.actor"), list(actor_names), key="audit_log_actor", format_func=actor_names.get
        )
        third, fourth = st.columns(2)
        dates = third.date_input(
            t("review.audit_log.dates", zone=zone.key), value=(), key="audit_log_dates", format="YYYY-MM-DD"
        )
        key_contains = fourth.text_input(
            t("review.audit_log.key"), key="audit_log_key", placeholder=t("review.audit_log.key_hint")
        )
    since = dates[0] if len(dates) >= 1 else None
    until = dates[1] if len(dates) == 2 else since
    filters = dict(
        entities=chosen_entities,
        actor=actor or None,
        since=since,
        until=until,
        key_contains=key_contains or None,
        zone=zone,
    )
    with shell.db_session(read_only=True) as session:
        entries, total = search_audit(session, user, **filters)
    st.caption(t("review.audit_log.count", total=f"{total:,}", shown=f"{len(entries):,}"))
    if entries:
        frame = pd.DataFrame(
            {
                t("review.audit_log.col.id"): [e.id for e in entries],
                # in the reader's time zone (Asia/Shanghai unless configured)
                t("review.audit_log.col.at", zone=zone.key): [
                    local_time(e.at, zone=zone, seconds=True) for e in entries
                ],
                t("review.audit_log.col.actor"): [e.actor for e in entries],
                t("review.audit_log.col.action"): [_named("action", e.action) for e in entries],
                t("review.audit_log.col.entity"): [_named("entity", e.entity) for e in entries],
                t("review.audit_log.col.key"): [e.entity_key for e in entries],
                t("review.audit_log.col.before"): [_compact(e.before) for e in entries],
                t("review.audit_log.col.after"): [_compact(e.after) for e in entries],
            }
        )
        st.dataframe(frame, hide_index=True, width="stretch")
    else:
        st.info(t("review.audit_log.empty"))
    left, right, _ = st.columns([1, 1, 3])
    if total:
        engine = shell.engine()

        def build_file() -> bytes:
            # Runs only when clicked (the whole log can be large), outside the page's run.
            with session_scope(engine, read_only=True) as session:
                return audit_jsonl(session, user, **filters)

        left.download_button(
            t("review.audit_log.download"),
            build_file,
            file_name="audit_log.jsonl",
            mime="application/jsonl",
            key="audit_log_download",
        )
    if right.button(t("review.audit_log.verify"), key="audit_log_verify"):
        with shell.db_session(read_only=True) as session:
            report = verify_chain(session)
        if report.ok:
            st.success(t("review.audit_log.verified", n=f"{report.entries:,}"))
        else:
            st.error(t("review.audit_log.broken", id=report.first_bad_id, reason=said(report.reason)))
