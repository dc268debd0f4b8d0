"""Hand out work: rubric authoring by specialty or case, hit labeling per group, a model's calibration
sample, the responses where two judges disagree, reassignment.

The balancing and the rules (one annotator per group per response, never the rubric's author)
live in `db.work.assignments`; this page only collects the choice and shows the result.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st
from sqlmodel import Session

from db.rules.enums import AssignmentKind, Role
from db.rules.errors import ClinConsensusError
from db.store.models import User
from db.work import assignments, calibration, disagreements, status
from db.work.assignments import AssignmentSummary
from ui import shell, widgets

TABLE_LIMIT = 500
#: Session keys: the result of the last action (with its tab), and an assignment previewed, not yet confirmed.
FLASH_KEY = "assign_flash"
PREVIEW_KEY = "assign_preview"


def _person_label(people: dict[str, User], t: shell.Translator, *, with_group: bool = True) -> Callable[[str], str]:
    def label(username: str) -> str:
        person = people[username]
        name = widgets.person_label(username, person.display_name)
        return f"{name} · {t('group.name', group=person.group_no)}" if with_group else name

    return label


def _run(action: Callable[[Session], object], tab: str) -> None:
    """Does `action` in one transaction; its summary is shown next to the control that asked (`tab`)."""
    try:
        with st.spinner(shell.t("admin.assign.working")), shell.db_session() as session:
            summary = action(session)
    except ClinConsensusError as error:
        widgets.show_error(error)
        return
    st.session_state.pop(PREVIEW_KEY, None)
    st.session_state[FLASH_KEY] = (tab, summary)
    st.rerun()


def _flash(tab: str) -> None:
    """The result of the action just done in `tab`, in that tab only: read once, so it is gone after the next
    click anywhere (switching tabs shows no old banner)."""
    flash = st.session_state.get(FLASH_KEY)
    if flash is None or flash[0] != tab:
        return
    del st.session_state[FLASH_KEY]
    st.toast(shell.t("daily.assign.done"), icon=":material/check_circle:")
    _show_summary(flash[1])


def _preview(tab: str, action: Callable[[Session, bool], AssignmentSummary]) -> None:
    """Computes what `action` would create (writing nothing) and keeps it for `_confirm` to show."""
    try:
        with shell.db_session(read_only=True) as session:
            summary = action(session, True)
    except ClinConsensusError as error:
        widgets.show_error(error)
        return
    st.session_state.pop(FLASH_KEY, None)
    st.session_state[PREVIEW_KEY] = (tab, summary, action)


def _confirm(tab: str) -> None:
    """The preview of `tab`'s assignment beside its button: what it will create, then confirm or cancel."""
    kept = st.session_state.get(PREVIEW_KEY)
    if kept is None or kept[0] != tab:
        return
    t = shell.translator()
    _, summary, action = kept
    with st.container(border=True):
        if not summary.created:
            st.info(t("daily.assign.preview.nothing", existing=f"{summary.already_assigned:,}"))
        else:
            st.markdown(
                t(
                    "daily.assign.preview.title",
                    created=f"{summary.created:,}",
                    existing=f"{summary.already_assigned:,}",
                )
            )
        if summary.unassignable:
            st.warning(t("admin.assign.unassignable", count=len(summary.unassignable)))
        # The buttons under the sentence that says what they do; the per-user breakdown, however long, after.
        left, right, _ = st.columns([1, 1, 3])
        confirmed = summary.created > 0 and left.button(
            t("daily.assign.confirm", created=f"{summary.created:,}"), type="primary", key=f"assign_confirm_{tab}"
        )
        # Nothing to confirm: the one button closes the preview, where the confirm button would stand.
        if (right if summary.created else left).button(t("daily.assign.cancel"), key=f"assign_cancel_{tab}"):
            st.session_state.pop(PREVIEW_KEY, None)
            st.rerun()
        if summary.created:
            _per_user(t, summary)
    if confirmed:
        _run(lambda session: action(session, False), tab)


def _per_user(t: shell.Translator, summary: AssignmentSummary) -> None:
    if summary.per_user:
        st.dataframe(
            [
                {t("admin.assign.col.user"): name, t("admin.assign.col.new"): count}
                for name, count in sorted(summary.per_user.items())
            ],
            hide_index=True,
            width="content",
        )


