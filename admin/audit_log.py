"""The audit log (admin): filter by entity, actor, date range and key; read one entry's changes; verify the chain.

Each entry is read as a table of its fields (translated where the catalog names them) with the value
before and after; the stored JSON stays one click away for whoever needs the exact record.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from db.access.audit import verify_chain
from db.access.audit_search import audit_facets, audit_jsonl, search_audit
from db.rules.enums import Role
from db.store.engine import session_scope
from db.store.models import AuditLog, User
from i18n import catalog
from ui import shell
from ui.shell import t
from ui.times import local_time, reader_zone, zone_label
from ui.widgets import said

#: Where the catalog names a stored value of a field (role "checker" reads 审核员).
_VALUE_NAMES = {"role": "role.{}", "status": "annotate.authoring.status.{}", "kind": "admin.assign.kind.{}"}


def _named(kind: str, code: str) -> str:
    """An audit code in the reader's language (each code of db.access.audit has one; an unknown one reads "other")."""
    key = f"workbench.audit_{kind}.{code}"
    return t(key) if key in catalog() else t("language.audit_other", code=code)


def _field(name: str) -> str:
    """A stored field's name in the reader's language; the judge runs page names its run's own fields."""
    for key in (f"review.audit_log.field.{name}", f"judge.column.{name}"):
        if key in catalog():
            return t(key)
    return name


def _value(name: str, value: object) -> str:
    """One stored value as a reader reads it: "—" for nothing, names for codes, a count for a list."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return t("review.audit_log.yes") if value else t("review.audit_log.no")
    if name == "group" and isinstance(value, int):
        return t("group.name", group=value)
    if isinstance(value, int | float):
        return f"{value:,}"
    if isinstance(value, list):
        return t("review.audit_log.items", n=f"{len(value):,}")
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    if name.endswith("_at") and isinstance(value, str):
        try:
            return local_time(datetime.fromisoformat(value), seconds=True)
        except ValueError:
            return value
    key = _VALUE_NAMES.get(name, "").format(value)
    return t(key) if key in catalog() else str(value)


_HEX = frozenset("0123456789abcdef")


def _short_key(key: str | None) -> str:
    """An entry's key as plain text (pickers and cells are not markdown); a session's 64-digit hash is cut to
    its first 12 digits, enough to tell entries apart, so the other columns stay in view."""
    if not key:
        return "—"
    return f"{key[:12]}…" if len(key) > 32 and set(key) <= _HEX else key


#: How db.work.feedback keys a labeling round in the log: "round " and the round's UTC time.
_ROUND_KEY = "round "


def _key_text(key: str | None, zone: ZoneInfo) -> str:
    """An entry's key as `_short_key` shows it, but a labeling round's by its time in the reader's zone."""
    if key and key.startswith(_ROUND_KEY):
        try:
            at = datetime.fromisoformat(key.removeprefix(_ROUND_KEY))
        except ValueError:
            return _short_key(key)
        return t("review.audit_log.round_key", time=local_time(at, zone=zone, seconds=True))
    return _short_key(key)


def _changes(entry: AuditLog) -> list[dict]:
    before, after = entry.before or {}, entry.after or {}
    names = [*before, *(name for name in after if name not in before)]
    return [
        {
            t("review.audit_log.col.field"): _field(name),
            t("review.audit_log.col.before"): _value(name, before.get(name)),
            t("review.audit_log.col.after"): _value(name, after.get(name)),
        }
        for name in names
    ]


#: The date filter's choices: days back from today in the reader's zone (None: the whole log).
_PERIODS = {"all": None, "today": 0, "week": 6, "month": 29, "custom": None}


