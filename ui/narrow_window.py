"""The wide pages on a narrow window: the sidebar folds away once when such a page opens below
`FOLD_BELOW_PX` (a 1024×768 laptop), so criteria keep to one line, the response picker is not cut and the
judge run history keeps its columns in view.
Streamlit folds its sidebar by itself only on phone widths; a small component of ours (`narrow_window.js`)
presses the sidebar's own fold button, once per page and browser tab, so a reader who opens it again keeps it.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

#: Windows narrower than this fold the sidebar on `FOLDING_PAGES`.
FOLD_BELOW_PX = 1280
#: The pages that fold it (url paths; DESIGN's stable names): the three workbenches, and the judge runs page, whose
#: run history compares runs across nine columns. Rubric authoring and audit keep their sidebar: their grid is laid
#: out for the width beside it.
FOLDING_PAGES = ("annotate-labeling", "review-labels", "review-adjudication", "admin-judge-runs")

_JS = (Path(__file__).with_name("narrow_window.js")).read_text(encoding="utf-8")
_component = st.components.v2.component("clinconsensus_narrow_window", js=_JS)


def fold_sidebar_when_narrow() -> None:
    """Mounts the component (renders nothing; it folds only on `FOLDING_PAGES`); call once per run of a work page."""
    _component(data={"max_width": FOLD_BELOW_PX, "pages": list(FOLDING_PAGES)}, key="narrow_window")