def _show_summary(summary) -> None:
    t = shell.translator()
    if isinstance(summary, calibration.CalibrationDraw):
        st.success(
            t(
                "admin.assign.calibration.drawn",
                model=widgets.plain(summary.model),
                n=len(summary.response_ids),
                seed=summary.seed,
            )
        )
        summary = summary.assignments
    if isinstance(summary, disagreements.Disagreements):
        a, b = (widgets.plain(name) for name in summary.judges)
        st.success(t("admin.assign.disagreements.drawn", judge_a=a, judge_b=b, n=len(summary.drawn)))
        summary = summary.assignments
    if isinstance(summary, str):
        st.success(summary)
        return
    st.success(t("admin.assign.result", created=summary.created, existing=summary.already_assigned))
    _per_user(t, summary)
    if summary.unassignable:
        st.warning(t("admin.assign.unassignable", count=len(summary.unassignable)))
        with st.expander(t("admin.assign.unassignable.details")):
            widgets.show_text("\n".join(summary.unassignable[:200]))


def render() -> None:
    admin = shell.require_user(Role.admin)
    t = shell.translator()
    st.title(t("admin.assign.title"))

    with shell.db_session(read_only=True) as session:
        people = {p.username: p for p in assignments.active_annotators(session)}
        subjects = assignments.specialties(session)
    label = _person_label(people, t)
    short_label = _person_label(people, t, with_group=False)

    rubric_tab, label_tab, calibration_tab, disagreement_tab, reassign_tab, list_tab = st.tabs(
        [
            t("admin.assign.tab.rubric"),
            t("admin.assign.tab.label"),
            t("admin.assign.tab.calibration"),
            t("admin.assign.tab.disagreements"),
            t("admin.assign.tab.reassign"),
            t("admin.assign.tab.list"),
        ],
        key="assign_tabs",
    )

    with rubric_tab:
        _rubric_tab(admin, people, subjects, label)

    with label_tab:
        _label_tab(admin, people, short_label)

    with calibration_tab:
        _calibration_tab(admin)

    with disagreement_tab:
        _disagreement_tab(admin)

    with reassign_tab:
        _reassign_tab(admin, people, label)

    with list_tab:
        _list_tab(admin, people, label)


def _rubric_tab(admin: User, people: dict[str, User], subjects: list[str], label: Callable[[str], str]) -> None:
    """Rubric authoring for the chosen annotators, by specialty or by a list of case ids."""
    t = shell.translator()
    st.caption(t("admin.assign.rubric.intro"))
    # Outside the form, so switching shows only the matching input at once.
    by = st.radio(
        t("admin.assign.rubric.by"),
        ("specialty", "cases"),
        horizontal=True,
        key="rubric_by",
        format_func=lambda v: t(f"admin.assign.rubric.by.{v}"),
    )
    with st.form("assign_rubric"):
        specialty, case_text = None, ""
        if by == "specialty":
            specialty = st.selectbox(
                t("admin.assign.specialty"),
                subjects,
                index=None,
                key="rubric_specialty",
                placeholder=t("admin.assign.specialty.placeholder"),
            )
        else:
            case_text = st.text_area(
                t("admin.assign.case_ids"), help=t("admin.assign.case_ids.help"), height=100, key="rubric_cases"
            )
        chosen = st.multiselect(
            t("admin.assign.annotators"),
            list(people),
            format_func=label,
            key="rubric_people",
            placeholder=t("admin.assign.choose_people"),
        )
        if st.form_submit_button(t("admin.assign.rubric.submit"), type="primary"):
            case_ids = [c for c in case_text.replace(",", " ").split() if c]
            if by == "specialty" and not specialty:
                st.warning(t("admin.assign.need_specialty"))
            elif by == "cases" and not case_ids:
                st.warning(t("admin.assign.need_cases"))
            else:
                _preview(
                    "rubric",
                    lambda s, preview: assignments.assign_rubric_authoring(
                        s,
                        actor=admin,
                        annotators=chosen,
                        specialty=specialty if by == "specialty" else None,
                        case_ids=case_ids if by == "cases" else None,
                        preview=preview,
                    ),
                )
    _confirm("rubric")
    _flash("rubric")


