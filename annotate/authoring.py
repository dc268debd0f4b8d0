"""Rubric authoring: the annotator's assigned cases, the case beside an editor of exactly N criteria.

The case stays in view on the left, in a box that scrolls on its own; the editor, the checker's
returned comments (a column beside the criterion text) and the lint are on the right. The editor is
drawn at full height with wrapped cells, so the page scrolls, not a box inside it.

The editor is one keyed `st.data_editor` with a fixed number of rows; its edits are folded into
the page's working copy on every run *before* it is drawn, so the quality-check column always
matches what was typed. The editor, the lint, the draft keeping and the buttons are one
`st.fragment`: a committed cell reruns only them, not the page (queue, case, history). The working
copy is kept as a draft (db/labeling/draft_store.py) while it differs from the saved version, so a refresh or a
closed tab loses nothing. Saving and submitting go through db/rubrics/authoring.py (locking, audit); the
buttons act in callbacks, then the whole page is drawn again with the result.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from annotate import authoring_drafts as ad
from db import rubrics
from db.labeling import draft_store as drafts
from db.rubrics.authoring import AuthoringView, CriterionInput
from db.rubrics.provenance import OfferedDraft
from db.rubrics.references import reference_for
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import AssignmentKind, Role, RubricStatus
from db.rules.errors import ClinConsensusError, StaleEdit, ValidationFailed
from db.rules.lint import LintReport, lint_rubric
from db.rules.taxonomy import get_taxonomy
from db.store.models import User
from db.work.assignments import my_queue
from ui import shell, widgets, workbench as wb
from ui.case_panel import case_panel
from ui.keys import widget_key
from ui.rubric_lint import cell_text, finding_text, row_text
from ui.rubric_quality import show_own_validation, show_reference

t = shell.t
CASE_KEY = "annotate_rubric_case"
FLASH_KEY = "annotate_rubric_flash"
EDITABLE = (None, RubricStatus.draft, RubricStatus.returned)
#: The case box, held in view beside the editor while the page scrolls (at most the window's height, _CASE_STYLE).
CASE_HEIGHT = 600
#: The tallest row: three wrapped lines show a whole long criterion and its comment (authoring_drafts.row_height).
ROW_HEIGHT = 76
ORDER_WIDTH, ORIGIN_WIDTH = 40, 110
#: Column widths (px). With the case pane narrowed below 1280 px (_NARROW_STYLE), №, id, text, comment and lint
#: fit the editor pane at 1024 px (496 px of columns in a pane about 500 px wide); at 1440 px the tags fit
#: beside them, so nothing needs sideways scrolling.
ID_WIDTH, LINT_WIDTH, TAGS_WIDTH, REVIEW_WIDTH = 44, 116, 150, 120
TEXT_WIDTH, TEXT_WIDTH_BESIDE_REVIEW = 330, 176
#: Below 1280 px the case pane takes 23 % of the width, not a third, and the gap beside it is 1 rem, not 2 (the
#: case text wraps, still beside it): the № column and the lint column both stay in view on a returned rubric.
_NARROW_STYLE = (
    "<style>@media (max-width: 1280px) {"
    '[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] .st-key-authoring_work)'
    " { gap: 1rem !important; }"
    '[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] .st-key-authoring_work)'
    ' > [data-testid="stColumn"]:first-child { flex: 0 0 23% !important; min-width: 0; }'
    '[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] .st-key-authoring_work)'
    ' > [data-testid="stColumn"]:last-child { flex: 1 1 0 !important; min-width: 0; }'
    "}</style>"
)
#: The sticky case box takes the window's height below the app's header, whole beside the grid at any size.
_CASE_STYLE = (
    "<style>.st-key-case_box, div:has(> .st-key-case_box)"
    " { height: auto !important; max-height: calc(100vh - 5.5rem) !important; }</style>"
)


def _state_key(case_pk: int) -> str:
    return f"annotate_rubric_state_{case_pk}"


def _draft_key(case_pk: int) -> str:
    return f"rubric:{case_pk}"


def _editor_key(case_pk: int, state: dict) -> str:
    return widget_key("annotate_rubric_editor", case_pk, state["generation"])


# Rows of the editor ---------------------------------------------------------------------------


def _rows_of(view: AuthoringView) -> list[dict]:
    """The newest version's criteria, padded or cut to exactly N rows."""
    ids = rubrics.default_criterion_ids(RUBRIC_SIZE)
    saved = view.latest.criteria if view.latest else []
    rows = [{"criterion_id": c.criterion_id, "text": c.text, "tags": list(c.tags)} for c in saved[:RUBRIC_SIZE]]
    used = {row["criterion_id"] for row in rows}
    spare = (cid for cid in ids if cid not in used)
    while len(rows) < RUBRIC_SIZE:
        rows.append({"criterion_id": next(spare), "text": "", "tags": []})
    return rows


