"""Who may do what: role, expert group, blinding and separation of duties, in one place."""

from __future__ import annotations

from db.rules.errors import PermissionDenied, Said
from db.store.models import Role, User


def require_active(user: User) -> None:
    if user is None or not user.is_active:
        raise PermissionDenied("account is not active", key="errors.account_inactive")


def require_role(user: User, *roles: Role) -> None:
    require_active(user)
    if user.role not in {str(r) for r in roles}:
        raise PermissionDenied(
            f"role {user.role} may not do this", key="errors.role_may_not", params={"role": str(user.role)}
        )


def require_admin(user: User) -> None:
    require_role(user, Role.admin)


def require_group_member(user: User, group_no: int) -> None:
    """Annotators and checkers act only within their own expert group."""
    require_role(user, Role.annotator, Role.checker)
    if user.group_no != group_no:
        raise PermissionDenied("labels of another expert group are not visible to you", key="errors.other_group_hidden")


def require_may_see_group_statistics(user: User) -> None:
    """Model names, per-group label sources and per-group statistics (the dashboard, reports): admins only.

    A checker who saw the other group's agreement figures per model and case could steer their
    own group's labels; annotators are blinded to models altogether.
    """
    require_admin(user)


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