def _label_tab(admin: User, people: dict[str, User], short_label: Callable[[str], str]) -> None:
    """Hit labeling for the chosen members of each group (everyone, unless narrowed)."""
    t = shell.translator()
    st.caption(t("admin.assign.label.intro"))
    with st.form("assign_label"):
        left, right = st.columns(2)
        group1 = [u for u, p in people.items() if p.group_no == 1]
        group2 = [u for u, p in people.items() if p.group_no == 2]
        chosen1 = left.multiselect(
            t("group.name", group=1),
            group1,
            default=group1,
            format_func=short_label,
            placeholder=t("admin.assign.choose_people"),
        )
        chosen2 = right.multiselect(
            t("group.name", group=2),
            group2,
            default=group2,
            format_func=short_label,
            placeholder=t("admin.assign.choose_people"),
        )
        if st.form_submit_button(t("admin.assign.label.submit"), type="primary"):
            annotators = [*chosen1, *chosen2]
            _preview(
                "label",
                lambda s, preview: assignments.assign_labeling(s, actor=admin, annotators=annotators, preview=preview),
            )
    _confirm("label")
    _flash("label")


def _list_tab(admin: User, people: dict[str, User], label: Callable[[str], str]) -> None:
    """The assignments of one kind, of everyone or one annotator (the first TABLE_LIMIT)."""
    t = shell.translator()
    left, right = st.columns(2)
    kind = left.radio(
        t("admin.assign.kind"),
        (AssignmentKind.label.value, AssignmentKind.rubric.value),
        horizontal=True,
        format_func=lambda k: t(f"admin.assign.kind.{k}"),
    )
    who = right.selectbox(
        t("admin.assign.filter_user"),
        list(people),
        index=None,
        format_func=label,
        placeholder=t("admin.assign.everyone"),
    )
    with shell.db_session(read_only=True) as session:
        rows = assignments.list_assignments(
            session, actor=admin, kind=AssignmentKind(kind), username=who, limit=TABLE_LIMIT
        )
    st.caption(t("admin.assign.list.caption", shown=len(rows), limit=TABLE_LIMIT))
    st.dataframe(
        [
            {
                t("admin.assign.col.id"): r["id"],
                t("admin.assign.col.case"): r["case_id"],
                t("admin.assign.col.response"): r["response"] or "",
                t("admin.assign.col.model"): r["model"] or "",
                t("admin.assign.col.user"): widgets.person_label(
                    r["user"], people[r["user"]].display_name if r["user"] in people else None
                ),
                t("admin.assign.col.group"): r["group"],
            }
            for r in rows
        ],
        hide_index=True,
        width="stretch",
    )


def _task_text(t: shell.Translator, row: dict, people: dict[str, User], kind: str) -> str:
    """A task as the admin recognises it: case, kind, response code, group and who holds it (never the model)."""
    holder = people.get(row["user"])
    parts = [
        row["case_id"],
        t(f"admin.assign.kind.{kind}"),
        t("admin.assign.task.response", code=row["response"]) if row["response"] else None,
        t("group.name", group=row["group"]) if row["group"] else None,
        widgets.person_label(row["user"], holder.display_name if holder else None),
    ]
    return " · ".join(part for part in parts if part)


def _reassign_tab(admin: User, people: dict[str, User], label: Callable[[str], str]) -> None:
    """Pick a task (narrowed by kind and current holder), then the annotator it moves to."""
    t = shell.translator()
    st.caption(t("admin.assign.reassign.intro"))
    left, right = st.columns(2)
    kind = left.radio(
        t("admin.assign.kind"),
        (AssignmentKind.label.value, AssignmentKind.rubric.value),
        horizontal=True,
        format_func=lambda k: t(f"admin.assign.kind.{k}"),
        key="reassign_kind",
    )
    holder = right.selectbox(
        t("admin.assign.reassign.from"),
        list(people),
        index=None,
        format_func=label,
        placeholder=t("admin.assign.everyone"),
        key="reassign_from",
    )
    with shell.db_session(read_only=True) as session:
        rows = assignments.list_assignments(
            session, actor=admin, kind=AssignmentKind(kind), username=holder, limit=TABLE_LIMIT
        )
    tasks = {row["id"]: _task_text(t, row, people, kind) for row in rows}
    # Outside a form: the people offered follow the task chosen (its group, never its holder; db's rule).
    task = st.selectbox(
        t("admin.assign.task"),
        list(tasks),
        format_func=tasks.__getitem__,
        index=None,
        placeholder=t("admin.assign.task.choose", shown=f"{len(tasks):,}"),
        key="reassign_task",
    )
    candidates: list[str] = []
    if task is not None:
        with shell.db_session(read_only=True) as session:
            candidates = assignments.reassign_candidates(session, actor=admin, assignment_id=task)
    target = st.selectbox(
        t("admin.assign.to"),
        [name for name in candidates if name in people],
        format_func=label,
        index=None,
        placeholder=t("admin.assign.choose_person" if task is None or candidates else "daily.assign.reassign.nobody"),
        disabled=task is not None and not candidates,
        key="reassign_to",
    )
    if st.button(t("admin.assign.reassign.submit"), type="primary", key="reassign_submit"):
        if task is None or target is None:
            st.warning(t("admin.assign.need_both"))
        else:
            _run(lambda s: _reassigned(s, admin, task, tasks[task], target, label(target)), "reassign")
    _flash("reassign")


