"""Hit labeling on one screen: the response beside its criteria, one key per decision, nothing lost.

The workbench (ui/workbench.py) shows the user request on top, the case above the response and the
criteria beside them (each scrolling on its own) and takes the keys. Each decision comes back at once
and is kept as a server-side draft (db/labeling/drafts.py), so a refresh or a closed tab loses nothing
(the page says when the draft was kept, and that it is not submitted); a criterion stays unjudged
until judged, and a save with unjudged criteria is refused. Ctrl+Enter
saves through db/ (which also refuses a save against a changed rubric, over newer labels, or on
labels made final by the round's feedback) and opens the next response.

A refused save says who saved in between ("you, in another tab" or another member of the group),
loads the saved labels and shows, under each criterion this page decided otherwise, the saved value
beside this page's: the physician decides only those again, and the next Ctrl+Enter saves what is
shown (the saved labels, with the lock versions they were read with), never the refused decisions.
A draft older than the saved labels opens the same way. Final labels are shown read-only.

The queue (thousands of responses at full scale) is read once and kept for QUEUE_TTL_S seconds;
the page's own saves update it in place, and a button reads it again at once. What the three workbench
pages share (opening, drafts, saves, messages) is ui/workbench_controller.py's; this page names its own.
"""

from __future__ import annotations

import time
from datetime import datetime

import streamlit as st
from sqlmodel import Session

from db import labels
from db.access.policies import LabelsFinal
from db.label_rows.refusals import LabelsChanged, RubricChanged, UnjudgedCriteria
from db.labeling.annotation import STALE, LabelQueue, SaveOutcome
from db.labeling.drafts import Difference, Workbench
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError, StaleEdit
from db.rules.taxonomy import get_taxonomy
from db.store.models import User
from ui import shell, widgets, workbench as wb
from ui.times import clock_time, local_time
from ui.workbench_controller import Content, Loaded, Opened, Sent, WorkbenchController, workbench_texts

t = shell.t
CURRENT_KEY = "annotate_label_current"
QUEUE_KEY = "annotate_label_queue"
QUEUE_TTL_S = 120.0
#: Queue entries offered in the picker: a few before the current one and the next ones.
PICKER_BEFORE, PICKER_AFTER = 20, 300
#: The progress bar's width beside the picker: its text ("回答标注 120/240（50.0%）") on one line.
PROGRESS_WIDTH_PX = 210


# Queue ----------------------------------------------------------------------------------------


def _load_queue(user: User, *, fresh: bool = False) -> LabelQueue:
    """The user's queue, read again when older than QUEUE_TTL_S, when asked, or for another user."""
    cached = st.session_state.get(QUEUE_KEY)
    if fresh or cached is None or cached["user_id"] != user.id or time.monotonic() - cached["loaded_at"] > QUEUE_TTL_S:
        with shell.db_session(read_only=True) as session:
            queue: LabelQueue = labels.queue(session, user, "annotation")
        cached = {"user_id": user.id, "loaded_at": time.monotonic(), "queue": queue}
        st.session_state[QUEUE_KEY] = cached
    return cached["queue"]


def _cached_queue() -> LabelQueue | None:
    cached = st.session_state.get(QUEUE_KEY)
    return cached["queue"] if cached else None


def _refresh_queue() -> None:
    st.session_state.pop(QUEUE_KEY, None)


def _go_next(current_id: int) -> bool:
    queue = _cached_queue()
    following = queue.next_after(current_id) if queue else None
    if following is None:
        return False
    st.session_state[CURRENT_KEY] = following.response_id
    return True


# The workbench's controller ------------------------------------------------------------------------


