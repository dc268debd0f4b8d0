"""Judge runs: start an LLM judge, or a candidate model's answers (generate), on OpenAI-compatible endpoints;
follow them live, cancel them, read the history.

Several endpoints (one URL a line) share a run, each with its own concurrency limit. A run executes
in a process of its own (`clinconsensus judge resume ID`), so it survives this page; the page
follows its record (refreshed every two seconds) and stops it through the record's cancel flag. The
API key is read by that process from the environment variable the admin names here; the key itself
never reaches the page, the record or the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd
import streamlit as st

from admin import judge_batches
from analysis.prompt import TEMPLATES
from db.rules.config import database_url
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError
from db.store.models import User
from db.work import judge_runs, progress as progress_queries
from judge.draft import CASE_SCOPES as DRAFT_CASE_SCOPES, DraftOptions, create_draft_run
from judge.generate import CASE_SCOPES, GenerateOptions, create_generate_run
from judge.runner import RunOptions, create_run, launch_run
from judge.validate import RUBRIC_CHOICES, ValidateOptions, create_validation_run
from ui import shell, widgets
from ui.narrow_window import fold_sidebar_when_narrow
from ui.times import local_time

ACTIVE = ("pending", "running", "interrupted")
DASHBOARD_PATH = "analysis-dashboard"
HISTORY_COLUMNS = (
    "id",
    "kind",
    "status",
    "judge",
    "model",
    "items",
    "done",
    "cached",
    "parse_failures",
    "truncated",
    "empty",
    "errors",
    "retries",
    "prompt_tokens",
    "completion_tokens",
    "wall_seconds",
    "items_per_second",
    "created_by",
    "created_at",
)
#: The history's columns in view (the rest in its "all columns" table), and the narrow ones among them.
HISTORY_SHOWN = (
    "id",
    "kind",
    "status",
    "judge",
    "judged_models",
    "items",
    "done",
    "errors",
    "wall_seconds",
    "created_at",
)
HISTORY_NARROW = ("id", "kind", "status", "items", "done", "errors", "wall_seconds")


def _models(user: User) -> list[str]:
    with shell.db_session(read_only=True) as session:
        return progress_queries.model_names(session, actor=user)


def _urls(text: str) -> list[str]:
    """The endpoints of a text area, one URL a line."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


@dataclass
class EndpointFields:
    """The fields every run form on endpoints asks for, in two columns (URLs and concurrency on the left,
    the served model and the API-key variable on the right); the form adds its own fields to `left` and
    `right`, then `no_thinking` last, and builds its options with `**fields.options()`."""

    form: str
    left: Any
    right: Any
    base_url: str = ""
    model: str = ""
    key_env: str = ""
    concurrency: int = 8
    thinking: bool = True

    @classmethod
    def draw(cls, form: str, t: shell.Translator, model_help: str) -> EndpointFields:
        left, right = st.columns(2)
        fields = cls(form, left, right)
        fields.base_url = left.text_area(
            t("judge.form.base_url"),
            placeholder=t("judge.form.base_url.placeholder"),
            help=t("judge.form.base_url.help"),
            key=f"{form}_base_url",
            height=80,
        )
        fields.model = right.text_input(t("judge.form.model"), help=t(model_help), key=f"{form}_model")
        fields.key_env = right.text_input(
            t("judge.form.api_key_env"), help=t("judge.form.api_key_env.help"), key=f"{form}_key_env"
        )
        fields.concurrency = int(
            left.number_input(
                t("judge.form.concurrency"), min_value=1, max_value=512, value=8, step=1, key=f"{form}_concurrency"
            )
        )
        return fields

    def judge_name(self, t: shell.Translator, key: str) -> str | None:
        """The judge's name for its decisions (judge and validation runs; default: the model)."""
        return self.left.text_input(t("judge.form.judge"), help=t("judge.form.judge.help"), key=key).strip() or None

    def no_thinking(self, column, t: shell.Translator) -> None:
        """Qwen3's thinking switched off (the form's last field)."""
        self.thinking = not column.checkbox(
            t("judge.form.no_thinking"), help=t("judge.form.no_thinking.help"), key=f"{self.form}_no_thinking"
        )

    def options(self) -> dict[str, Any]:
        """The endpoint options as keyword arguments of the run's options class."""
        return {
            "base_url": _urls(self.base_url),
            "model": self.model.strip(),
            "api_key_env": self.key_env.strip() or None,
            "concurrency": self.concurrency,
            "thinking": self.thinking,
        }


