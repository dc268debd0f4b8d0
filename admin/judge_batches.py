"""Batch files on the judge runs page: prepare the requests of a judge or generate run as an OpenAI Batch
JSONL file, download it, and upload the results an offline engine wrote (docs/REFERENCE.md §3.8).

The export and the import are `judge.batch`'s, the same as the command line's; the batch folder lives in
the server's data folder (`batches/`, beside the audit key), recorded in the batch's run. Admins only.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

import streamlit as st

from analysis.prompt import TEMPLATES
from db.rules.config import get_settings
from db.rules.errors import ClinConsensusError
from db.store.models import User
from db.work import judge_runs
from judge.batch import export_generate_batch, export_judge_batch, import_batch
from judge.batch_files import REQUESTS_NAME
from judge.generate import CASE_SCOPES, GenerateOptions
from judge.runner import RunOptions
from ui import shell, widgets

KINDS = ("judge", "generate")


def batch_root() -> Path:
    """Where the page writes batches: `batches/` in the data folder (beside the audit key file)."""
    return get_settings().audit_key_path().parent / "batches"


def _export_form(user: User, models: list[str], t: shell.Translator) -> None:
    with st.form("batch_export_form", clear_on_submit=False):
        left, right = st.columns(2)
        kind = left.radio(
            t("batch.page.kind"), KINDS, format_func=lambda k: t(f"judge.kind.{k}"), key="batch_kind", horizontal=True
        )
        model = right.text_input(t("batch.page.model"), help=t("batch.page.model.help"), key="batch_model")
        name = left.text_input(t("batch.page.name"), help=t("batch.page.name.help"), key="batch_name")
        template = right.selectbox(
            t("judge.form.template"), list(TEMPLATES), format_func=lambda n: t(f"judge.form.template.{n}"), key="bt"
        )
        chosen = left.multiselect(
            t("judge.form.models"), models, placeholder=t("judge.form.models.all"), key="batch_models"
        )
        cases = right.selectbox(
            t("generate.form.cases"), CASE_SCOPES, format_func=lambda v: t(f"generate.form.cases.{v}"), key="bc"
        )
        submitted = st.form_submit_button(t("batch.page.export"), type="primary", icon=":material/download:")
    if not submitted:
        return
    directory = batch_root() / f"{kind}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        if kind == "judge":
            options = RunOptions(
                base_url=[], model=model.strip(), judge=name.strip() or None, template=template, models=list(chosen)
            )
            exported = export_judge_batch(shell.engine(), directory, options, by=user)
        else:
            generate = GenerateOptions(base_url=[], model=model.strip(), stored_as=name.strip() or None, cases=cases)
            exported = export_generate_batch(shell.engine(), directory, generate, by=user)
    except ClinConsensusError as error:
        widgets.show_error(error)
        return
    if exported.run is None:
        st.info(t("batch.page.nothing"))
    elif exported.requests == 0:
        st.success(t("batch.page.exported_cached", n=exported.from_cache, id=exported.run))
    else:
        st.success(t("batch.page.exported", id=exported.run, n=exported.requests, reasks=exported.reasks))


def _batch_runs(user: User) -> list[dict]:
    with shell.db_session(read_only=True) as session:
        runs = [judge_runs.run_summary(run) for run in judge_runs.list_runs(session, user)]
    return [run for run in runs if (run["params"] or {}).get("batch")]


def _run_label(t: shell.Translator, run: dict) -> str:
    batch = run["params"]["batch"]
    return t(
        "batch.page.run",
        id=run["id"],
        kind=t(f"judge.kind.{run['kind']}"),
        judge=run["judge"],
        n=batch.get("requests", 0),
        status=t(f"judge.status.{run['status']}"),
    )


_IMPORTED = "batch_imported_said"


def _results(user: User, t: shell.Translator) -> None:
    said = st.session_state.pop(_IMPORTED, None)
    if said is not None:
        st.success(widgets.said(said))
    runs = _batch_runs(user)
    if not runs:
        st.caption(t("batch.page.none"))
        return
    run = st.selectbox(t("batch.page.pick"), runs, format_func=lambda r: _run_label(t, r), key="batch_pick")
    if run is None:
        return
    if not run["params"]["batch"].get("dir"):
        st.caption(t("batch.page.from_cache"))
        return
    directory = Path(run["params"]["batch"]["dir"])
    requests = directory / REQUESTS_NAME
    if requests.is_file():
        st.download_button(
            t("batch.page.download"),
            data=requests.read_bytes(),
            file_name=REQUESTS_NAME,
            mime="application/jsonl",
            key=f"batch_download_{run['id']}",
            icon=":material/download:",
        )
    else:
        st.warning(t("batch.page.missing", path=widgets.plain(str(directory))))
        return
    upload = widgets.file_upload(t("batch.page.upload"), key=f"batch_upload_{run['id']}")
    if upload is None or not st.button(t("batch.page.import"), type="primary", key=f"batch_import_{run['id']}"):
        return
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder) / "results.jsonl"
        results.write_bytes(upload.getvalue())
        try:
            imported = import_batch(shell.engine(), run["kind"], results, directory, by=user)
        except ClinConsensusError as error:
            widgets.show_error(error)
            return
    # Shown after the rerun, so the batch's status above and the history below already tell the import.
    st.session_state[_IMPORTED] = imported.said()
    st.rerun()


def section(user: User, models: list[str], t: shell.Translator) -> None:
    """The batch files part of the judge runs page."""
    st.subheader(t("batch.page.heading"))
    st.caption(t("batch.page.intro"))
    _export_form(user, models, t)
    _results(user, t)
