"""Rubric audit: the queue of submitted rubrics; comment criteria, then approve or return.

The case stays in view beside the criteria while the page scrolls: every criterion at full height,
none in a box of its own. Under each criterion: what changed since the previous decided version, the
rubric lint's findings (db.rules.lint, the same the author saw) and a comment field. The decision bar
stays at the bottom of the screen. Every decision asks first, whether clicked or keyed: Ctrl+Enter
proposes approve (no criterion comments) or return (with them), a click on 通过 / 退回修改 proposes
that one; Ctrl+Enter or 确认 confirms, Esc cancels.
"""

from __future__ import annotations

import streamlit as st

from db import review
from db.rubrics.references import reference_for
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError, StaleEdit
from db.rules.lint import LintReport, lint_rubric
from db.store.models import User
from ui import shell, workbench as wb
from ui.checker import page_start
from ui.keys import widget_key
from ui.rubric_lint import finding_text
from ui.rubric_quality import (
    CriterionQuality,
    cited,
    show_quality,
    show_reference,
    show_validation_line,
    version_quality,
)
from ui.shell import t
from ui.widgets import case_card, plain, show_error, show_text

PICK_KEY = "review_audit_pick"


def _seen_key(rubric_id: int) -> str:
    return f"review_audit_seen_{rubric_id}"


def _pending_key(rubric_id: int) -> str:
    """The decision Ctrl+Enter proposed, waiting for its confirmation ("approve" or "return")."""
    return f"review_audit_pending_{rubric_id}"


def _queue_label(item: review.RubricQueueItem) -> str:
    text = t(
        "review.audit.queue_item", case=item.case_id, version=item.version, author=item.author or "—", n=item.n_criteria
    )
    return f"{text} · {t('review.audit.own_mark')}" if item.own else text


#: The case box beside the criteria, held in view while the page scrolls (fits a 900-px screen).
CASE_HEIGHT = 640

#: The case pane stays put while the page scrolls; criteria rows are tight so a dozen fit on a laptop
#: screen; the decision bar (and the question it asks) stays at the bottom of the screen.
_LAYOUT_STYLE = (
    "<style>"
    '[data-testid="stColumn"]:has(.st-key-audit_case_pane) { align-self: stretch; }'
    "div:has(> .st-key-audit_case_pane) { position: sticky; top: 4rem; z-index: 2; }"
    ".st-key-audit_criteria { gap: 0.3rem; }"
    '.st-key-audit_criteria [data-testid="stHorizontalBlock"] { gap: 0.6rem; }'
    # Streamlit pulls a text up by its paragraph's margin (-1rem); with no margin the pull would lift the
    # row's last line over the row's rule, so both go.
    '.st-key-audit_criteria [data-testid="stMarkdownContainer"] { margin-bottom: 0; }'
    '.st-key-audit_criteria [data-testid="stMarkdownContainer"] p { margin-bottom: 0; }'
    '[class*="st-key-audit_row_"] { border-bottom: 1px solid rgba(49, 51, 63, 0.1); padding-bottom: 0.2rem; }'
    # a comment field one line of text high, a criterion's caption tight under its text: 12+ rows in view
    '.st-key-audit_criteria [data-baseweb="input"] { min-height: 0; height: 2rem; }'
    ".st-key-audit_criteria input { padding-top: 0.2rem; padding-bottom: 0.2rem; }"
    '.st-key-audit_criteria [data-testid="stCaptionContainer"] { margin-top: -0.2rem; }'
    # Sticky on the wrapper Streamlit puts around a keyed container: the container alone has no room to move.
    "div:has(> .st-key-audit_decide_bar), div:has(> .st-key-audit_confirm_bar) { position: sticky; bottom: 0;"
    " z-index: 3; background: var(--background-color, #fff); }"
    ".st-key-audit_decide_bar, .st-key-audit_confirm_bar { padding: 0.4rem 0; }"
    "div:has(> .st-key-audit_confirm_bar) { z-index: 4; }"
    "</style>"
)


def _criterion(
    view: review.RubricView, criterion: review.CriterionView, report: LintReport, row: int, quality: dict
) -> str:
    """One compact row: number (and a mark when changed), the text, its lint findings and quality reasons, the
    comment field (with a box that cites the reasons in the comment)."""
    with st.container(key=f"audit_row_{criterion.position}"):
        return _criterion_row(view, criterion, report, row, quality.get(criterion.criterion_id))


