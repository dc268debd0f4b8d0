"""One page for a new model (docs/REFERENCE.md §3.7, §4): its answers, the judges that graded it with their
held-out fidelity, its calibration sample's progress, and its calibrated score once the sample allows.

The figures come from the decision grid the analysis pages share (`ui.shared_grid`), through
`analysis.model_pipeline`, which keeps them per data version: a rerun recomputes nothing. The next
step of the pipeline is started on the pages that already do it (judge runs, assignments).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import pandas as pd
import streamlit as st

from admin import assignments, judge_runs
from analysis import calibration_plan, model_pipeline
from analysis.background import BackgroundValue
from analysis.calibrated import METRICS, VALUE_KEYS
from analysis.metrics import DEFAULT_K
from db.access.export_records import newest_sft_holdout
from db.rules.enums import Role
from db.rules.errors import ValidationFailed
from db.rules.gold import default_basis
from db.store.models import User
from db.work import generation
from ui import shared_grid, shell, table_view
from ui.text import plain
from ui.times import local_time

JUDGE_RUNS_PATH = "admin-judge-runs"
ASSIGNMENTS_PATH = "admin-assignments"
RUN_COLUMNS = ("id", "status", "items", "done", "cached", "truncated", "empty", "errors", "created_at")


@st.cache_resource(show_spinner=False)
def _figures() -> BackgroundValue[model_pipeline.PipelineFigures]:
    """The pipeline figures of the shared grid, once per data version for the whole process."""
    return shared_grid.derived(model_pipeline.PipelineFigures, name="new-model-pipeline")


def _link_runs(t: shell.Translator) -> None:
    """The judge runs page, where generate and judge runs start (the same url path as its navigation entry)."""
    page = st.Page(judge_runs.render, url_path=JUDGE_RUNS_PATH)
    st.page_link(page, label=t("new_model.link.runs"), icon=":material/gavel:")


def _link_assign(t: shell.Translator) -> None:
    page = st.Page(assignments.render, url_path=ASSIGNMENTS_PATH)
    st.page_link(page, label=t("new_model.link.assign"), icon=":material/assignment_ind:")


def _frame(t: shell.Translator, rows: list[dict], columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame([[row[c] for c in columns] for row in rows], columns=[t(f"new_model.col.{c}") for c in columns])


def _answers(t: shell.Translator, user: User, model: str) -> None:
    st.subheader(t("new_model.answers.title"))
    with shell.db_session(read_only=True) as session:
        made = generation.model_generation(session, user, model)
    left, middle, right, last = st.columns(4)
    left.metric(t("new_model.answers.responses"), made.responses)
    middle.metric(t("new_model.answers.truncated"), made.statuses.get(generation.TRUNCATED, 0))
    right.metric(t("new_model.answers.empty"), made.statuses.get(generation.EMPTY, 0))
    last.metric(t("new_model.answers.unanswered"), made.unanswered)
    if not made.runs:
        st.info(t("new_model.answers.no_runs"))
    else:
        runs = [{**run, "created_at": local_time(datetime.fromisoformat(run["created_at"]))} for run in made.runs]
        st.dataframe(_frame(t, runs, RUN_COLUMNS), hide_index=True, width="stretch")
        shares = made.runs[0]["endpoints"]
        if shares:
            st.caption(
                t(
                    "new_model.answers.endpoints",
                    shares=", ".join(f"{plain(s['base_url'])}: {s.get('done', 0)}" for s in shares),
                )
            )
    _link_runs(t)


def _judges(t: shell.Translator, figures: model_pipeline.PipelineFigures, found: model_pipeline.ModelFigures) -> None:
    st.subheader(t("new_model.judges.title"))
    with shell.db_session(read_only=True) as session:
        heldout = model_pipeline.heldout_in_grid(figures.grid, newest_sft_holdout(session))
    if heldout:
        st.caption(t("new_model.judges.heldout", models=", ".join(plain(m) for m in heldout)))
    else:
        st.caption(t("new_model.judges.all_models"))
    if found.judges.empty:
        st.info(t("new_model.judges.none"))
        _link_runs(t)
        return
    basis = default_basis()
    fidelity = figures.fidelity(heldout, basis)
    rows = [
        {
            **row,
            # A score between 0 and 1 written as the dashboard writes it (0.512), not a rate.
            "mf1_gold": _score(fidelity.loc[row["judge"], "mf1_gold"]) if row["judge"] in fidelity.index else "—",
            "n_gold": int(fidelity.loc[row["judge"], "n_gold"]) if row["judge"] in fidelity.index else 0,
        }
        for row in found.judges.to_dict("records")
    ]
    columns = (*model_pipeline.JUDGE_COLUMNS, "mf1_gold", "n_gold")
    table_view.show(t, _frame(t, rows, columns))
    st.caption(t(f"new_model.judges.basis.{basis}"))


def _sample(t: shell.Translator, sample: model_pipeline.SampleProgress) -> None:
    st.subheader(t("new_model.sample.title"))
    if not sample.drawn:
        st.info(t("new_model.sample.none"))
        _link_assign(t)
        return
    columns = st.columns(4)
    columns[0].metric(t("new_model.sample.drawn"), sample.drawn)
    columns[1].metric(t("gold_basis.sample.final"), sample.complete)
    columns[2].metric(t("gold_basis.sample.provisional"), sample.provisional)
    columns[3].metric(t("gold_basis.sample.open"), sample.open)
    st.progress(
        sample.complete / sample.drawn, text=t("gold_basis.sample.progress", done=sample.complete, n=sample.drawn)
    )
    st.caption(t("gold_basis.sample.stages", **sample.stages))
    if sample.provisional:
        st.caption(t("gold_basis.sample.provisional_note", n=sample.provisional))


def _plan(t: shell.Translator, figures: model_pipeline.PipelineFigures, found: model_pipeline.ModelFigures) -> None:
    """How large a calibration sample this judge's quality asks for (docs/REFERENCE.md §4.4), beside the draw."""
    st.markdown(f"**{t('plan.page.title')}**")
    judges = found.judges["judge"].tolist() if not found.judges.empty else []
    if not judges:
        st.caption(t("plan.page.no_judge"))
        return
    left, right = st.columns(2)
    judge = left.selectbox(t("plan.page.judge"), judges, key="new_model_plan_judge") or judges[0]
    target = right.number_input(
        t("plan.page.half_width"),
        min_value=0.005,
        max_value=0.5,
        value=0.03,
        step=0.005,
        format="%.3f",
        key="new_model_plan_half_width",
    )
    try:
        plan = calibration_plan.plan(figures.grid, judge, found.model, DEFAULT_K, float(target))
    except ValidationFailed as error:
        st.info(t(error.key or "plan.page.none", **error.params))
        return
    first, second, third, fourth = st.columns(4)
    first.metric(t("plan.page.n"), plan.n)
    second.metric(t("plan.page.ppi"), f"±{plan.half_width:.1%}")
    third.metric(t("plan.page.classical"), f"±{plan.classical_half_width:.1%}")
    fourth.metric(t("plan.page.decisions"), f"{plan.decisions:,}")
    key = "plan.page.caption" if plan.reached else "plan.page.unreached"
    st.caption(
        t(
            key,
            target=f"{plan.target:.1%}",
            n=plan.n,
            criteria=plan.rubric_size,
            sigma=f"{plan.sigma_y:.3f}",
            rho=f"{plan.rho:.3f}",
            basis=plan.n_basis,
            unlabeled=plan.n_unlabeled,
        )
    )