def _new_state(user: User, view: AuthoringView, draft: OfferedDraft | None) -> dict:
    saved_rows = _rows_of(view)
    rows = [dict(row) for row in saved_rows]
    draft_id = None
    if view.latest is not None and view.latest.criteria:
        draft_id = draft.id if draft is not None and _started_from(view, draft) else None
    elif draft is not None:
        # A case nobody has written yet: the LLM draft fills the rows, marked; nothing is saved until the author does.
        rows = ad.rows_from_draft(draft, [row["criterion_id"] for row in saved_rows])
        draft_id = draft.id
    state = {
        "base_version_id": view.latest.id if view.latest else None,
        "base_lock": view.latest.lock_version if view.latest else None,
        "saved_rows": saved_rows,
        "rows": rows,
        "persisted": None,
        "generation": 0,
        "revising": False,
        "restored": False,
        "draft_id": draft_id,
    }
    with shell.db_session(read_only=True) as session:
        kept = drafts.load_draft(session, user, _draft_key(view.case.case_pk))
    if kept and len(kept.get("rows", [])) == RUBRIC_SIZE:
        state.update(
            rows=kept["rows"],
            persisted=kept["rows"],
            base_version_id=kept.get("base_version_id"),
            base_lock=kept.get("base_lock"),
            restored=True,
            revising=bool(kept.get("revising")),
            draft_id=kept.get("draft_id", state["draft_id"]),
        )
    return state


def _started_from(view: AuthoringView, draft: OfferedDraft) -> bool:
    """Whether the newest version was started from `draft` (the offered draft is then the version's own)."""
    return view.latest is not None and view.latest.draft_id == draft.id


def _current_rows(state: dict) -> list[dict]:
    """The working copy with the editor's pending edits applied (they are keyed by row number), then the
    rows moved by a number typed in the № column."""
    rows = [dict(row) for row in state["rows"]]
    moves: list[tuple[int, int]] = []
    for index, changes in _pending_edits(state):
        if 0 <= index < len(rows):
            for column in ("text", "tags"):
                if column in changes:
                    value = changes[column]
                    rows[index][column] = (
                        ("" if value is None else str(value)) if column == "text" else list(value or [])
                    )
            if changes.get("order") is not None and int(changes["order"]) != index + 1:
                moves.append((index, int(changes["order"])))
    return ad.apply_moves(rows, moves)


def _pending_edits(state: dict) -> list[tuple[int, dict]]:
    edits = st.session_state.get(_editor_key(state["case_pk"], state), {}) or {}
    return [(int(row), changes) for row, changes in (edits.get("edited_rows") or {}).items()]


def _moved(state: dict) -> bool:
    """Whether the editor's pending edits move a row (the editor is then drawn afresh: its edits are by row)."""
    return any(
        changes.get("order") is not None and int(changes["order"]) != index + 1
        for index, changes in _pending_edits(state)
    )


def _inputs(rows: list[dict]) -> list[CriterionInput]:
    return [CriterionInput(row["criterion_id"], row["text"] or "", tuple(row["tags"] or ())) for row in rows]


# Lint messages --------------------------------------------------------------------------------


def _lint_column(report: LintReport, n: int) -> list[str]:
    return [cell_text(report, row) or t("annotate.lint.ok") for row in range(n)]


def _show_lint(report: LintReport) -> None:
    errors, warnings = len(report.errors), len(report.warnings)
    if not errors and not warnings:
        st.success(t("annotate.authoring.lint_clean"))
        return
    line = t("annotate.authoring.lint_summary", errors=errors, warnings=warnings)
    (st.error if errors else st.warning)(line)
    for finding in report.rubric_level():
        st.error(finding_text(finding))
    rows = sorted({f.row for f in report.findings if f.row is not None})
    # Opened by itself only for errors worth reading row by row (not a rubric that is merely unwritten).
    telling = [f for f in report.errors if f.code not in ("empty", "count")]
    with st.expander(t("annotate.authoring.lint_details"), expanded=bool(telling)):
        for row in rows:
            st.text(f"{t('annotate.authoring.row', row=row + 1)} — " + row_text(report, row))