def _criterion_row(
    view: review.RubricView,
    criterion: review.CriterionView,
    report: LintReport,
    row: int,
    quality: CriterionQuality | None,
) -> str:
    head, body, comment = st.columns([1.0, 3.2, 1.8], vertical_alignment="top")
    with head:
        # the number and, for a rubric started from an LLM draft, the criterion's origin on the same line
        st.markdown(f"**{criterion.position}**" + _origin(view, criterion.criterion_id))
        if criterion.criterion_id in view.changed_since_return:
            st.badge(t("workbench.audit.changed"), color="orange")
    with body:
        show_text(criterion.text)
        for finding in report.for_row(row):
            st.caption(t("review.audit.finding", finding=plain(finding_text(finding))))
        show_quality(quality)
        if criterion.review_comment:
            st.caption(t("review.audit.previous_comment", comment=plain(criterion.review_comment)))
        earlier = view.earlier_criterion_comments.get(criterion.criterion_id)
        if earlier:
            st.caption(
                t(
                    "review.audit.earlier_comment",
                    comment=plain(earlier),
                    text=plain(view.earlier_criterion_texts.get(criterion.criterion_id, "")),
                )
            )
    with comment:
        text = st.text_input(
            t("review.audit.criterion_comment"),
            key=widget_key("review_audit_c", view.rubric_version_id, criterion.id),
            placeholder=t("review.audit.criterion_comment_hint"),
            label_visibility="collapsed",
        )
        if (
            quality is not None
            and quality.reasons
            and st.checkbox(
                t("rubric_quality.cite"), key=widget_key("review_audit_cite", view.rubric_version_id, criterion.id)
            )
        ):
            return cited(quality, text)
        return text


def _origin(view: review.RubricView, criterion_id: str) -> str:
    """Where the criterion came from (docs/REFERENCE.md §4.3) as a badge after its number; "" without a draft."""
    found = view.origins.get(criterion_id)
    if found is None:
        return ""
    if found.origin == "drafted":
        return " :blue-badge[" + t("drafts.short.drafted") + "]"
    if found.origin == "edited":
        return " :orange-badge[" + t("drafts.short.edited", distance=found.edit_distance) + "]"
    return " :gray-badge[" + t("drafts.short.written") + "]"


def _deleted_drafts(view: review.RubricView) -> None:
    if not view.deleted_drafts:
        return
    with st.expander(t("drafts.deleted", n=len(view.deleted_drafts))):
        for row in view.deleted_drafts:
            st.text(row.drafted_text or "")


def _stale(stale: StaleEdit, rubric_id: int) -> None:
    current = stale.current or {}
    st.warning(
        t(
            "review.audit.stale",
            status=t(f"review.status.{current.get('status', 'submitted')}"),
            reviewer=plain(current.get("reviewer") or "—"),
        )
    )
    if current.get("lock_version"):
        st.session_state[_seen_key(rubric_id)] = current["lock_version"]


def render() -> None:
    user = shell.require_user(Role.checker)
    wb.compact_page()
    st.html(_LAYOUT_STYLE)
    page_start("review.audit.title", "review_audit_done")
    with shell.db_session(read_only=True) as session:
        queue = review.rubric_queue(session, user)
    if not queue:
        st.info(t("review.audit.empty"))
        return
    st.caption(t("review.audit.queue_count", n=len(queue)))
    names = {item.rubric_version_id: _queue_label(item) for item in queue}
    chosen = st.selectbox(
        t("review.audit.pick"),
        list(names),
        format_func=names.__getitem__,
        key=PICK_KEY,
        label_visibility="collapsed",
    )
    with shell.db_session(read_only=True) as session:
        view = review.rubric_for_review(session, user, chosen)
    st.session_state.setdefault(_seen_key(view.rubric_version_id), view.lock_version)
    report = lint_rubric([c.text for c in view.criteria], RUBRIC_SIZE)
    listed = [(c.criterion_id, c.text, c.position) for c in view.criteria]
    quality, judge, case_pk = version_quality(user, view.rubric_version_id, view.case.case_id, listed)

    case_pane, criteria_pane = st.columns([2, 3], gap="medium")
    with case_pane, st.container(key="audit_case_pane"), st.container(height=CASE_HEIGHT, border=True):
        case_card(view.case)
        if case_pk is not None:
            with shell.db_session(read_only=True) as session:
                show_reference(reference_for(session, user, case_pk))
    with criteria_pane:
        _criteria_header(view, report)
        show_validation_line(judge, sum(bool(q.reasons) for q in quality.values()))
        asked = _form(view, report, quality)
    if asked is not None:
        _decide(user, view, *asked)


def _criteria_header(view: review.RubricView, report: LintReport) -> None:
    st.markdown(
        "**"
        + t("review.audit.criteria", n=len(view.criteria), version=view.version, author=plain(view.author or "—"))
        + "**"
    )
    if view.own:
        st.info(t("review.audit.own"))
    if view.review_comment:
        st.caption(t("review.audit.previous_overall", comment=plain(view.review_comment)))
    if view.earlier_comment:
        st.caption(t("review.audit.earlier_overall", comment=plain(view.earlier_comment)))
    warned = {f.row for f in report.findings if f.row is not None}
    status_line = [t("review.audit.lint_summary", n=len(warned)) if warned else t("review.audit.lint_clean")]
    if view.previous_version is not None:
        status_line.insert(
            0, t("review.audit.changed_since", n=len(view.changed_since_return), version=view.previous_version)
        )
    if view.origins:
        counts = {origin: sum(o.origin == origin for o in view.origins.values()) for origin in ("drafted", "edited")}
        status_line.insert(
            0,
            t(
                "drafts.audit.generator",
                generator=plain(next((o.generator for o in view.origins.values() if o.generator), "") or "—"),
            )
            + t(
                "drafts.audit.summary",
                drafted=counts["drafted"],
                edited=counts["edited"],
                written=len(view.origins) - counts["drafted"] - counts["edited"],
                deleted=len(view.deleted_drafts),
            ),
        )
    st.caption(" ".join(status_line) + " " + t("review.audit.how"))
    _deleted_drafts(view)