def _start(run_id_of, options, user: User, t: shell.Translator, form: str = "judge") -> None:
    """Records the run, starts its process and says so; a refusal is shown and nothing starts."""
    try:
        run_id = run_id_of(shell.engine(), options, by=user)
    except ClinConsensusError as error:
        widgets.show_error(error)
        return
    launch_run(run_id, database_url())
    st.toast(t("judge.started", id=run_id), icon=":material/play_arrow:")
    st.session_state[f"judge_started_{form}"] = run_id


@st.fragment(run_every="2s")
def _started_here(user: User, form: str) -> None:
    """The run this form started, right under its button: started, its progress and ETA, then how it ended
    (the live section further down follows every run)."""
    run_id = st.session_state.get(f"judge_started_{form}")
    if run_id is None:
        return
    t = shell.translator()
    with shell.db_session(read_only=True) as session:
        found = [run for run in judge_runs.list_runs(session, user, limit=50) if run.id == run_id]
    if not found:
        return
    run = judge_runs.run_summary(found[0])
    with st.container(border=True):
        if run["status"] in ACTIVE:
            st.success(t("judge.started", id=run_id))
            widgets.progress_bar(run["done"], run["items"], label_key="judge.live.progress")
            st.caption(
                t("daily.judge.started_eta", status=t(f"judge.status.{run['status']}"), eta=_eta(run["eta_seconds"]))
            )
        else:
            show = st.success if run["status"] == "finished" else st.warning
            show(
                t(
                    "daily.judge.ended",
                    id=run_id,
                    status=t(f"judge.status.{run['status']}"),
                    done=f"{run['done']:,}",
                    items=f"{run['items']:,}",
                )
            )


def _start_form(user: User, t: shell.Translator) -> None:
    with st.form("judge_run_form", clear_on_submit=False):
        fields = EndpointFields.draw("judge", t, "judge.form.model.help")
        left, right = fields.left, fields.right
        judge = fields.judge_name(t, "judge_name")
        template = right.selectbox(
            t("judge.form.template"),
            list(TEMPLATES),
            format_func=lambda name: t(f"judge.form.template.{name}"),
            key="judge_template",
        )
        responses = left.selectbox(
            t("judge.form.responses"),
            ("all", "missing"),
            format_func=lambda value: t(f"judge.form.responses.{value}"),
            key="judge_responses",
        )
        models = right.multiselect(
            t("judge.form.models"), _models(user), placeholder=t("judge.form.models.all"), key="judge_models"
        )
        limit = int(
            left.number_input(
                t("judge.form.limit"),
                min_value=0,
                value=0,
                step=100,
                help=t("judge.form.limit.help"),
                key="judge_limit",
            )
        )
        fields.no_thinking(right, t)
        submitted = st.form_submit_button(t("judge.form.start"), type="primary", icon=":material/play_arrow:")
    if not submitted:
        _started_here(user, "judge")
        return
    options = RunOptions(
        **fields.options(),
        judge=judge,
        template=template,
        responses=responses,
        models=list(models),
        limit=limit or None,
    )
    _start(create_run, options, user, t)
    _started_here(user, "judge")


def _generate_form(user: User, t: shell.Translator) -> None:
    """A candidate model answers the cases; its complete answers become its responses."""
    with st.form("generate_run_form", clear_on_submit=False):
        fields = EndpointFields.draw("generate", t, "generate.form.model.help")
        left, right = fields.left, fields.right
        stored_as = right.text_input(t("generate.form.as"), help=t("generate.form.as.help"), key="generate_as")
        cases = left.selectbox(
            t("generate.form.cases"),
            CASE_SCOPES,
            format_func=lambda value: t(f"generate.form.cases.{value}"),
            key="generate_cases",
        )
        max_tokens = int(
            right.number_input(
                t("generate.form.max_tokens"), min_value=1, value=4096, step=256, key="generate_max_tokens"
            )
        )
        fields.no_thinking(left, t)
        submitted = st.form_submit_button(t("generate.form.start"), type="primary", icon=":material/play_arrow:")
    if not submitted:
        _started_here(user, "generate")
        return
    options = GenerateOptions(
        **fields.options(), stored_as=stored_as.strip() or None, cases=cases, max_tokens=max_tokens
    )
    _start(create_generate_run, options, user, t, "generate")
    _started_here(user, "generate")