def _score(value: float | None) -> str:
    return "—" if value is None or pd.isna(value) else f"{value:.3f}"


def _rate(value: float) -> str:
    return f"{value:.1%}"


def _values_frame(t: shell.Translator, entry: dict) -> pd.DataFrame:
    rows = [[t(f"new_model.metric.{metric}"), *(entry[metric][key] for key in VALUE_KEYS)] for metric in METRICS]
    return pd.DataFrame(rows, columns=[t("new_model.col.metric"), *(t(f"new_model.col.{key}") for key in VALUE_KEYS)])


def fidelity_warning(t: shell.Translator, judge: str, fidelity: pd.DataFrame, ceiling: float | None) -> str | None:
    """Why the chosen judge's score may not be trusted: its agreement with gold is unknown (nothing compared),
    or below what the physicians reach against each other; None when neither."""
    compared = fidelity["n_gold"].get(judge, 0) if "n_gold" in fidelity else 0
    known = judge in fidelity.index and bool(compared) and not pd.isna(compared)
    value = float(fidelity["mf1_gold"].get(judge, np.nan)) if known else float("nan")
    if not known or np.isnan(value):
        return t("daily.new_model.fidelity_unknown", judge=plain(judge))
    if ceiling is not None and value < ceiling:
        return t("daily.new_model.fidelity_below", judge=plain(judge), value=_score(value), ceiling=_score(ceiling))
    return None


