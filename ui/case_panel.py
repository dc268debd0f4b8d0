"""The case as both annotator pages show it: the shared case card, with taxonomy names in the user's language."""

from __future__ import annotations

import streamlit as st

from db.rubrics import CaseView
from db.taxonomy import get_taxonomy
from ui import shell, widgets


def case_panel(case: CaseView, *, height: int) -> None:
    """The case card in a scrolling box of `height` pixels, then its theme and specialty labels."""
    taxonomy = get_taxonomy()
    lang = shell.lang()
    shown = {
        "case_id": case.case_id,
        "difficulty": taxonomy.name("difficulties", case.difficulty, lang),
        "task": taxonomy.name("task_themes", taxonomy.theme_or_raw(case.task), lang) if case.task else "",
        "subject": case.subject,
        "user_role": case.user_role,
        "clinical_context": case.clinical_context,
        "user_request": case.user_request,
    }
    with st.container(height=height, border=False):
        widgets.case_card(shown)
        themes = [taxonomy.name("task_themes", taxonomy.theme_or_raw(label), lang) for label in case.task_labels]
        for key, values in (("annotate.case.themes", themes), ("annotate.case.specialties", case.subject_labels)):
            if values:
                st.caption(f"{shell.t(key)}：" + widgets.plain("、".join(values)))
