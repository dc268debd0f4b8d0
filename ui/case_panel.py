"""The case as both annotator pages show it: the shared case card, with taxonomy names in the user's language."""

from __future__ import annotations

import streamlit as st

from db.rubrics.authoring import CaseView
from db.rules.taxonomy import get_taxonomy
from ui import shell, widgets

#: Keeps the case pane in view while the page beside it scrolls (its column is stretched to the row's height).
_STICKY_STYLE = (
    "<style>"
    '[data-testid="stColumn"]:has(.st-key-case_pane_sticky) { align-self: stretch; }'
    # On the wrapper Streamlit puts around a keyed container: the container alone has no room to move.
    "div:has(> .st-key-case_pane_sticky) { position: sticky; top: 4rem; z-index: 2; }"
    "</style>"
)


def case_panel(case: CaseView, *, height: int, sticky: bool = False, box_key: str | None = None) -> None:
    """The case card in a scrolling box of `height` pixels, then its theme and specialty labels.

    `sticky`: the box stays in view while the page beside it scrolls (for a side-by-side layout).
    `box_key`: a key for the scrolling box, for a page that sizes it by style."""
    if sticky:
        st.html(_STICKY_STYLE)
        with st.container(key="case_pane_sticky"):
            _case_box(case, height=height, key=box_key)
    else:
        _case_box(case, height=height, key=box_key)


def _case_box(case: CaseView, *, height: int, key: str | None = None) -> None:
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
    with st.container(height=height, border=False, key=key):
        widgets.case_card(shown)
        themes = [taxonomy.name("task_themes", taxonomy.theme_or_raw(label), lang) for label in case.task_labels]
        specialties = [widgets.subject_text(label) for label in case.subject_labels]
        for key, values in (("annotate.case.themes", themes), ("annotate.case.specialties", specialties)):
            if values:
                st.caption(f"{shell.t(key)}：" + widgets.plain("、".join(values)))
