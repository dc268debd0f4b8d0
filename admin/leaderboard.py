"""Leaderboard snapshots (docs/REFERENCE.md §3.7): freeze the current leaderboard under a name, list the
snapshots, read one, compare two, and download one as JSON and as the static page a lab publishes.

A snapshot is written once (db.work.leaderboard refuses a taken name) and computed from the whole
database, so it is built only when the admin presses the button. Everything shown comes from the
stored payload: what was frozen, not what the data says today.
"""

from __future__ import annotations

import json
from datetime import datetime

import pandas as pd
import streamlit as st

from analysis import leaderboard
from analysis.metrics import DEFAULT_K
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError
from db.rules.gold import default_basis, default_min_responses
from db.store.models import User
from db.work import leaderboard as store
from ui import shell, table_view, widgets
from ui.times import local_time


def _when(iso: str) -> str:
    return local_time(datetime.fromisoformat(iso))


def _listing_frame(t: shell.Translator, rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            t("leaderboard.col.name"): [row["name"] for row in rows],
            t("leaderboard.col.created_at"): [_when(row["created_at"]) for row in rows],
            t("leaderboard.col.created_by"): [row["created_by"] for row in rows],
            t("leaderboard.col.models"): [row["n_models"] for row in rows],
        }
    )


def snapshot_frame(payload: dict) -> pd.DataFrame:
    """One row per model in the snapshot's order: rank (None when not ranked), tier, ranked, scores and the
    interval (fractions)."""
    rows = payload.get("models", [])
    ranks = {model: rank for model, (rank, _) in leaderboard.ranks(rows).items()}
    return pd.DataFrame(
        {
            "rank": [ranks[row["model"]] for row in rows],
            "tier": [row["tier"] for row in rows],
            "ranked": [leaderboard.is_ranked(row) for row in rows],
            "model": [row["model"] for row in rows],
            "cacs_at_k": [row["cacs_at_k"] for row in rows],
            "cacs_at_k_low": [row["ci_low"] for row in rows],
            "cacs_at_k_high": [row["ci_high"] for row in rows],
            "rubric_accuracy": [row.get("rubric_accuracy") for row in rows],
            "n_responses": [row.get("n_responses") for row in rows],
        }
    )


def diff_frame(changes: dict) -> pd.DataFrame:
    """One row per model in both snapshots: ranks, scores and tiers before and after, and whether the move
    is beyond the intervals (None when a snapshot has no interval for it)."""
    rows = changes["models"]
    return pd.DataFrame(
        {
            "model": [row["model"] for row in rows],
            "rank_before": [row["rank"][0] for row in rows],
            "rank_after": [row["rank"][1] for row in rows],
            "cacs_before": [row["cacs_at_k"][0] for row in rows],
            "cacs_after": [row["cacs_at_k"][1] for row in rows],
            "change_points": [100 * row["change"] for row in rows],
            "tier_before": [row["tier"][0] for row in rows],
            "tier_after": [row["tier"][1] for row in rows],
            "ranked_before": [row.get("ranked", [True, True])[0] for row in rows],
            "ranked_after": [row.get("ranked", [True, True])[1] for row in rows],
            "responses_joined": [row.get("responses_joined") for row in rows],
            "responses_left": [row.get("responses_left") for row in rows],
            "beyond_intervals": [row["beyond_intervals"] for row in rows],
            "below_minimum": [bool(row.get("below_minimum")) for row in rows],
        }
    )


def calibrated_frame(payload: dict) -> pd.DataFrame:
    """One row per (judge, model) the snapshot holds a calibrated score for: counts and CACS@k values."""
    rows = []
    for judge, models in sorted(payload.get("calibrated", {}).items()):
        for model, entry in sorted(models.items()):
            values = entry.get("cacs_at_k") or {}
            rows.append(
                {
                    "judge": judge,
                    "model": model,
                    "n_labeled": entry.get("n_labeled"),
                    "n_unlabeled": entry.get("n_unlabeled"),
                    "n_pending": entry.get("n_pending"),
                    "estimate": values.get("estimate"),
                    "ci_low": values.get("ci_low"),
                    "ci_high": values.get("ci_high"),
                    "classical_low": values.get("classical_low"),
                    "classical_high": values.get("classical_high"),
                    "judge_only": values.get("judge_only"),
                }
            )
    columns = ["judge", "model", "n_labeled", "n_unlabeled", "n_pending", "estimate", "ci_low", "ci_high"]
    columns += ["classical_low", "classical_high", "judge_only"]
    return pd.DataFrame(rows, columns=columns)


def basis_caption(t: shell.Translator, payload: dict) -> str:
    """What a snapshot's figures stand on: its gold basis (provisional marked) and its ranking minimum."""
    basis = payload.get("gold_basis")
    minimum = leaderboard.minimum_of(payload)
    if basis is None:
        return t("gold_basis.snapshot.unrecorded", m=minimum)
    return t(f"gold_basis.snapshot.{basis}", m=minimum)