# Actions (run as callbacks, before the page is drawn again) -------------------------------------


def _flash(kind: str, message: str) -> None:
    st.session_state[FLASH_KEY] = (kind, message)


def _reset(case_pk: int) -> None:
    user = shell.current_user()
    if user is not None:
        with shell.db_session() as session:
            drafts.discard_draft(session, user, _draft_key(case_pk))
    st.session_state.pop(_state_key(case_pk), None)


def _stale_message(error: StaleEdit) -> str:
    current = error.current
    if current is None:
        return t("annotate.authoring.stale", version="—", lock="—")
    return t("annotate.authoring.stale", version=current.version, lock=current.lock_version)


def _save(case_pk: int, *, submit: bool) -> None:
    user = shell.current_user()
    state = st.session_state.get(_state_key(case_pk))
    if user is None or state is None:
        return
    # The callback runs inside the editor's fragment; the page (status, versions, queue) is drawn again after it.
    state["redraw_page"] = True
    # Set again so the browser shows the picker's new label ("草稿", "已提交"), not the one it last drew.
    st.session_state[CASE_KEY] = case_pk
    rows = _current_rows(state)
    asked: list[str] = []
    try:
        with shell.db_session() as session:
            changed = rows != state["saved_rows"] or state["base_version_id"] is None
            if changed:
                version = rubrics.save_rubric_draft(
                    session,
                    user,
                    case_pk,
                    _inputs(rows),
                    base_version_id=state["base_version_id"],
                    expected_lock=state["base_lock"],
                    from_draft=state.get("draft_id"),
                )
                lock = version.lock_version
            else:
                version = rubrics.read_version(session, user, state["base_version_id"])
                lock = state["base_lock"]
            if submit and not state.get("submit_unchanged_ok"):
                returned = rubrics.authoring_view(session, user, case_pk).returned
                unchanged = rubrics.unchanged_commented(returned, _inputs(rows))
                if unchanged:
                    # Asked first; the draft saved above stays saved.
                    asked = unchanged
                    submit = False
            if submit:
                if version.status != RubricStatus.draft:
                    # A returned or approved version is never submitted again: a new draft is made first.
                    version = rubrics.save_rubric_draft(
                        session, user, case_pk, _inputs(rows), base_version_id=version.id, expected_lock=lock
                    )
                    lock = version.lock_version
                version = rubrics.submit_rubric(session, user, version.id, expected_lock=lock)
            drafts.discard_draft(session, user, _draft_key(case_pk))
    except StaleEdit as error:
        _flash("error", _stale_message(error))
        state["conflict"] = True
        return
    except (ValidationFailed, ClinConsensusError) as error:
        _flash("error", widgets.error_text(error))
        return
    saved_rows = [{"criterion_id": c.criterion_id, "text": c.text, "tags": list(c.tags)} for c in version.criteria]
    state.update(
        base_version_id=version.id,
        base_lock=version.lock_version,
        saved_rows=saved_rows,
        rows=[dict(row) for row in saved_rows],
        persisted=None,
        generation=state["generation"] + 1,
        revising=False,
        restored=False,
        conflict=False,
    )
    state["submit_unchanged_ok"] = False
    if asked:
        state["ask_unchanged"] = asked
        _flash("warning", t("workbench.authoring.unchanged_commented", n=len(asked), ids="、".join(asked[:8])))
        return
    state.pop("ask_unchanged", None)
    if submit:
        shell.forget_my_progress()
        _flash("success", t("annotate.authoring.submitted", version=version.version))
    elif changed:
        _flash("success", t("annotate.authoring.saved", version=version.version))
    else:
        _flash("info", t("annotate.authoring.unchanged"))


def _submit_anyway(case_pk: int) -> None:
    state = st.session_state.get(_state_key(case_pk))
    if state is None:
        return
    state["submit_unchanged_ok"] = True
    state.pop("ask_unchanged", None)
    _save(case_pk, submit=True)


def _start_revision(case_pk: int) -> None:
    state = st.session_state.get(_state_key(case_pk))
    if state is not None:
        state["revising"] = True


# Page -----------------------------------------------------------------------------------------


def _status_name(status: str | None) -> str:
    return t(f"annotate.authoring.status.{status or 'none'}")