def _one_decimal(value: float | None) -> str:
    return "—" if value is None or pd.isna(value) else f"{value:,.1f}"


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{rest:02d}"


@st.fragment(run_every="2s")
def _live(user: User) -> None:
    """Runs in progress: a bar with ETA and counts, and a cancel button each (refreshed every 2 s)."""
    t = shell.translator()
    with shell.db_session(read_only=True) as session:
        runs = [judge_runs.run_summary(run) for run in judge_runs.list_runs(session, user, limit=50)]
    # A batch's run is answered by an upload (the batch section), never resumed or followed here.
    active = [run for run in runs if run["status"] in ACTIVE and not (run["params"] or {}).get("batch")]
    following = {run["id"] for run in active}
    ended = st.session_state.get("judge_live_following", set()) - following
    st.session_state["judge_live_following"] = following
    if ended:
        # A run this page followed has ended: the whole page reruns so the history shows its end state.
        st.rerun(scope="app")
    if not active:
        st.caption(t("judge.live.none"))
    for run in active:
        with st.container(border=True):
            widgets.show_text(
                t(
                    "judge.live.generate_title" if run["kind"] == "generate" else "judge.live.title",
                    id=run["id"],
                    judge=run["judge"],
                    model=run["model"],
                    status=t(f"judge.status.{run['status']}"),
                )
            )
            widgets.progress_bar(run["done"], run["items"], label_key="judge.live.progress")
            st.caption(
                t(
                    "judge.live.figures",
                    eta=_eta(run["eta_seconds"]),
                    failures=run["parse_failures"],
                    errors=run["errors"],
                    retries=run["retries"],
                    rate=f"{run['items_per_second']:.1f}" if run["items_per_second"] else "—",
                )
            )
            if run["kind"] == "generate":
                st.caption(t("generate.live.figures", truncated=run["truncated"], empty=run["empty"]))
            _shares(run, t)
            left, right = st.columns(2)
            if run["status"] == "interrupted" and left.button(
                t("judge.live.resume"), key=f"resume_{run['id']}", icon=":material/replay:"
            ):
                # Its process died (killed, machine restarted): a new one continues; answered items are cached.
                launch_run(run["id"], database_url())
                st.toast(t("judge.live.resumed", id=run["id"]))
            if right.button(t("judge.live.cancel"), key=f"cancel_{run['id']}", icon=":material/stop:"):
                with shell.db_session() as session:
                    judge_runs.request_cancel(session, user, run["id"])
                st.toast(t("judge.live.cancelled", id=run["id"]))


def _shares(run: dict, t: shell.Translator) -> None:
    """Each endpoint's share of a run spread over several."""
    if len(run["endpoints"]) < 2:
        return
    for share in run["endpoints"]:
        key = "judge.live.endpoint_left_out" if share.get("left_out") else "judge.live.endpoint"
        reason = widgets.said(share.get("left_out") or "")
        st.caption(t(key, url=widgets.plain(share["base_url"]), done=share["done"], reason=reason))


def _judged_models(run: dict, t: shell.Translator) -> str:
    """Which models' responses a judge run graded: those it was given, or all; a generate run grades none."""
    if run["kind"] == "generate":
        return "—"
    models = run["params"].get("models") or []
    return t("admin.export.left_out.list_sep").join(models) if models else t("daily.judge.all_models")


