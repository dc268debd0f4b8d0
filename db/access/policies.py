"""Who may do what: one policy per resource, and every workflow asks `authorize(session, actor, Policy.action(...))`.

A policy's action returns a `Rule`: a function of the acting user that gives the refusal (a
`PermissionDenied` naming its catalog entry) or None. The facts a rule needs from the database — who
made the labels, whether a response is assigned to the actor, whether its adjudication is open —
are read by the workflow and handed to the action, so the rules read like the protocol
(docs/REFERENCE.md §1): roles, expert groups, blinding, separation of duties, independence.

    authorize(user, LabelPolicy.check(annotator_id=annotation.user_id))
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import object_session
from sqlmodel import Session, col

from db.rules.enums import Role
from db.rules.errors import PermissionDenied, Said
from db.store.models import User

#: A rule: the refusal for this actor, or None when they may.
Rule = Callable[[User], PermissionDenied | None]

#: The two expert groups; annotators and checkers belong to one of them.
EXPERT_GROUPS = (1, 2)


#: What the audit log records for the command line: no account can have it (names match
#: `db.access.users.USERNAME_PATTERN`, which has no "@" or ":").
COMMAND_LINE = "@cli"


@dataclass(frozen=True)
class SystemActor:
    """The command line, the demo generator or an import acting without a browser user; `name` goes in the audit log.

    Whoever runs these holds the database itself, so policies take them as an admin, explicitly
    (`current_user`). Pages pass the signed-in `User` and never make one of these.
    """

    name: str

    @classmethod
    def command_line(cls, operator: str | None = None) -> SystemActor:
        """The command line, with the operator's note (`--actor NAME`) kept beside it: `@cli` or `@cli:NAME`."""
        return cls(COMMAND_LINE if not operator else f"{COMMAND_LINE}:{operator}"[:64])


#: The admins `current_user` made for a system actor, by identity: only these stand for no stored account.
_SYSTEM_STAND_INS: weakref.WeakValueDictionary[int, User] = weakref.WeakValueDictionary()


def current_user(session: Session, actor: User | SystemActor) -> User:
    """The acting user as the database says now, not as the caller's object remembers it (a page's `User`
    may be stale or edited): re-read by id, an account gone reads as inactive. A `SystemActor` (whoever holds
    the database) is taken as an admin under its own name; a `User` that is not stored stands for no one."""
    if isinstance(actor, SystemActor):
        stand_in = User(username=actor.name, role=Role.admin, is_active=True)
        _SYSTEM_STAND_INS[id(stand_in)] = stand_in
        return stand_in
    if actor.id is None:
        if _SYSTEM_STAND_INS.get(id(actor)) is actor:  # handed on by a workflow that already asked
            return actor
        return User(username=actor.username, role=actor.role, is_active=False)
    if object_session(actor) is session and actor not in session.dirty:
        return actor  # read by this session (a step of a workflow that already asked), unchanged since
    fresh = session.execute(
        select(User).where(col(User.id) == actor.id).execution_options(populate_existing=True)
    ).scalar_one_or_none()
    if fresh is None or fresh.username != actor.username:
        return User(username=actor.username, role=actor.role, is_active=False)
    return fresh


def authorize(session: Session, actor: User | SystemActor, rule: Rule) -> User:
    """Raises the rule's refusal for the acting user as the database says now (`current_user`), else returns
    that user: every workflow asks through here, so none decides on a caller's stale or edited object."""
    user = current_user(session, actor)
    refusal = rule(user)
    if refusal is not None:
        raise refusal
    return user


# The building blocks every policy combines ------------------------------------------------------


def _inactive(actor: User | None) -> PermissionDenied | None:
    if actor is None or not actor.is_active:
        return PermissionDenied("account is not active", key="errors.account_inactive")
    return None


def _role_refusal(actor: User, *roles: Role) -> PermissionDenied | None:
    refusal = _inactive(actor)
    if refusal is None and actor.role not in {str(role) for role in roles}:
        refusal = PermissionDenied(
            f"role {actor.role} may not do this", key="errors.role_may_not", params={"role": str(actor.role)}
        )
    return refusal


def _all(*rules: Rule) -> Rule:
    """The first refusal of `rules`, in order (a role is checked before what depends on it)."""

    def rule(actor: User) -> PermissionDenied | None:
        for each in rules:
            refusal = each(actor)
            if refusal is not None:
                return refusal
        return None

    return rule


def _has_role(*roles: Role) -> Rule:
    return lambda actor: _role_refusal(actor, *roles)


def _refuse_when(condition: bool, refusal: PermissionDenied) -> Rule:
    return lambda actor: refusal if condition else None