def _pick_case(queue: list[dict]) -> dict:
    by_pk = {item["case_pk"]: item for item in queue}
    wanted = st.session_state.get(CASE_KEY)
    if wanted not in by_pk:
        requested = st.query_params.get("case")
        match = [item["case_pk"] for item in queue if item["case_id"] == requested]
        open_items = [item["case_pk"] for item in queue if not item["done"]]
        st.session_state[CASE_KEY] = (match or open_items or [queue[0]["case_pk"]])[0]
    done = sum(item["done"] for item in queue)
    widgets.progress_bar(done, len(queue), label_key="annotate.authoring.queue_done")
    case_pk = st.selectbox(
        t("annotate.authoring.pick_case"),
        list(by_pk),
        key=CASE_KEY,
        format_func=lambda pk: f"{by_pk[pk]['case_id']} · {by_pk[pk]['subject']} · {_status_name(by_pk[pk]['status'])}",
    )
    st.query_params["case"] = by_pk[case_pk]["case_id"]
    return by_pk[case_pk]


def _returned_notice(view: AuthoringView) -> None:
    if view.returned is None:
        return
    st.warning(t("annotate.authoring.returned", version=view.returned.version))
    if view.returned.review_comment:
        st.caption(t("annotate.authoring.returned_overall"))
        widgets.show_text(view.returned.review_comment)


def _history(user: User, view: AuthoringView) -> None:
    if len(view.history) < 2 and not (view.latest and view.latest.status != RubricStatus.draft):
        return
    with st.expander(t("annotate.authoring.history")):
        versions = {v.id: v for v in view.history}
        chosen = st.selectbox(
            t("annotate.authoring.history_pick"),
            list(versions),
            index=None,
            key=widget_key("annotate_rubric_history", view.case.case_pk),
            format_func=lambda vid: t(
                "annotate.authoring.version_line",
                version=versions[vid].version,
                status=_status_name(versions[vid].status),
            ),
        )
        if chosen is None:
            return
        with shell.db_session(read_only=True) as session:
            old = rubrics.read_version(session, user, chosen)
        if old.review_comment:
            st.caption(t("annotate.authoring.returned_overall"))
            widgets.show_text(old.review_comment)
        st.dataframe(
            pd.DataFrame(
                {
                    t("annotate.authoring.col.id"): [c.criterion_id for c in old.criteria],
                    t("annotate.authoring.col.text"): [c.text for c in old.criteria],
                    t("annotate.authoring.col.review"): [c.review_comment or "" for c in old.criteria],
                }
            ),
            hide_index=True,
            width="stretch",
        )


def _editor(
    view: AuthoringView,
    state: dict,
    rows: list[dict],
    report: LintReport,
    editable: bool,
    origin: list[str] | None,
) -> None:
    taxonomy = get_taxonomy()
    tag_ids = [tag["id"] for tag in taxonomy.failure_tags()]
    lang = shell.lang()
    tag_names = {tag["id"]: tag.get(lang) or tag["en"] for tag in taxonomy.failure_tags()}
    comments = {c.criterion_id: c.review_comment or "" for c in view.returned.criteria} if view.returned else {}
    frame = pd.DataFrame(
        {
            "order": list(range(1, len(rows) + 1)),
            "criterion_id": [row["criterion_id"] for row in rows],
            "text": [row["text"] for row in rows],
            "tags": [list(row["tags"]) for row in rows],
            "lint": _lint_column(report, len(rows)),
        }
    )
    reviewed = any(comments.values())
    config = {
        "order": st.column_config.NumberColumn(
            t("drafts.col.order"),
            width=ORDER_WIDTH,
            min_value=1,
            max_value=len(rows),
            step=1,
            help=t("drafts.col.order_help"),
            # Not pinned: the grid opens a pinned cell's editor only with Enter, never on a typed number.
            pinned=False,
        ),
        "criterion_id": st.column_config.TextColumn(
            t("annotate.authoring.col.id"), width=ID_WIDTH, disabled=True, pinned=False
        ),
        "text": st.column_config.TextColumn(
            t("annotate.authoring.col.text"),
            width=TEXT_WIDTH_BESIDE_REVIEW if reviewed else TEXT_WIDTH,
            max_chars=rubrics.MAX_CRITERION_CHARS,
        ),
        "tags": st.column_config.MultiselectColumn(
            t("annotate.authoring.col.tags"),
            options=tag_ids,
            width=TAGS_WIDTH,
            format_func=lambda tag: tag_names.get(tag, tag),
        ),
        "lint": st.column_config.TextColumn(t("annotate.authoring.col.lint"), width=LINT_WIDTH, disabled=True),
    }
    if reviewed:
        # Beside the criterion it is about, not in a far column cut off on a laptop screen.
        frame.insert(3, "review", [comments.get(row["criterion_id"], "") for row in rows])
        config["review"] = st.column_config.TextColumn(
            t("annotate.authoring.col.review"), width=REVIEW_WIDTH, disabled=True
        )
    if origin is not None:
        # Where each criterion came from (the LLM draft, edited, written), beside its text.
        frame.insert(2, "origin", origin)
        config["origin"] = st.column_config.TextColumn(t("drafts.col.origin"), width=ORIGIN_WIDTH, disabled=True)
    text_width = TEXT_WIDTH_BESIDE_REVIEW if reviewed else TEXT_WIDTH
    height = ad.row_height([row["text"] or "" for row in rows] + list(comments.values()), text_width)
    # The origin before the text, as a mark: in view on a laptop screen, where the far columns are a scroll away.
    order = ("order", "criterion_id", "origin", "text", "review", "lint", "tags")
    st.data_editor(
        frame,
        key=_editor_key(view.case.case_pk, state),
        num_rows="fixed",
        hide_index=True,
        column_config=config,
        # The lint right after the text (and the checker's comment): what is cut off on a laptop is the tags.
        column_order=[name for name in order if name in frame.columns],
        disabled=["criterion_id", "lint", "review", "origin"] if editable else True,
        width="stretch",
        height=height * len(rows) + 40,  # every row, no scrolling inside the grid
        row_height=height,
    )