class _LabelingWorkbench(WorkbenchController[SaveOutcome]):
    """The annotator's workbench: their labels of one response, kept as a draft, saved as a batch."""

    name = "label"
    prefix = "annotate_label"
    waiting = "annotate.labeling.waiting"

    def open(self, user: User, response_id: int) -> Opened:
        with shell.db_session(read_only=True) as session:
            bench: Workbench = labels.open(session, user, "annotation", response_id)
        state = {
            "bench": bench,
            "rubric_version_id": bench.view.rubric_version_id,
            "expected": bench.view.expected_versions,
        }
        draft_at = bench.draft_at if bench.unsaved else None
        if bench.differences:
            who = "you" if bench.saved_by_self else "member"
            when = local_time(bench.draft_at)
            notice = t(f"annotate.labeling.draft_older_{who}", when=when, n=len(bench.differences))
            return Opened(state, draft_at, notice)
        if bench.unsaved:
            return Opened(
                state, draft_at, t("workbench.draft_restored", when=clock_time(bench.draft_at)), transient=True
            )
        return Opened(state, draft_at)

    def keep(self, session: Session, user: User, loaded: Loaded, sent: Sent) -> datetime:
        """Keep what the workbench sent as the draft of the response the page loaded, on the labels it showed."""
        return labels.keep_draft(
            session,
            user,
            "annotation",
            loaded["response_id"],
            rubric_version_id=loaded["rubric_version_id"],
            decisions=sent.get("decisions") or {},
            notes=sent.get("notes") or {},
            active_ms=sent.get("active_ms") or 0,
            expected_versions=loaded["expected"],
        )

    def draft_refused(self, error: ClinConsensusError) -> None:
        if isinstance(error, RubricChanged):
            self._rubric_changed(error)
        elif isinstance(error, LabelsFinal):
            self.say("error", widgets.error_text(error, markdown=False))
            self.reload()
        else:
            self.say("error", t("workbench.draft_failed", reason=widgets.reason_text(error, markdown=False)))

    def save(self, user: User, loaded: Loaded, sent: Sent) -> SaveOutcome:
        with shell.db_session() as session:
            return labels.save(
                session,
                user,
                "annotation",
                loaded["response_id"],
                rubric_version_id=loaded["rubric_version_id"],
                decisions=sent.get("decisions") or {},
                notes=sent.get("notes") or {},
                expected_versions=loaded["expected"],
                active_ms=sent.get("active_ms") or 0,
            )

    def refused(self, error: ClinConsensusError, user: User, loaded: Loaded, sent: Sent) -> None:
        if isinstance(error, UnjudgedCriteria):
            self.say("error", t("workbench.not_judged_yet", n=error.count))
        elif isinstance(error, RubricChanged):
            self._rubric_changed(error)
        elif isinstance(error, LabelsChanged):
            self._labels_changed(error, user, loaded, sent)
        elif isinstance(error, (StaleEdit, LabelsFinal)):
            self.say("error", widgets.error_text(error, markdown=False))
            self.reload()
        else:
            self.say("error", widgets.error_text(error, markdown=False))

    def saved(self, outcome: SaveOutcome, user: User, loaded: Loaded, sent: Sent) -> None:
        code = widgets.plain(loaded["bench"].view.code)
        cached = st.session_state.get(QUEUE_KEY)
        if cached:
            cached["queue"] = cached["queue"].with_saved(loaded["response_id"])
        shell.forget_my_progress()
        if outcome.changed:
            self.say("success", t("workbench.saved_next", code=code, created=outcome.created, updated=outcome.updated))
        else:
            self.say("info", t("workbench.unchanged", code=code))
        self.reload()
        if sent.get("advance", True) and not _go_next(loaded["response_id"]):
            self.say("success", t("annotate.labeling.all_done"))
        # The sidebar's progress and the picker follow at once.
        self.rerun_app()

    def content(self, loaded: Loaded) -> Content:
        bench: Workbench = loaded["bench"]
        view = bench.view
        differing = {difference.criterion_id: difference for difference in bench.differences}
        items = [
            wb.Item(
                key=c.criterion_id,
                title=str(c.position),
                text=c.text,
                state=bench.decisions.get(c.criterion_id),
                note=bench.notes.get(c.criterion_id, ""),
                lines=_compared_lines(differing[c.criterion_id]) if c.criterion_id in differing else [],
                marked=c.criterion_id in differing,
            )
            for c in view.criteria
        ]
        return Content(
            texts=_texts(),
            request=view.case.user_request,
            context=view.case.clinical_context,
            meta=_case_meta(bench),
            text_title=t("workbench.response", code=view.code),
            text=view.text,
            items_title=t("workbench.criteria", version=view.rubric_version, n=len(view.criteria)),
            items=items,
            unsaved=bench.unsaved,
            active_ms=bench.active_ms,
            readonly=view.final,
            notice=t("annotate.labeling.final") if view.final else None,
        )

    def _rubric_changed(self, error: RubricChanged) -> None:
        self.say("error", t("annotate.labeling.rubric_changed", version=error.current))
        self.reload()
        _refresh_queue()

    def _labels_changed(self, error: LabelsChanged, user: User, loaded: Loaded, sent: Sent) -> None:
        """The saved labels are shown, with this page's differing decisions beside them (kept as the draft)."""
        self._keep_refused(user, loaded, sent)
        self.reload()
        _refresh_queue()  # the other tab's save finished the response: the picker and the sidebar say so
        shell.forget_my_progress()
        self.rerun_app()
        self.say("error", _conflict_text(error.by_self, self.loaded(user, loaded["response_id"])["bench"]))

    def _keep_refused(self, user: User, loaded: Loaded, sent: Sent) -> None:
        """Keep a refused save's decisions as a draft of what this page showed, so the reload compares them."""
        try:
            with shell.db_session() as session:
                self.keep(session, user, loaded, sent)
        except ClinConsensusError:
            pass  # the comparison then starts from the draft kept before; the refusal is said either way


WORKBENCH = _LabelingWorkbench()
LOADED_KEY = WORKBENCH.loaded_key