def _freeze(t: shell.Translator, user: User) -> None:
    with st.form("leaderboard_freeze", clear_on_submit=False):
        left, right = st.columns([3, 1])
        name = left.text_input(t("leaderboard.freeze.name"), max_chars=store.NAME_LIMIT, key="leaderboard_name")
        k = right.number_input(t("leaderboard.freeze.k"), min_value=1, value=DEFAULT_K, step=1, key="leaderboard_k")
        submitted = st.form_submit_button(t("leaderboard.freeze.button"), type="primary")
    if not submitted:
        return
    try:
        with shell.db_session(read_only=True) as session:
            name = store.require_new_name(session, name)
        with st.spinner(t("leaderboard.freeze.running")):
            payload = leaderboard.build_payload(
                shell.engine(), k=int(k), gold_basis=default_basis(), min_responses=default_min_responses()
            )
        with shell.db_session() as session:
            store.freeze_snapshot(session, actor=user, name=name, payload=payload)
    except ClinConsensusError as error:
        widgets.show_error(error)
        return
    st.success(t("leaderboard.freeze.done", name=name, n=len(payload["models"])))


def _show(t: shell.Translator, snapshot: dict) -> None:
    payload = snapshot["payload"]
    st.caption(
        t(
            "leaderboard.show.caption",
            k=payload["k"],
            n=payload["n"],
            at=_when(snapshot["created_at"]),
            by=snapshot["created_by"],
            head=payload["audit_head"]["count"],
        )
    )
    st.caption(basis_caption(t, payload))
    frame = snapshot_frame(payload)
    minimum = leaderboard.minimum_of(payload)
    frame["tier"] = [
        tier if ranked else t("gold_basis.not_ranked", m=minimum)
        for tier, ranked in zip(frame["tier"], frame["ranked"])
    ]
    table_view.show(
        t,
        frame.drop(columns=["ranked"]).rename(
            columns={"rank": t("leaderboard.col.rank"), "tier": t("leaderboard.col.tier")}
        ),
    )
    st.markdown(f"**{t('gold_basis.snapshot.calibrated')}**")
    calibrated = calibrated_frame(payload)
    if calibrated.empty:
        st.caption(t("gold_basis.snapshot.calibrated_none"))
    else:
        st.caption(t("gold_basis.snapshot.calibrated_caption"))
        table_view.show(t, calibrated)
    left, right = st.columns(2)
    text = json.dumps(snapshot, ensure_ascii=False, indent=2, sort_keys=True)
    left.download_button(
        t("leaderboard.download.json"), text, file_name="leaderboard.json", mime="application/json", key="lb_json"
    )
    right.download_button(
        t("leaderboard.download.html"),
        leaderboard.leaderboard_html(snapshot),
        file_name="leaderboard.html",
        mime="text/html",
        key="lb_html",
    )


def _diff(t: shell.Translator, before: dict, after: dict) -> None:
    changes = leaderboard.diff(before, after)
    frame = diff_frame(changes)
    moved = int(sum(row["moved"] for row in changes["models"]))
    st.caption(t("leaderboard.diff.caption", moved=moved, total=len(frame)))
    bases = changes.get("gold_basis", [None, None])
    if bases[0] != bases[1]:
        st.warning(t("gold_basis.diff.bases_differ", before=bases[0] or "—", after=bases[1] or "—"))
    beyond = {True: t("leaderboard.diff.beyond"), False: t("leaderboard.diff.within"), None: "—"}
    judged = [
        t("gold_basis.diff.below_minimum") if thin else beyond[value]
        for value, thin in zip(frame["beyond_intervals"], frame["below_minimum"])
    ]
    shown = frame.drop(columns=["below_minimum"]).assign(beyond_intervals=judged)
    headers = {column: t(f"leaderboard.col.{column}") for column in shown.columns if column != "model"}
    # One format on the page: scores as percentages with one decimal (as in the snapshot's table), their
    # change in percentage points with one decimal.
    points = headers["change_points"]
    table_view.show(
        t,
        shown.rename(columns=headers),
        rates=(headers["cacs_before"], headers["cacs_after"]),
        column_config={points: st.column_config.NumberColumn(points, format="%+.1f")},
    )
    for kind in ("added", "removed"):
        if changes[kind]:
            st.caption(t(f"leaderboard.diff.{kind}", models=", ".join(changes[kind])))


def render() -> None:
    user = shell.require_user(Role.admin)
    t = shell.translator()
    st.title(t("leaderboard.title"))
    st.caption(t("leaderboard.intro"))
    _freeze(t, user)
    with shell.db_session(read_only=True) as session:
        stored, problems = store.list_snapshots(session, actor=user)
        snapshots = [leaderboard.snapshot_dict(row) for row in stored]
    for problem in problems:
        widgets.show_error(problem)
    if not snapshots:
        st.info(t("leaderboard.none"))
        return
    st.subheader(t("leaderboard.list"))
    listing = [{**row, "n_models": len(row["payload"].get("models", []))} for row in reversed(snapshots)]
    st.dataframe(_listing_frame(t, listing), hide_index=True, width="stretch")
    names = [row["name"] for row in listing]
    by_name = {row["name"]: row for row in snapshots}
    st.subheader(t("leaderboard.show"))
    # Keyed by how many snapshots there are (never deleted): after a new freeze the pickers start again from
    # the newest snapshot and the newest pair.
    newest = len(names)
    chosen = st.selectbox(t("leaderboard.pick"), names, key=f"leaderboard_pick_{newest}")
    _show(t, by_name[chosen])
    if len(names) >= 2:
        st.subheader(t("leaderboard.diff"))
        left, right = st.columns(2)
        before = left.selectbox(t("leaderboard.diff.from"), names, index=1, key=f"leaderboard_from_{newest}")
        after = right.selectbox(t("leaderboard.diff.to"), names, index=0, key=f"leaderboard_to_{newest}")
        _diff(t, by_name[before], by_name[after])
