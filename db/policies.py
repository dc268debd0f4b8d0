"""Who may do what: role, expert group, blinding and separation of duties, in one place."""

from __future__ import annotations

from db.errors import PermissionDenied
from db.models import Role, User


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
