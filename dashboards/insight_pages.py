"""Admin pages of the analysis depth: criterion reliability (with sending criteria back to their author)
and the judge's errors beside the physicians' labels.

They read the decision grid the dashboard keeps per data version (`ui.shared_grid`: one grid
per process, a cheap fingerprint query says which) and the figures of `analysis.reliability`
computed from it once per version in the background; model names and both groups' labels are on
these pages, so they are for admins only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from analysis import (
    figures as figure_builders,
    metrics,
    ranking_fidelity,
    score_section,
)
from analysis.background import BackgroundValue
from analysis.exports.csv_cells import csv_bytes
from analysis.grid import MET, NOT_MET, DecisionGrid
from analysis.loader import load_criterion_texts
from analysis.reliability.criteria import flagged_cases, flagged_criteria
from analysis.reliability.insights import BasisViews, Insights, build_insights
from analysis.reliability.judge_errors import judge_errors
from analysis.reliability.thresholds_and_counts import (
    FALSE_NEGATIVE,
    FALSE_POSITIVE,
    FLAGS,
    KAPPA_THRESHOLD,
    MIN_ALIGNED,
    MIN_DISAGREEMENTS,
    SLICE_DIMENSIONS,
    UNRELIABLE,
)
from db.access.export_records import newest_sft_holdout
from db.access.policies import StatisticsPolicy, authorize
from db.review.criterion_return import send_back_criteria, send_back_target
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError
from db.rules.gold import default_basis
from db.store.models import User
from db.work.judge_error_detail import JudgeErrorDetail, judge_error_detail
from ui import gold_basis, shared_grid, shell, table_view
from ui.text import plain
from ui.widgets import show_error, show_text

PAGE_RESAMPLES = 300
SHOWN_ROWS = 500
LABEL_TEXT = {MET: "insights.label.met", NOT_MET: "insights.label.not_met"}


State = tuple[DecisionGrid, Insights, pd.DataFrame, list[str]]


def _build_state(grid: DecisionGrid) -> State:
    # The models in the dashboard's order (its default view ranks them by CACS@k on gold).
    cacs = metrics.model_scores(grid, metrics.response_scores(grid), metrics.DEFAULT_K)["cacs_at_k"]
    order = figure_builders.ranked_models(cacs, grid.models)
    return grid, build_insights(grid, resamples=PAGE_RESAMPLES), metrics.judge_fidelity(grid), order


def _build(grid: DecisionGrid) -> BasisViews[State]:
    return BasisViews(grid, _build_state, eager=(default_basis(),))


@st.cache_resource(show_spinner=False)
def _kept_state() -> BackgroundValue[BasisViews[State]]:
    """The analysis depth and the judges' fidelity per gold basis (the default one at once), built per data version
    in the background from the grid every analysis page shares (the grid itself is not copied)."""
    return shared_grid.derived(_build, name="insights-view")


def _load(t: shell.Translator) -> State | None:
    """The newest state built so far on the basis chosen (its caption under the title); None (with a note on the
    page) while the first one is being built."""
    snapshot = shared_grid.newest(_kept_state(), t)
    if snapshot is None:
        return None
    with st.sidebar:
        basis = gold_basis.basis_toggle(t, "insights_provisional")
    st.caption(gold_basis.counts_caption(t, basis, snapshot.value.counts))
    return snapshot.value.view(basis)


def _admin() -> User:
    with shell.db_session(read_only=True) as session:
        return authorize(session, shell.require_user(Role.admin), StatisticsPolicy.see_group_figures())


def _download(t: shell.Translator, name: str, frame: pd.DataFrame) -> None:
    st.download_button(
        t("analysis.download_csv"),
        data=lambda: csv_bytes(frame),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"insights_csv_{name}",
        on_click="ignore",
    )


def _label(t: shell.Translator, value) -> str:
    return t(LABEL_TEXT[int(value)]) if int(value) in LABEL_TEXT else "—"


# Criterion reliability ----------------------------------------------------------------------------


def _reason(t: shell.Translator, row) -> str:
    """A suggested comment for the author, from the numbers that flagged the criterion."""
    if row["flag"] == UNRELIABLE:
        return t(
            "insights.reason.unreliable",
            kappa=f"{row['kappa']:.2f}",
            disagree=int(row["n_disagree"]),
            n=int(row["n_aligned"]),
        )
    return t(f"insights.reason.{row['flag']}", n=int(row["n_gold"]))


def render_criteria() -> None:
    user = _admin()
    t = shell.translator()
    st.title(t("insights.criteria.title"))
    state = _load(t)
    if state is None:
        return
    _, insights, _, _ = state
    table = insights.criteria
    st.caption(
        t(
            "insights.criteria.rule",
            kappa=f"{KAPPA_THRESHOLD:.2f}",
            n=MIN_ALIGNED,
            disagree=MIN_DISAGREEMENTS,
        )
    )
    if table.empty:
        st.info(t("insights.criteria.empty"))
        return
    counts = table["flag"].value_counts()
    evaluated = int((table["n_aligned"] >= MIN_ALIGNED).sum())
    columns = st.columns(4)
    columns[0].metric(t("insights.metric.evaluated"), f"{evaluated:,}")
    for column, flag in zip(columns[1:], FLAGS):
        column.metric(t(f"insights.flag.{flag}"), f"{int(counts.get(flag, 0)):,}")
    if evaluated:
        st.plotly_chart(figure_builders.kappa_distribution(insights, t), key="insights_kappa", width="stretch")
    else:
        st.info(t("insights.criteria.too_few", n=MIN_ALIGNED))

    chosen = st.multiselect(
        t("insights.criteria.show_flags"),
        list(FLAGS),
        default=list(FLAGS),
        format_func=lambda flag: t(f"insights.flag.{flag}"),
        key="insights_flags",
    )
    flagged = flagged_criteria(table)
    flagged = flagged[flagged["flag"].isin(chosen)]
    if flagged.empty:
        st.success(t("insights.criteria.none_flagged"))
        return
    texts = load_criterion_texts(shell.engine(), flagged["case_id"].head(SHOWN_ROWS).unique())
    shown = flagged.head(SHOWN_ROWS).merge(texts, on=["case_id", "criterion_id"], how="left")
    shown = shown.assign(flag_name=[t(f"insights.flag.{flag}") for flag in shown["flag"]])
    st.subheader(t("insights.criteria.flagged"))
    table_view.show(
        t,
        shown[
            [
                "case_id",
                "criterion_id",
                "text",
                "flag_name",
                "kappa",
                "agreement",
                "n_aligned",
                "n_disagree",
                "prevalence_g1",
                "prevalence_g2",
                "gold_met_rate",
            ]
        ],
        column_config={"text": st.column_config.TextColumn(t("insights.column.text"), width="large")},
    )
    if len(flagged) > SHOWN_ROWS:
        st.caption(t("analysis.rows_shown", shown=SHOWN_ROWS, total=f"{len(flagged):,}"))
    _download(t, "flagged_criteria", flagged)
    st.subheader(t("insights.criteria.cases"))
    cases = flagged_cases(table[table["flag"].isin(chosen)])
    table_view.show(t, cases.head(SHOWN_ROWS))
    _send_back_form(t, user, flagged, cases)


def _send_back_form(t: shell.Translator, user: User, flagged: pd.DataFrame, cases: pd.DataFrame) -> None:
    st.subheader(t("insights.send_back.title"))
    st.caption(t("insights.send_back.help"))
    case_id = st.selectbox(t("insights.send_back.case"), cases["case_id"].tolist(), key="insights_send_case")
    if not case_id:
        return
    try:
        with shell.db_session(read_only=True) as session:
            target = send_back_target(session, user, case_id)
    except ClinConsensusError as error:
        show_error(error)
        return
    if target.open_revision:
        st.info(t("insights.send_back.open", version=target.version + 1, status=target.open_revision))
        return
    mine = flagged[flagged["case_id"] == case_id]
    texts = load_criterion_texts(shell.engine(), [case_id]).set_index("criterion_id")["text"]
    with st.form(f"insights_send_back_{case_id}"):
        comments = {}
        for _, row in mine.iterrows():
            criterion_id = row["criterion_id"]
            flag_name = t(f"insights.flag.{row['flag']}")
            st.markdown(f"**{plain(criterion_id)}** · {plain(flag_name)}")
            show_text(texts.get(criterion_id, ""))
            comments[criterion_id] = st.text_area(
                t("insights.send_back.comment_for", criterion=criterion_id),
                value=_reason(t, row),
                key=f"insights_comment_{case_id}_{criterion_id}",
            )
        overall = st.text_area(t("insights.send_back.overall"), key=f"insights_overall_{case_id}")
        author = st.text_input(
            t("insights.send_back.author"), value=target.author or "", key=f"insights_author_{case_id}"
        )
        submitted = st.form_submit_button(t("insights.send_back.submit"), type="primary")
    if submitted:
        try:
            with shell.db_session() as session:
                result = send_back_criteria(
                    session,
                    user,
                    case_id,
                    comments,
                    seen_version_id=target.rubric_version_id,
                    comment=overall,
                    author=author.strip() or None,
                )
        except ClinConsensusError as error:
            show_error(error)
            return
        st.success(
            t(
                "insights.send_back.done",
                case=plain(result.case_id),
                version=result.version,
                author=plain(result.author),
                n=len(result.criteria),
            )
        )


# Judge errors -------------------------------------------------------------------------------------


def render_judge_errors() -> None:
    user = _admin()
    t = shell.translator()
    st.title(t("insights.judges.title"))
    state = _load(t)
    if state is None:
        return
    grid, insights, judges, order = state
    if not grid.judges:
        st.info(t("analysis.no_judges"))
        return
    _fidelity_sections(t, grid, insights, judges, order)
    _errors_section(t, user, grid)


def _fidelity_sections(
    t: shell.Translator,
    grid: DecisionGrid,
    insights: Insights,
    judges: pd.DataFrame,
    order: list[str],
) -> None:
    """How close each judge comes to the physicians: overall, in ranking, by model and by slice."""
    ceiling = insights.human_ceiling
    st.caption(
        t(
            "insights.judges.ceiling",
            value="—" if np.isnan(ceiling["pooled_mf1"]) else f"{ceiling['pooled_mf1']:.3f}",
            n=f"{ceiling['n_decisions']:,}",
        )
    )
    st.plotly_chart(
        figure_builders.judges_against_ceiling(insights, judges, t), key="insights_ceiling", width="stretch"
    )
    _ranking_section(t, grid)
    st.plotly_chart(
        table_view.titled(figure_builders.judges_by_model_heatmap(insights, t, order), t, y="analysis.axis.judge"),
        key="insights_by_model",
        width="stretch",
    )
    table_view.show(t, insights.judges_by_model)
    _download(t, "judges_by_model", insights.judges_by_model)
    dimension = st.selectbox(
        t("insights.judges.dimension"),
        list(SLICE_DIMENSIONS),
        format_func=lambda value: t(f"insights.dimension.{value}"),
        key="insights_dimension",
    )
    st.plotly_chart(
        table_view.titled(
            figure_builders.judge_slice_bars(insights, t, dimension), t, x=f"insights.dimension.{dimension}"
        ),
        key="insights_judge_slice",
        width="stretch",
    )
    _download(t, "judge_slices", insights.judge_slices)


def _errors_section(t: shell.Translator, user: User, grid: DecisionGrid) -> None:
    """One judge's false positives or negatives, filtered by model, and the chosen error in full."""
    st.subheader(t("insights.judges.errors"))
    judge = st.selectbox(t("insights.judges.judge"), sorted(grid.judges), key="insights_judge")
    kind = st.radio(
        t("insights.judges.kind"),
        [FALSE_POSITIVE, FALSE_NEGATIVE],
        format_func=lambda value: t(f"insights.kind.{value}"),
        horizontal=True,
        key="insights_kind",
    )
    models = st.multiselect(t("analysis.filter.models"), list(grid.models), key="insights_models")
    errors = judge_errors(grid, judge)
    errors = errors[errors["kind"] == kind]
    if models:
        errors = errors[errors["model"].isin(models)]
    st.caption(t("insights.judges.count", n=f"{len(errors):,}"))
    if errors.empty:
        return
    shown = errors.head(SHOWN_ROWS).reset_index(drop=True)
    display = shown.assign(
        **{column: [_label(t, value) for value in shown[column]] for column in ("group1", "group2", "gold", "judge")}
    )
    table_view.show(t, display.drop(columns=["kind"]), hidden=["response_id"])
    _download(t, f"judge_errors_{kind}", errors)
    records = shown.to_dict("records")
    choices: list[int] = list(range(len(records)))
    index = st.selectbox(
        t("insights.judges.pick"),
        choices,
        format_func=lambda i: f"{records[i]['case_id']} · {records[i]['model']} · {records[i]['criterion_id']}",
        key="insights_error_row",
    )
    row = records[index if index is not None else 0]
    try:
        with shell.db_session(read_only=True) as session:
            detail = judge_error_detail(
                session, user, response_id=int(row["response_id"]), criterion_id=str(row["criterion_id"]), judge=judge
            )
    except ClinConsensusError as error:
        show_error(error)
        return
    _error_detail(t, detail, row)


