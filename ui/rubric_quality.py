"""Rubric quality where physicians decide (docs/REFERENCE.md §4.2): each criterion's flags, item–rest and redundancy.

The rubric audit page and the authoring page show, under each criterion, one-line reasons: "参考答案未满足此条"
(the reference answer does not meet it), "拒答也满足此条" (a refusal meets it), "笼统就医建议也满足此条" (the
generic answer meets it), "与第 7 条判定完全一致" (its gold decisions are identical to criterion 7's), and its
item–rest correlation. Flags come from the newest validation run on the version shown (db.work.validation,
which checks who may see them); item–rest and redundancy from the shared decision grid (one build per data
version), for criteria whose text is the current approved version's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
import streamlit as st

from analysis.background import BackgroundValue
from analysis.rubric_quality import criteria_quality
from db.rules.anchors import GENERIC, REFERENCE, REFUSAL
from db.rules.gold import default_basis
from db.store.models import User
from db.work.validation import validation_of_version
from ui import shared_grid, shell
from ui.shell import t
from ui.text import plain


@dataclass
class CriterionQuality:
    """What the pages show of one criterion: reasons (catalog key, params), item–rest, and the validation's judge."""

    reasons: list[tuple[str, dict]] = field(default_factory=list)
    item_rest: float | None = None

    def lines(self) -> list[str]:
        return [t(key, **params) for key, params in self.reasons]


@st.cache_resource(show_spinner=False)
def _kept_quality() -> BackgroundValue[pd.DataFrame]:
    # On the default gold basis (final unless configured), as the report computes them.
    return shared_grid.derived(lambda grid: criteria_quality(grid.on_basis(default_basis())), name="criteria-quality")


def anchor_reasons(rows: Sequence[dict]) -> tuple[dict[str, list[tuple[str, dict]]], str | None]:
    """criterion_id → the validation's reasons, and the judge that gave them (None without a run)."""
    reasons: dict[str, list[tuple[str, dict]]] = {}
    for row in rows:
        if row["anchor"] == REFERENCE and row["met"] is False:
            reasons.setdefault(row["criterion_id"], []).insert(0, ("rubric_quality.reason.reference_not_met", {}))
        elif row["anchor"] in (REFUSAL, GENERIC) and row["met"] is True:
            reasons.setdefault(row["criterion_id"], []).append((f"rubric_quality.reason.{row['anchor']}_met", {}))
    return reasons, (rows[0]["judge"] if rows else None)


def version_quality(
    user: User, rubric_version_id: int, case_id: str, criteria: Sequence[tuple[str, str, int]]
) -> tuple[dict[str, CriterionQuality], str | None, int | None]:
    """criterion_id → CriterionQuality of a version's criteria (id, text, position), the validation's judge, and
    the version's case (its pk).

    Item–rest and redundancy are shown for criteria whose text equals the current approved version's: the
    labels they come from were made on that text."""
    with shell.db_session(read_only=True) as session:
        found = validation_of_version(session, user, rubric_version_id)
    current_texts = found.current_texts
    flagged, judge = anchor_reasons(found.rows)
    quality = {criterion_id: CriterionQuality(list(flagged.get(criterion_id, []))) for criterion_id, _, _ in criteria}
    figures = _case_figures(case_id)
    if figures is not None:
        positions = {criterion_id: position for criterion_id, _, position in criteria}
        for criterion_id, text, _position in criteria:
            if current_texts.get(criterion_id) != text or criterion_id not in figures:
                continue
            item_rest, same = figures[criterion_id]
            quality[criterion_id].item_rest = item_rest
            for other in same:
                if other in positions:
                    quality[criterion_id].reasons.append(
                        ("rubric_quality.reason.redundant", {"position": positions[other]})
                    )
    return quality, judge, found.case_pk


def _case_figures(case_id: str) -> dict[str, tuple[float | None, list[str]]] | None:
    newest = shared_grid.newest(_kept_quality(), t)
    if newest is None:
        return None
    frame = newest.value
    mine = frame[frame["case_id"] == case_id]
    return {
        criterion_id: (None if pd.isna(value) else float(value), list(same))
        for criterion_id, value, same in zip(mine["criterion_id"], mine["item_rest"], mine["redundant_with"])
    }


def _in_warning_colour(text: str) -> str:
    """Markdown of `text` (already shown as text) in the page's warning colour."""
    return ":orange[" + text + "]"


def show_quality(quality: CriterionQuality | None) -> None:
    """The criterion's reasons (one line each, in the page's warning colour) and its item–rest value."""
    if quality is None:
        return
    for line in quality.lines():
        st.markdown(_in_warning_colour(plain(line)))
    if quality.item_rest is not None:
        st.caption(t("rubric_quality.item_rest", value=f"{quality.item_rest:.2f}"))


def show_validation_line(judge: str | None, n_flagged: int) -> None:
    """One line over the criteria: which validation run the flags come from, or that there is none yet."""
    if judge is None:
        st.caption(t("rubric_quality.no_run"))
    else:
        st.caption(t("rubric_quality.run_line", judge=plain(judge), n=n_flagged))


def cited(quality: CriterionQuality | None, comment: str) -> str:
    """A criterion comment that cites the criterion's reasons (returning a rubric can name them)."""
    lines = quality.lines() if quality is not None else []
    return "；".join([*lines, comment.strip()] if comment.strip() else lines)


def show_reference(text: str | None) -> None:
    """The case's reference answer in a closed expander (shown only to those db.rubrics.references allows)."""
    with st.expander(t("rubric_quality.reference_title"), expanded=False):
        if text:
            st.text(text)
        else:
            st.caption(t("rubric_quality.no_reference"))


def show_own_validation(user: User, rubric_version_id: int, version: int, case_id: str, criteria: Sequence) -> None:
    """The authoring page: the validation of the author's own version, one line per flagged criterion."""
    listed = [(c.criterion_id, c.text, c.position) for c in criteria]
    quality, judge, _case = version_quality(user, rubric_version_id, case_id, listed)
    flagged = [(c.position, quality[c.criterion_id]) for c in criteria if quality[c.criterion_id].reasons]
    with st.expander(t("rubric_quality.own_validation", version=version), expanded=bool(flagged)):
        show_validation_line(judge, len(flagged))
        for position, found in flagged:
            line = t("rubric_quality.flag_line", position=position, reasons="；".join(found.lines()))
            st.markdown(_in_warning_colour(plain(line)))