def active() -> Rule:
    """Any active account (its own drafts, its own progress)."""
    return _inactive


def admin() -> Rule:
    return _has_role(Role.admin)


class _AdminWork:
    """A resource only admins manage."""

    @staticmethod
    def manage() -> Rule:
        return admin()


# Policies, one per resource ----------------------------------------------------------------------


class AssignmentPolicy(_AdminWork):
    """Labeling and rubric assignments: admins assign and reassign; an annotator reads their own."""

    @staticmethod
    def read_own() -> Rule:
        return _has_role(Role.annotator)


class FeedbackPolicy(_AdminWork):
    """Rounds' feedback: admins open and close it; annotators of the two groups receive it."""

    @staticmethod
    def receive(*, group_no: int | None) -> Rule:
        return _all(
            _has_role(Role.annotator),
            _refuse_when(
                group_no not in EXPERT_GROUPS,
                PermissionDenied("feedback is for annotators of expert group 1 or 2", key="errors.feedback_annotators"),
            ),
        )


class JudgeRunPolicy(_AdminWork):
    """Judge and generate runs, and the judge's errors against the physicians."""


class CalibrationPolicy(_AdminWork):
    """A model's calibration sample, and the responses drawn where two judges disagree."""


class LeaderboardPolicy(_AdminWork):
    """Leaderboard snapshots."""


class AuditLogPolicy(_AdminWork):
    """Reading and searching the audit log."""


class CriterionReturnPolicy(_AdminWork):
    """Sending criteria back to their authors after labels were made on them."""


class ProgressPolicy(_AdminWork):
    """Everyone's progress and the models' names (admins); an active user's own figures."""

    @staticmethod
    def read_own() -> Rule:
        return active()


class TimeOnTaskPolicy(_AdminWork):
    """Everyone's time on task (the annotator sees only their own figures elsewhere)."""


class AccountPolicy:
    """Accounts: admins manage every account; an active user acts on their own (password, sessions)."""

    @staticmethod
    def manage(*, admin_now: bool) -> Rule:
        """`admin_now`: the actor is an active admin as the database says now, not as the caller remembers."""
        return _refuse_when(
            not admin_now, PermissionDenied("only admins manage accounts", key="errors.accounts_admin_only")
        )


class StatisticsPolicy:
    """Model names, per-group label sources and per-group statistics (the dashboard, reports): admins only.

    A checker who saw the other group's agreement figures per model and case could steer their own
    group's labels; annotators are blinded to models altogether.
    """

    @staticmethod
    def see_group_figures() -> Rule:
        return admin()


class DisagreementFiguresPolicy:
    """Counts and lists of open disagreements: an admin sees every response's, a checker those taken into
    adjudication (db.access.independence), an annotator none (they would learn the other group's labels)."""

    @staticmethod
    def read() -> Rule:
        return _all(
            _inactive,
            lambda actor: (
                PermissionDenied("annotators do not see the other group's labels", key="errors.other_group_hidden")
                if actor.role == Role.annotator
                else None
            ),
            _has_role(Role.checker, Role.admin),
        )


class RubricPolicy:
    """A case's rubric: the annotator it is assigned to writes it; another checker audits it."""

    @staticmethod
    def author(*, assigned: bool = True) -> Rule:
        return _all(
            _has_role(Role.annotator),
            _refuse_when(
                not assigned,
                PermissionDenied("this case's rubric is not assigned to you", key="errors.rubric_not_assigned"),
            ),
        )

    @staticmethod
    def audit(*, author_id: int | None = None) -> Rule:
        return _all(
            _has_role(Role.checker),
            lambda actor: (
                PermissionDenied("you wrote this rubric; another checker must audit it", key="errors.audit_own")
                if author_id is not None and author_id == actor.id
                else None
            ),
        )


class LabelsFinal(PermissionDenied):
    """A save or draft of annotation labels on a response whose round's feedback was opened (they are final)."""

    def __init__(self) -> None:
        super().__init__(
            "labels: final since the feedback of this response's round was opened; nothing was saved",
            key="errors.labels_final",
        )


class ReferencePolicy:
    """A case's reference answer (docs/REFERENCE.md §1): read by the case's rubric author, rubric auditors and
    admins only; written by admins (an import or the authoring page)."""

    @staticmethod
    def read(*, is_author: bool = False) -> Rule:
        return _all(
            _has_role(Role.admin, Role.checker, Role.annotator),
            lambda actor: (
                PermissionDenied(
                    "the reference answer is shown to the case's rubric author only", key="errors.reference_not_author"
                )
                if actor.role == Role.annotator and not is_author
                else None
            ),
        )

    @staticmethod
    def write() -> Rule:
        return admin()