def _calibrated(
    t: shell.Translator, found: model_pipeline.ModelFigures, figures: model_pipeline.PipelineFigures
) -> None:
    st.subheader(t("new_model.score.title", k=DEFAULT_K))
    judges = list(found.calibrated)
    entry = None
    if judges:
        judge = st.selectbox(t("new_model.score.judge"), judges, key="new_model_judge")
        with shell.db_session(read_only=True) as session:
            heldout = model_pipeline.heldout_in_grid(figures.grid, newest_sft_holdout(session))
        warning = fidelity_warning(t, judge or judges[0], figures.fidelity(heldout), figures.physicians_ceiling())
        if warning:
            st.warning(warning, icon=":material/warning:")
        entry = found.calibrated[judge or judges[0]]
        st.caption(
            t(
                "new_model.score.counts",
                labeled=entry["n_labeled"],
                unlabeled=entry["n_unlabeled"],
                pending=entry["n_pending"],
            )
        )
    missing = model_pipeline.what_is_missing(entry, found.sample)
    if missing:
        params = {"need": model_pipeline.MIN_LABELED, "labeled": entry["n_labeled"] if entry else 0}
        st.warning("\n\n".join(t(f"new_model.missing.{reason}", **params) for reason in missing))
        return
    assert entry is not None
    score = entry["cacs_at_k"]
    st.metric(
        t("new_model.score.estimate"),
        _rate(score["estimate"]),
        help=t("new_model.score.help"),
    )
    st.caption(
        t(
            "new_model.score.interval",
            low=_rate(score["ci_low"]),
            high=_rate(score["ci_high"]),
            classical_low=_rate(score["classical_low"]),
            classical_high=_rate(score["classical_high"]),
            judge_only=_rate(score["judge_only"]),
        )
    )
    table_view.show(t, _values_frame(t, entry), rates=[t(f"new_model.col.{key}") for key in VALUE_KEYS])


def render() -> None:
    user = shell.require_user(Role.admin)
    t = shell.translator()
    st.title(t("new_model.title"))
    st.caption(t("new_model.intro"))
    with shell.db_session(read_only=True) as session:
        # The newest first (the page opens on the model that just arrived); the picker's search finds any other.
        models = generation.models_newest_first(session, actor=user)
    if not models:
        st.info(t("new_model.no_models"))
        _link_runs(t)
        return
    model = st.selectbox(t("new_model.pick"), models, key="new_model_pick") or models[0]
    _answers(t, user, model)
    snapshot = shared_grid.newest(_figures(), t)
    if snapshot is None:
        return
    figures = snapshot.value
    found = figures.model(model, DEFAULT_K)
    _judges(t, figures, found)
    _sample(t, found.sample)
    _plan(t, figures, found)
    _calibrated(t, found, figures)