def _reassigned(session: Session, admin: User, assignment_id: int, task: str, target: str, target_name: str) -> str:
    assignments.reassign(session, actor=admin, assignment_id=assignment_id, to_username=target)
    return shell.t("admin.assign.reassigned", task=widgets.plain(task), name=widgets.plain(target_name))


def _calibration_tab(admin: User) -> None:
    """Draw a model's calibration sample (once per model; the rule is db.work.calibration's)."""
    t = shell.translator()
    st.caption(t("admin.assign.calibration.intro"))
    with shell.db_session(read_only=True) as session:
        models = calibration.response_models(session, actor=admin)
        sampled = calibration.sampled_models(session, actor=admin)
    if sampled:
        st.dataframe(
            [
                {t("admin.assign.col.model"): model, t("admin.assign.calibration.col.size"): size}
                for model, size in sampled.items()
            ],
            hide_index=True,
            width="content",
        )
    with st.form("assign_calibration"):
        model = st.selectbox(
            t("admin.assign.col.model"),
            [m for m in models if m not in sampled],
            index=None,
            placeholder=t("admin.assign.calibration.choose_model"),
        )
        # No seed here: the server draws one and the audit log records it (a chosen seed could be shopped).
        size = st.number_input(
            t("admin.assign.calibration.size"), min_value=1, step=1, value=calibration.DEFAULT_SAMPLE_SIZE
        )
        if st.form_submit_button(t("admin.assign.calibration.submit"), type="primary"):
            if model is None:
                st.warning(t("admin.assign.calibration.need_model"))
            else:
                _run(
                    lambda s: calibration.draw_calibration_sample(s, actor=admin, model=model, n=int(size)),
                    "calibration",
                )
    _flash("calibration")


def _disagreement_tab(admin: User) -> None:
    """Draw the responses without gold where two judges differ most (the rules are db.work.disagreements')."""
    t = shell.translator()
    st.caption(t("admin.assign.disagreements.intro"))
    with shell.db_session(read_only=True) as session:
        judges = status.judge_names(session)
        drawn = disagreements.drawn_counts(session, actor=admin)
    if drawn:
        st.dataframe(
            [
                {
                    t("admin.assign.disagreements.judge_a"): a,
                    t("admin.assign.disagreements.judge_b"): b,
                    t("admin.assign.disagreements.col.drawn"): count,
                }
                for (a, b), count in drawn.items()
            ],
            hide_index=True,
            width="content",
        )
    with st.form("assign_disagreements"):
        left, right = st.columns(2)
        choose = t("admin.assign.disagreements.choose_judge")
        judge_a = left.selectbox(t("admin.assign.disagreements.judge_a"), judges, index=None, placeholder=choose)
        judge_b = right.selectbox(t("admin.assign.disagreements.judge_b"), judges, index=None, placeholder=choose)
        size = st.number_input(
            t("admin.assign.disagreements.size"), min_value=1, step=1, value=disagreements.DEFAULT_DRAW_SIZE
        )
        if st.form_submit_button(t("admin.assign.disagreements.submit"), type="primary"):
            if judge_a is None or judge_b is None:
                st.warning(t("admin.assign.disagreements.need_judges"))
            else:
                _run(
                    lambda s: disagreements.draw_disagreements(s, actor=admin, judges=[judge_a, judge_b], n=int(size)),
                    "disagreements",
                )
    _flash("disagreements")