class LabelPolicy:
    """Labels of the two expert groups: who annotates, checks and adjudicates, and who may see what."""

    @staticmethod
    def annotate(*, group_no: int | None = None, assigned: bool = True) -> Rule:
        """An annotator of group 1 or 2 labels what is assigned to them, within their own group."""

        def in_group(actor: User) -> PermissionDenied | None:
            if actor.group_no not in EXPERT_GROUPS:
                return PermissionDenied("annotators label within expert group 1 or 2", key="errors.annotator_group")
            if group_no is not None and actor.group_no != group_no:
                return PermissionDenied(
                    "labels of another expert group are not visible to you", key="errors.other_group_hidden"
                )
            return None

        return _all(
            _has_role(Role.annotator),
            in_group,
            _refuse_when(
                not assigned,
                PermissionDenied("this response is not assigned to you", key="errors.response_not_assigned"),
            ),
        )

    @staticmethod
    def change_annotation(*, final: bool) -> Rule:
        """Annotation labels (a save, a kept draft) change only while their round's feedback was never opened
        (`final`: db/labeling/freeze.py read it)."""
        return _refuse_when(final, LabelsFinal())

    @staticmethod
    def read_checks() -> Rule:
        """The checker's queues and views (their own group's labels only, by what the workflow reads)."""
        return _has_role(Role.checker)

    @staticmethod
    def read_annotator_queue(*, annotator_id: int) -> Rule:
        """A checker reads an annotator's queue of their group, never their own."""
        return _all(
            _has_role(Role.checker),
            lambda actor: (
                PermissionDenied("you cannot check your own labels", key="errors.check_own")
                if annotator_id == actor.id
                else None
            ),
        )

    @staticmethod
    def check(*, annotator_id: int | None = None, labels_closed: bool = False) -> Rule:
        """A checker of group 1 or 2 checks their own group's labels, never their own, and not after having
        seen the other group's labels of the response (its adjudication opened to them)."""
        return _all(
            _has_role(Role.checker),
            lambda actor: (
                PermissionDenied("checkers act within their expert group", key="errors.checker_group")
                if actor.group_no not in EXPERT_GROUPS
                else None
            ),
            lambda actor: (
                PermissionDenied("you cannot check your own labels", key="errors.check_own")
                if annotator_id is not None and annotator_id == actor.id
                else None
            ),
            _refuse_when(labels_closed, PermissionDenied(SEEN_OTHER_GROUP, key="errors.seen_other_group")),
        )

    @staticmethod
    def adjudicate(*, annotated_it: bool = False, check_pending: bool = False, opened: bool = True) -> Rule:
        """A checker who annotated none of the response, once their group's check of it is done, and only
        after opening its adjudication (recorded before any label of the other group is shown)."""
        return _all(
            _has_role(Role.checker),
            _refuse_when(annotated_it, PermissionDenied(ANNOTATED_IT, key="errors.adjudicate_own")),
            _refuse_when(check_pending, PermissionDenied(CHECK_PENDING, key="errors.check_pending")),
            _refuse_when(
                not opened,
                PermissionDenied("open the adjudication of this response first", key="errors.adjudication_not_open"),
            ),
        )


#: The independence refusals (db.access.independence reads the facts).
CHECK_PENDING = "your group has not finished checking this response; check it before adjudicating"
ANNOTATED_IT = "you annotated this response; another checker must adjudicate it"
SEEN_OTHER_GROUP = (
    "you have seen the other group's labels on this response in adjudication; "
    "your group's labels on it are closed to you"
)


#: Who makes a label of each stage: annotators annotate, checkers check and adjudicate.
LABEL_AUTHOR_ROLE = {"annotation": Role.annotator, "check": Role.checker, "adjudication": Role.checker}


def label_author_refusal(role: str, user_group: int | None, stage: str, group_no: int | None) -> Said | None:
    """Why a user of `role` in `user_group` may not be the author of a `stage` label of group `group_no`
    (None: they may). An annotation or check label belongs to its author's own expert group."""
    needed = LABEL_AUTHOR_ROLE[stage]
    if role != needed:
        return Said(
            f"is {role}, not {needed}: {stage} labels are made by {needed}s",
            "errors.label_author_role",
            role=Said(role, f"role.{role}"),
            needed=Said(str(needed), f"role.{needed}"),
            stage=Said(stage, f"import.stage.{stage}"),
        )
    if stage != "adjudication" and user_group != group_no:
        return Said(
            f"is in expert group {user_group or '—'}, not group {group_no}",
            "errors.label_author_group",
            user_group=user_group or "—",
            group=group_no,
        )
    return None