def _form(view: review.RubricView, report: LintReport, quality: dict) -> tuple[str, dict[int, str], str] | None:
    """The criteria with their comment fields and the decision bar. A click or Ctrl+Enter proposes a
    decision (asked on the next run); returns (decision, comments, overall comment) once confirmed."""
    pending_key = _pending_key(view.rubric_version_id)
    pending = st.session_state.get(pending_key)
    with st.form(widget_key("review_audit_form", view.rubric_version_id), enter_to_submit=False, border=False):
        with st.container(key="audit_criteria"):
            drawn = [
                (criterion.id, _criterion(view, criterion, report, row, quality))
                for row, criterion in enumerate(view.criteria)
            ]
            comments = {pk: text for pk, text in drawn if pk is not None}  # every criterion under audit is stored
        with st.container(key="audit_decide_bar"):
            overall = st.text_input(
                t("review.audit.overall_comment"), key=widget_key("review_audit_overall", view.rubric_version_id)
            )
            left, right, decide_col = st.columns([1, 1, 2])
            approve = left.form_submit_button(
                t("review.audit.approve"), type="primary", disabled=view.own, width="stretch"
            )
            send_back = right.form_submit_button(t("review.audit.return"), disabled=view.own, width="stretch")
            decide = decide_col.form_submit_button(
                t("review.audit.decide"),
                disabled=view.own or pending is not None,
                shortcut=None if pending is not None else "Ctrl+Enter",
                type="tertiary",
                help=t("review.audit.keys"),
            )
    commented = {pk: text for pk, text in comments.items() if text and text.strip()}
    proposed = "approve" if approve else "return" if send_back else None
    if decide:
        proposed = "return" if commented else "approve"
    if proposed == "approve" and commented:
        st.session_state.pop(pending_key, None)
        with st.container(key="audit_confirm_bar"):  # beside the buttons, wherever the page is scrolled
            st.warning(t("review.audit.approve_has_comments", n=len(commented)))
        return None
    if proposed is not None:
        # Drawn again so only the confirmation answers Ctrl+Enter, and nothing is decided by one click.
        st.session_state[pending_key] = proposed
        st.rerun()
    if pending is None:
        return None
    with st.container(key="audit_confirm_bar"):
        confirmed = _confirmation(view, pending, len(commented), pending_key)
    if not confirmed:
        return None
    # The question stays open until the decision is stored (`_decide` closes it), so a save refused as busy
    # is repeated with one more click on the same answer.
    return pending, commented, overall


def _decide(user: User, view: review.RubricView, decision: str, commented: dict[int, str], overall: str) -> None:
    seen = st.session_state.get(_seen_key(view.rubric_version_id), view.lock_version)
    try:
        with shell.db_session() as session:
            if decision == "approve":
                review.approve_rubric(session, user, view.rubric_version_id, seen_lock_version=seen, comment=overall)
            else:
                review.return_rubric(
                    session,
                    user,
                    view.rubric_version_id,
                    seen_lock_version=seen,
                    comment=overall,
                    criterion_comments=dict(commented),
                )
    except StaleEdit as stale:
        st.session_state.pop(_pending_key(view.rubric_version_id), None)
        _stale(stale, view.rubric_version_id)
        return
    except ClinConsensusError as error:
        show_error(error)
        return
    st.session_state.pop(_pending_key(view.rubric_version_id), None)
    st.session_state.pop(_seen_key(view.rubric_version_id), None)
    # The decided rubric leaves the queue: the picker moves on to the next and shows the new count.
    st.session_state.pop(PICK_KEY, None)
    st.session_state["review_audit_done"] = t(
        "review.audit.approved" if decision == "approve" else "review.audit.returned", case=plain(view.case.case_id)
    )
    st.rerun()


def _confirmation(view: review.RubricView, pending: str, n_comments: int, pending_key: str) -> bool:
    """Asks before the proposed decision; True once confirmed (a click or Ctrl+Enter again), Esc cancels."""
    case = plain(view.case.case_id)
    with st.container(border=True):
        if pending == "approve":
            st.warning(t("review.audit.confirm_approve", case=case, version=view.version))
        else:
            st.warning(t("review.audit.confirm_return", case=case, version=view.version, n=n_comments))
        yes, no, _ = st.columns([3, 2, 2])
        confirmed = yes.button(
            t("review.audit.confirm"),
            type="primary",
            shortcut="Ctrl+Enter",
            key=widget_key("review_audit_confirm", view.rubric_version_id),
            width="stretch",
        )
        cancelled = no.button(
            t("review.audit.cancel"),
            shortcut="Esc",
            key=widget_key("review_audit_cancel", view.rubric_version_id),
            width="stretch",
        )
    if cancelled:
        st.session_state.pop(pending_key, None)
        st.rerun()
    return confirmed