def ranking_table(grid: DecisionGrid, heldout: list[str], k: int) -> pd.DataFrame:
    """Each judge's ranking fidelity over the held-out models (all models when none), then the physicians'
    ceiling (group 1's ranking against group 2's) as the last row."""
    judged = score_section.heldout_grid(grid, heldout or None)
    rows = [{"judge": judge, **values} for judge, values in ranking_fidelity.judge_ranking(judged, k).items()]
    rows.append({"judge": None, **ranking_fidelity.human_ceiling_ranking(grid, k)})
    columns = ["judge", "spearman", "kendall_tau_b", "top3", "top5", "n_models"]
    return pd.DataFrame(rows, columns=columns)


def _ranking_section(t: shell.Translator, grid: DecisionGrid) -> None:
    """Does each judge rank models as physicians do, measured on the models it was not trained on."""
    st.subheader(t("insights.ranking.title"))
    with shell.db_session(read_only=True) as session:
        exported = [model for model in newest_sft_holdout(session) if model in grid.models]
    heldout = st.multiselect(
        t("insights.ranking.heldout"),
        list(grid.models),
        default=exported,
        key="insights_heldout",
        placeholder=t("insights.ranking.heldout.none"),
    )
    if exported:
        st.caption(t("insights.ranking.from_sft", models=", ".join(exported)))
    table = ranking_table(grid, heldout, metrics.DEFAULT_K)
    table["judge"] = [t("insights.ranking.ceiling") if pd.isna(judge) else judge for judge in table["judge"]]
    st.caption(t("insights.ranking.caption", k=metrics.DEFAULT_K))
    table_view.show(t, table)