def _persist_draft(user: User, case_pk: int, state: dict, rows: list[dict]) -> None:
    """Keep edits that are not saved yet, once per change."""
    if rows == state["saved_rows"]:
        if state["persisted"] is not None:
            with shell.db_session() as session:
                drafts.discard_draft(session, user, _draft_key(case_pk))
            state["persisted"] = None
        return
    if rows != state["persisted"]:
        with shell.db_session() as session:
            drafts.save_draft(
                session,
                user,
                _draft_key(case_pk),
                {
                    "rows": rows,
                    "base_version_id": state["base_version_id"],
                    "base_lock": state["base_lock"],
                    "revising": state.get("revising", False),
                    "draft_id": state.get("draft_id"),
                },
            )
        state["persisted"] = rows


def render() -> None:
    user = shell.require_user(Role.annotator)
    wb.compact_page()
    st.title(t("annotate.authoring.title"))
    with shell.db_session(read_only=True) as session:
        queue = my_queue(session, user, AssignmentKind.rubric)
    if not queue:
        st.info(t("annotate.authoring.empty_queue"))
        return
    item = _pick_case(queue)
    case_pk = item["case_pk"]
    try:
        with shell.db_session(read_only=True) as session:
            view = rubrics.authoring_view(session, user, case_pk)
    except ClinConsensusError as error:
        widgets.show_error(error)
        return

    with shell.db_session(read_only=True) as session:
        offered = rubrics.offered_draft(session, user, case_pk)
    state = st.session_state.get(_state_key(case_pk))
    if state is None:
        state = _new_state(user, view, offered)
        state["case_pk"] = case_pk
        st.session_state[_state_key(case_pk)] = state
    state.pop("redraw_page", None)
    state["offered"] = offered if offered is not None and offered.id == state.get("draft_id") else None

    if state.get("restored"):
        st.info(t("annotate.authoring.draft_restored"))

    status = view.latest.status if view.latest else None
    case_col, work_col = st.columns([1, 3], gap="medium")
    with case_col:
        case_panel(view.case, height=CASE_HEIGHT, sticky=True, box_key="case_box")
        with shell.db_session(read_only=True) as session:
            show_reference(reference_for(session, user, case_pk))
    st.html(_NARROW_STYLE + _CASE_STYLE)
    with work_col, st.container(key="authoring_work"):
        if view.latest:
            st.caption(t("annotate.authoring.version_line", version=view.latest.version, status=_status_name(status)))
        else:
            st.caption(t("annotate.authoring.new_rubric"))
        _returned_notice(view)
        if view.latest and status in (RubricStatus.submitted, RubricStatus.returned, RubricStatus.approved):
            latest = view.latest
            show_own_validation(user, latest.id, latest.version, view.case.case_id, latest.criteria)
        # How to work on the draft only while it can be worked on (a submitted rubric is read-only).
        ad.draft_notice(state["offered"], state.get("draft_id") is not None and status in EDITABLE)
        if status == RubricStatus.submitted:
            st.info(t("annotate.authoring.is_submitted"))
        elif status == RubricStatus.approved and not state.get("revising"):
            st.info(t("annotate.authoring.is_approved"))
            st.button(
                t("annotate.authoring.revise"),
                on_click=_start_revision,
                args=(case_pk,),
                key=widget_key("annotate_rubric_revise", case_pk),
            )
        editable = status in EDITABLE or bool(status == RubricStatus.approved and state.get("revising"))
        # The hint matches the state: how to edit only while the rubric can be edited.
        hint = t("annotate.authoring.editor_help") if editable else t("drafts.read_only")
        st.caption(t("annotate.authoring.editor", n=RUBRIC_SIZE) + " — " + hint)
        _work(view)
        ad.keys_help(editable)
        _history(user, view)