def _date_range(column: DeltaGenerator, zone: ZoneInfo) -> tuple[date | None, date | None]:
    """A period by name; dates are picked only for "custom", and start filled in, so the picker never
    shows Streamlit's empty "yyyy-mm-dd" pattern."""
    today = datetime.now(zone).date()
    with column:
        period = st.selectbox(
            t("review.audit_log.dates", zone=zone_label(zone, t)),
            list(_PERIODS),
            key="audit_log_period",
            format_func=lambda p: t(f"review.audit_log.period.{p}"),
        )
        if period == "custom":
            dates = st.date_input(
                t("review.audit_log.custom_dates"),
                value=(today - timedelta(days=6), today),
                key="audit_log_dates",
                format="YYYY-MM-DD",
            )
            since = dates[0] if len(dates) >= 1 else None
            return since, (dates[1] if len(dates) == 2 else since)
    days = _PERIODS[period]
    return (None, None) if days is None else (today - timedelta(days=days), today)


def _filters(user: User) -> dict:
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
        actor_names = {"": t("review.audit_log.any"), **{a: a for a in actors}}  # options are plain text
        actor = second.selectbox(
            t("review.audit_log.actor"), list(actor_names), key="audit_log_actor", format_func=actor_names.__getitem__
        )
        third, fourth = st.columns(2)
        since, until = _date_range(third, zone)
        key_contains = fourth.text_input(
            t("review.audit_log.key"), key="audit_log_key", placeholder=t("review.audit_log.key_hint")
        )
    return dict(
        entities=chosen_entities,
        actor=actor or None,
        since=since,
        until=until,
        key_contains=key_contains or None,
        zone=zone,
    )


def _entries(entries: list[AuditLog], zone: ZoneInfo) -> None:
    """The matching entries in a table, then the chosen one's changes field by field."""
    when = t("review.audit_log.col.at", zone=zone_label(zone, t))
    frame = pd.DataFrame(
        {
            t("review.audit_log.col.id"): [e.id for e in entries],
            when: [local_time(e.at, zone=zone, seconds=True) for e in entries],
            t("review.audit_log.col.actor"): [e.actor for e in entries],
            t("review.audit_log.col.action"): [_named("action", e.action) for e in entries],
            t("review.audit_log.col.entity"): [_named("entity", e.entity) for e in entries],
            t("review.audit_log.col.key"): [_key_text(e.entity_key, zone) for e in entries],
            t("review.audit_log.col.fields"): [
                t("admin.export.left_out.list_sep").join(
                    dict.fromkeys(_field(n) for n in [*(e.before or {}), *(e.after or {})])
                )
                or "—"
                for e in entries
            ],
        }
    )
    # The changed fields get the room (the id and the time need little), so their names are not cut off.
    fields, key = t("review.audit_log.col.fields"), t("review.audit_log.col.key")
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            t("review.audit_log.col.id"): st.column_config.NumberColumn(width="small", format="%d"),
            key: st.column_config.TextColumn(width="medium"),
            fields: st.column_config.TextColumn(width="large"),
        },
    )
    by_id = {e.id: e for e in entries}
    chosen = st.selectbox(
        t("review.audit_log.entry"),
        list(by_id),
        key="audit_log_entry",
        format_func=lambda i: t(
            "review.audit_log.entry_option",
            id=i,
            at=local_time(by_id[i].at, zone=zone, seconds=True),
            action=_named("action", by_id[i].action),
            entity=_named("entity", by_id[i].entity),
            name=_key_text(by_id[i].entity_key, zone),
        ),
    )
    entry = by_id[chosen]
    changes = _changes(entry)
    if changes:
        st.dataframe(
            changes,
            hide_index=True,
            width="stretch",
            column_config={t("review.audit_log.col.field"): st.column_config.TextColumn(width="medium")},
        )
    else:
        st.caption(t("review.audit_log.no_fields"))
    with st.expander(t("review.audit_log.raw")):
        st.code(
            json.dumps({"before": entry.before, "after": entry.after}, ensure_ascii=False, indent=2, default=str),
            language="json",
        )


def render() -> None:
    user = shell.require_user(Role.admin)
    st.title(t("review.audit_log.title"))
    filters = _filters(user)
    with shell.db_session(read_only=True) as session:
        entries, total = search_audit(session, user, **filters)
    st.caption(t("review.audit_log.count", total=f"{total:,}", shown=f"{len(entries):,}"))
    if entries:
        _entries(entries, filters["zone"])
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