def _error_detail(t: shell.Translator, detail: JudgeErrorDetail, row: dict) -> None:
    with st.container(border=True):
        st.markdown(
            f"**{plain(t('insights.detail.case'))}** {plain(detail.case_id)} · "
            f"**{plain(t('analysis.axis.model'))}** {plain(detail.model)}"
        )
        st.caption(t("widgets.case.clinical_context"))
        show_text(detail.clinical_context)
        st.caption(t("widgets.case.user_request"))
        show_text(detail.user_request)
        st.caption(t("insights.detail.response"))
        show_text(detail.response)
        st.caption(t("insights.detail.criterion", criterion=plain(detail.criterion_id)))
        show_text(detail.criterion)
        columns = st.columns(4)
        for column, name in zip(columns, ("group1", "group2", "gold", "judge")):
            column.metric(t(f"insights.detail.{name}"), _label(t, row[name]))
        st.caption(t("insights.detail.explanation"))
        show_text(detail.explanation, empty=t("insights.detail.no_explanation"))
        if detail.labels:
            st.caption(t("insights.detail.labels"))
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            t("insights.column.group"): str(label.group_no) if label.group_no else "—",
                            t("insights.column.stage"): t(f"insights.stage.{label.stage}"),
                            t("insights.column.met"): t(
                                "insights.label.met" if label.met else "insights.label.not_met"
                            ),
                            t("insights.column.user"): label.user or "—",
                            t("insights.column.note"): label.note or "",
                        }
                        for label in detail.labels
                    ]
                ),
                hide_index=True,
                placeholder=table_view.EMPTY,
                width="stretch",
            )


