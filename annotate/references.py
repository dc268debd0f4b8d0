"""The authoring page as an admin opens it: a case's reference answer pasted or edited, and its rubric's validation.

An admin picks any case, reads its newest rubric version with the validation's reasons beside each
criterion, and pastes or edits the case's reference answer (db.rubrics.references.set_reference: checked,
audited by digest). Annotators open the authoring page itself (annotate/authoring.py).
"""

from __future__ import annotations

import streamlit as st

from db import rubrics
from db.rubrics.references import reference_cases, reference_for, set_reference
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError
from ui import shell, widgets
from ui.keys import widget_key
from ui.rubric_quality import show_quality, show_validation_line, version_quality
from ui.shell import t
from ui.text import plain

PICK_KEY = "annotate_references_pick"


def render() -> None:
    user = shell.require_user(Role.admin)
    st.title(t("rubric_quality.admin_title"))
    st.caption(t("rubric_quality.admin_intro"))
    with shell.db_session(read_only=True) as session:
        cases = reference_cases(session, user)
    if not cases:
        st.info(t("rubric_quality.no_cases"))
        return
    names = {pk: case_id for pk, case_id, _has in cases}
    marks = {
        pk: t("rubric_quality.case_option" if has else "rubric_quality.case_option_missing", case=case_id)
        for pk, case_id, has in cases
    }
    case_pk = st.selectbox(t("rubric_quality.pick_case"), list(names), format_func=marks.__getitem__, key=PICK_KEY)
    with shell.db_session(read_only=True) as session:
        reference = reference_for(session, user, case_pk)
        latest = rubrics.latest_version(session, case_pk)
        criteria = rubrics.criteria_of(session, latest.id) if latest is not None else []
    left, right = st.columns([1, 1], gap="medium")
    with left:
        _editor(user, case_pk, reference)
    with right:
        if latest is None:
            st.caption(t("rubric_quality.no_rubric"))
            return
        listed = [(c.criterion_id, c.text, c.position) for c in criteria]
        quality, judge, _case = version_quality(user, latest.id, names[case_pk], listed)
        st.markdown("**" + t("rubric_quality.version_line", version=latest.version, n=len(criteria)) + "**")
        show_validation_line(judge, sum(bool(q.reasons) for q in quality.values()))
        for criterion in criteria:
            st.markdown(f"**{criterion.position}.** {plain(criterion.text)}")
            show_quality(quality.get(criterion.criterion_id))


def _editor(user, case_pk: int, reference: str | None) -> None:
    with st.form(widget_key("annotate_reference_form", case_pk), border=True):
        text = st.text_area(
            t("rubric_quality.reference_title"), value=reference or "", height=420, key=widget_key("reference", case_pk)
        )
        saved = st.form_submit_button(t("rubric_quality.save_reference"), type="primary")
    if not saved:
        return
    try:
        with shell.db_session() as session:
            written = set_reference(session, user, case_pk, text)
    except ClinConsensusError as error:
        widgets.show_error(error)
        return
    st.success(
        t("rubric_quality.reference_saved" if written.inserted or written.replaced else "rubric_quality.unchanged")
    )