def _history(user: User, t: shell.Translator) -> None:
    with shell.db_session(read_only=True) as session:
        runs = [judge_runs.run_summary(run) for run in judge_runs.list_runs(session, user)]
    if not runs:
        st.info(t("judge.history.empty"))
        return
    frame = pd.DataFrame(runs)[list(HISTORY_COLUMNS)]
    frame["status"] = [t(f"judge.status.{status}") for status in frame["status"]]
    frame["kind"] = [t(f"judge.kind.{kind}") for kind in frame["kind"]]
    # Times in the reader's zone, durations and rates with one decimal, "—" where there is none yet.
    frame["created_at"] = [local_time(datetime.fromisoformat(at) if at else None) for at in frame["created_at"]]
    for name in ("wall_seconds", "items_per_second"):
        frame[name] = [_one_decimal(value) for value in frame[name]]
    frame["created_by"] = [name or "—" for name in frame["created_by"]]
    frame.insert(5, "judged_models", [_judged_models(run, t) for run in runs])
    headers = {name: t(f"judge.column.{name}") for name in (*HISTORY_COLUMNS, "judged_models")}
    # The page's width holds the columns a reader compares runs by; every figure is one click away.
    st.dataframe(
        frame[list(HISTORY_SHOWN)].rename(columns=headers),
        hide_index=True,
        width="stretch",
        column_config={headers[name]: st.column_config.Column(width="small") for name in HISTORY_NARROW},
    )
    with st.expander(t("daily.judge.history.all_columns")):
        st.dataframe(frame.rename(columns=headers), hide_index=True, width="stretch")
    failed = [run for run in runs if run["message"]]
    for run in failed[:5]:
        st.caption(t("judge.history.message", id=run["id"]))
        widgets.show_text(widgets.said(run["message"], markdown=False))


def _validate_form(user: User, t: shell.Translator) -> None:
    """A rubric validation run (docs/REFERENCE.md §4.2): the judge grades each case's anchor answers."""
    with st.form("validate_run_form", clear_on_submit=False):
        fields = EndpointFields.draw("validate", t, "judge.form.model.help")
        judge = fields.judge_name(t, "validate_judge")
        rubric = fields.right.selectbox(
            t("rubric_quality.form.rubric"),
            RUBRIC_CHOICES,
            format_func=lambda value: t(f"rubric_quality.form.rubric.{value}"),
            key="validate_rubric",
        )
        fields.no_thinking(fields.right, t)
        submitted = st.form_submit_button(t("rubric_quality.form.start"), type="primary", icon=":material/play_arrow:")
    if submitted:
        options = ValidateOptions(**fields.options(), judge=judge, rubric=rubric)
        _start(create_validation_run, options, user, t)


def _draft_form(user: User, t: shell.Translator) -> None:
    """A drafting run (docs/REFERENCE.md §4.3): an LLM drafts each selected case's criteria for its author.

    The same run `draft rubrics` records; its process (`judge resume ID`) drafts, nothing is submitted."""
    with st.form("draft_run_form", clear_on_submit=False):
        fields = EndpointFields.draw("draft", t, "judge.form.model.help")
        left, right = fields.left, fields.right
        generator = right.text_input(t("drafts.form.as"), help=t("drafts.form.as.help"), key="draft_as")
        cases = left.selectbox(
            t("drafts.form.cases"),
            DRAFT_CASE_SCOPES,
            format_func=lambda value: t(f"drafts.form.cases.{value}"),
            key="draft_cases",
        )
        template = right.text_input(
            t("drafts.form.template"), help=t("drafts.form.template.help"), key="draft_template"
        )
        max_tokens = int(
            left.number_input(t("generate.form.max_tokens"), min_value=1, value=4096, step=256, key="draft_max_tokens")
        )
        fields.no_thinking(right, t)
        submitted = st.form_submit_button(t("drafts.form.start"), type="primary", icon=":material/play_arrow:")
    if submitted:
        options = DraftOptions(
            **fields.options(),
            generator=generator.strip() or None,
            cases=cases,
            template=template.strip() or None,
            max_tokens=max_tokens,
        )
        _start(create_draft_run, options, user, t, "draft")
    _started_here(user, "draft")


def render() -> None:
    user = shell.require_user(Role.admin)
    t = shell.translator()
    fold_sidebar_when_narrow()
    st.title(t("judge.title"))
    st.caption(t("judge.intro"))
    _start_form(user, t)
    st.subheader(t("generate.heading"))
    st.caption(t("generate.intro"))
    _generate_form(user, t)
    judge_batches.section(user, _models(user), t)
    st.subheader(t("rubric_quality.form.heading"))
    st.caption(t("rubric_quality.form.intro"))
    _validate_form(user, t)
    st.subheader(t("drafts.form.heading"))
    st.caption(t("drafts.form.intro"))
    _draft_form(user, t)
    st.subheader(t("judge.live.heading"))
    _live(user)
    st.subheader(t("judge.history.heading"))
    _history(user, t)
    # Judge fidelity (macro-F1 against each group and gold) is in the dashboard's judges tab.
    st.markdown(t("judge.fidelity_link", url=DASHBOARD_PATH))