# Physicians ---------------------------------------------------------------------------------------


def render_physicians() -> None:
    _admin()
    t = shell.translator()
    st.title(t("insights.physicians.title"))
    state = _load(t)
    if state is None:
        return
    _, insights, _, _ = state
    ceiling = insights.human_ceiling
    st.caption(
        t(
            "insights.judges.ceiling",
            value="—" if np.isnan(ceiling["pooled_mf1"]) else f"{ceiling['pooled_mf1']:.3f}",
            n=f"{ceiling['n_decisions']:,}",
        )
    )
    st.caption(t("insights.physicians.help", resamples=PAGE_RESAMPLES))
    if insights.annotators.empty:
        st.info(t("insights.criteria.empty"))
        return
    st.plotly_chart(
        table_view.titled(figure_builders.annotator_agreement(insights, t), t, x="analysis.column.username"),
        key="insights_annotators",
        width="stretch",
    )
    st.plotly_chart(
        table_view.titled(figure_builders.correction_rates(insights, t), t, x="analysis.column.username"),
        key="insights_corrections",
        width="stretch",
    )
    table_view.show(t, insights.annotators.drop(columns=["user_id"]))
    _download(t, "annotators", insights.annotators.drop(columns=["user_id"]))
    st.subheader(t("insights.physicians.slices"))
    dimension = st.selectbox(
        t("insights.judges.dimension"),
        list(SLICE_DIMENSIONS),
        format_func=lambda value: t(f"insights.dimension.{value}"),
        key="insights_agreement_dimension",
    )
    st.plotly_chart(
        table_view.titled(
            figure_builders.agreement_slice_bars(insights, t, dimension), t, x=f"insights.dimension.{dimension}"
        ),
        key="insights_agreement_slice",
        width="stretch",
    )
    frame = insights.agreement_slices
    shown = frame[frame["dimension"] == dimension]
    shown = shown.assign(name=table_view.value_names(dimension, shown["value"], shell.lang(), t))
    table_view.show(t, shown[["dimension", "value", "name", *shown.columns[2:-1]]], hidden=["dimension", "value"])
    _download(t, "agreement_slices", frame)


#: The analysis-depth pages: renderer, title key, icon, URL path (a stable name).
_PAGES = (
    (render_criteria, "insights.criteria.nav", ":material/rule:", "analysis-criteria"),
    (render_judge_errors, "insights.judges.nav", ":material/gavel:", "analysis-judge-errors"),
    (render_physicians, "insights.physicians.nav", ":material/groups:", "analysis-physicians"),
)


def pages(user: User) -> list[tuple[str, st.Page]]:
    """Navigation contribution: the analysis-depth pages, for admins."""
    if user.role != Role.admin:
        return []
    return [
        ("nav.section.analysis", st.Page(render, title=shell.t(title), icon=icon, url_path=path))
        for render, title, icon, path in _PAGES
    ]