def _conflict_text(by_self: bool, bench: Workbench) -> str:
    who = t("annotate.labeling.conflict_you" if by_self else "annotate.labeling.conflict_member")
    n = len(bench.differences)
    return f"{who} {t('annotate.labeling.compare', n=n) if n else t('annotate.labeling.compare_none')}"


def _skip() -> None:
    loaded = st.session_state.get(LOADED_KEY)
    current = loaded["response_id"] if loaded else st.session_state.get(CURRENT_KEY)
    if current is not None:
        _go_next(current)


# Page -----------------------------------------------------------------------------------------


def _pick(queue: LabelQueue) -> int:
    by_id = {item.response_id: item for item in queue.items}
    if st.session_state.get(CURRENT_KEY) not in by_id:
        requested = st.query_params.get("r")
        match = [item.response_id for item in queue.items if item.code == requested]
        following = queue.next_after(None)
        st.session_state[CURRENT_KEY] = (match or [following.response_id if following else queue.items[0].response_id])[
            0
        ]
    ids = list(by_id)
    position = ids.index(st.session_state[CURRENT_KEY])
    window = ids[max(0, position - PICKER_BEFORE) : position + PICKER_AFTER]
    # Every option's text on every run (a save reruns the page): the language is looked up once, not per text.
    tr = shell.translator()
    names = {
        rid: tr(
            "annotate.labeling.item",
            case_id=by_id[rid].case_id,
            code=by_id[rid].code,
            status=tr(
                f"annotate.labeling.status.{by_id[rid].status}", labeled=by_id[rid].labeled, size=by_id[rid].size
            ),
        )
        for rid in window
    }
    # One row whose buttons take the width of their words, so at 1024 px nothing is cut; the picker takes the rest.
    with st.container(horizontal=True, vertical_alignment="bottom", gap="small", wrap=False):
        response_id = st.selectbox(
            t("annotate.labeling.pick"),
            window,
            key=CURRENT_KEY,
            label_visibility="collapsed",
            format_func=names.__getitem__,
        )
        st.progress(
            queue.done / queue.total if queue.total else 0.0,
            text=shell.progress_text("label", queue.done, queue.total),
            width=PROGRESS_WIDTH_PX,
        )
        st.button(t("annotate.labeling.skip"), on_click=_skip, key="annotate_label_skip", width="content")
        st.button(
            t("annotate.labeling.refresh_short"),
            icon=":material/refresh:",
            key="annotate_label_refresh",
            on_click=_refresh_queue,
            help=t("annotate.labeling.refresh"),
            width="content",
        )
    stale = sum(item.status == STALE for item in queue.items)
    if stale:
        st.caption(t("annotate.labeling.stale_count", n=stale))
    st.query_params["r"] = by_id[response_id].code
    return response_id


def _case_meta(bench: Workbench) -> str:
    case = bench.view.case
    taxonomy = get_taxonomy()
    return t(
        "workbench.case_meta",
        case_id=case.case_id,
        difficulty=taxonomy.name("difficulties", case.difficulty, shell.lang()),
        subject=widgets.subject_text(case.subject),
        user_role=widgets.asker_text(case.user_role),
    )


def _texts() -> dict[str, str]:
    return workbench_texts(
        "request",
        "met",
        "not_met",
        "unjudged",
        "legend",
        "mark_rest",
        "confirm_yes",
        "confirm_no",
        "note_label",
        "note_hint",
        save=t("workbench.save_next"),
        # Filled in by the browser: {n} unjudged, {judged}/{total}.
        confirm_rest=t("workbench.confirm_rest", n="{n}"),
        count=t("workbench.count", judged="{judged}", total="{total}"),
    )


def _decision_text(met: bool | None) -> str:
    return t("workbench.unjudged" if met is None else "workbench.met" if met else "workbench.not_met")


def _compared_lines(difference: Difference) -> list[dict[str, str]]:
    """The saved value and the draft's, under a criterion the draft decided otherwise."""
    return [
        {
            "label": t("annotate.labeling.saved_value"),
            "value": _decision_text(difference.saved),
            "note": difference.saved_note,
        },
        {
            "label": t("annotate.labeling.draft_value"),
            "value": _decision_text(difference.draft),
            "note": difference.draft_note,
        },
    ]


@st.fragment
def _workbench(user: User, response_id: int) -> None:
    """The workbench alone reruns on each decision; a save reruns the whole page (picker, sidebar)."""
    WORKBENCH.show(user, response_id)


def render() -> None:
    user = shell.require_user(Role.annotator)
    wb.compact_page()
    queue = _load_queue(user)
    if not queue.items:
        st.subheader(t("annotate.labeling.title"))
        st.info(t("annotate.labeling.empty_queue"))
        return
    response_id = _pick(queue)
    _workbench(user, response_id)