@st.fragment
def _work(view: AuthoringView) -> None:
    """The editor, its lint, the kept draft and the buttons: a committed cell reruns only this."""
    user = shell.current_user()
    case_pk = view.case.case_pk
    state = st.session_state.get(_state_key(case_pk))
    if user is None or state is None or state.pop("redraw_page", False):
        st.rerun()  # after a save, a discard or a sign-out the whole page is drawn again
    status = view.latest.status if view.latest else None
    editable = status in EDITABLE or (status == RubricStatus.approved and state.get("revising"))
    rows = _current_rows(state)
    moved = _moved(state)
    # Fold the edits into the working copy: the browser drops its pending edits once the editor
    # is drawn with new values (the quality-check column changes with every edit).
    state["rows"] = rows
    if moved:
        state["generation"] += 1  # edits are kept by row number: after a move the editor is drawn afresh
    report = lint_rubric([row["text"] for row in rows], RUBRIC_SIZE)
    offered = state.get("offered")
    labels, deleted = ad.origin_column(offered, rows)
    _editor(view, state, rows, report, editable, labels if offered is not None else None)
    ad.deleted_list(deleted)
    if editable:
        _persist_draft(user, case_pk, state, rows)
        if rows != state["saved_rows"]:
            st.caption(t("annotate.authoring.unsaved"))
    _show_lint(report)
    # The result of a save or a submission, where the author's eyes are: beside the buttons just pressed.
    flash = st.session_state.pop(FLASH_KEY, None)
    if flash:
        getattr(st, flash[0])(flash[1])
        # and in a corner of the window, in sight wherever the page is scrolled after it is drawn again
        st.toast(flash[1], icon=":material/check_circle:" if flash[0] == "success" else ":material/info:")
    if editable:
        _buttons(case_pk, state, rows, report)


def _buttons(case_pk: int, state: dict, rows: list[dict], report: LintReport) -> None:
    save_col, submit_col, discard_col = st.columns([1, 1, 2])
    save_col.button(
        t("annotate.authoring.save"),
        on_click=_save,
        args=(case_pk,),
        kwargs={"submit": False},
        key=widget_key("annotate_rubric_save", case_pk),
        shortcut="ctrl+s",
        width="stretch",
    )
    submit_col.button(
        t("annotate.authoring.submit"),
        type="primary",
        on_click=_save,
        args=(case_pk,),
        kwargs={"submit": True},
        key=widget_key("annotate_rubric_submit", case_pk),
        disabled=report.blocks_submission,
        width="stretch",
        help=t("annotate.authoring.submit_blocked") if report.blocks_submission else None,
    )
    if state.get("ask_unchanged"):
        discard_col.button(
            t("workbench.authoring.submit_anyway"),
            on_click=_submit_anyway,
            args=(case_pk,),
            key=widget_key("annotate_rubric_submit_anyway", case_pk),
        )
    elif state.get("conflict"):
        discard_col.button(
            t("annotate.authoring.load_newest"),
            on_click=_reset,
            args=(case_pk,),
            key=widget_key("annotate_rubric_newest", case_pk),
        )
    elif rows != state["saved_rows"]:
        discard_col.button(
            t("annotate.authoring.discard_draft"),
            on_click=_reset,
            args=(case_pk,),
            key=widget_key("annotate_rubric_discard", case_pk),
            type="tertiary",
        )
