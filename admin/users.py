"""Accounts and the two expert groups: add, activate/deactivate, reset a password, change role or group.

Every change goes through `db.access.users`, which validates it and writes the audit entry.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st
from sqlmodel import Session

from db.access import users
from db.rules.enums import Role
from db.rules.errors import ClinConsensusError
from db.store.models import User
from ui import shell, widgets

ROLES = (Role.annotator.value, Role.checker.value, Role.admin.value)
GROUP_CHOICES = (1, 2, None)
#: The add form's fields: kept through a refusal (so one mistake is corrected, not everything retyped),
#: emptied once the account is added.
ADD_FIELDS = ("add_username", "add_display_name", "add_role", "add_group", "add_password")


def _group_labeler(t: shell.Translator) -> Callable[[int | None], str]:
    return lambda group: t("group.name", group=group) if group else t("admin.users.no_group")


def _apply(
    action: Callable[[Session], object], success_key: str, *, clear: tuple[str, ...] = (), **values: object
) -> None:
    """Run one change in its own transaction; report success or the reason, in the user's language.

    The widgets named in `clear` start empty again after a success only.
    """
    try:
        with shell.db_session() as session:
            action(session)
    except ClinConsensusError as error:
        st.error(widgets.error_text(error))
        return
    for key in clear:
        st.session_state.pop(key, None)
    st.session_state["users_flash"] = shell.t(success_key, **values)
    st.rerun()


def _table(accounts: list[User], locked_names: dict) -> list[dict]:
    t = shell.translator()
    _group_label = _group_labeler(t)
    rows = []
    for account in accounts:
        locked = users.throttle_key(account.username) in locked_names
        rows.append(
            {
                t("admin.users.col.username"): account.username,
                t("admin.users.col.display_name"): account.display_name,
                t("admin.users.col.role"): t(f"role.{account.role}"),
                t("admin.users.col.group"): _group_label(account.group_no),
                t("admin.users.col.active"): account.is_active,
                t("admin.users.col.locked"): locked,
            }
        )
    return rows


def render() -> None:
    admin = shell.require_user(Role.admin)
    t = shell.translator()
    st.title(t("admin.users.title"))
    flash = st.session_state.pop("users_flash", None)
    if flash:
        st.success(flash)

    with shell.db_session(read_only=True) as session:
        accounts = users.list_users(session, actor=admin)
        locked_names = users.locked_names(session, actor=admin)
    st.dataframe(_table(accounts, locked_names), hide_index=True, width="stretch")

    add_tab, edit_tab, active_tab, password_tab = st.tabs(
        [
            t("admin.users.tab.add"),
            t("admin.users.tab.edit"),
            t("admin.users.tab.active"),
            t("admin.users.tab.password"),
        ],
        key="users_tabs",
    )
    names = {a.username: widgets.person_label(a.username, a.display_name) for a in accounts}
    with add_tab:
        _add_form(t, admin)
    with edit_tab:
        _edit_form(t, admin, accounts, names)
    with active_tab:
        _active_form(t, admin, names)
    with edit_tab:
        _identity_form(t, admin, names)
    with password_tab:
        _password_form(t, admin, names)


def _add_form(t: shell.Translator, admin: User) -> None:
    """A new account: name, role, group and first password."""
    _group_label = _group_labeler(t)
    with st.form("user_add"):
        left, right = st.columns(2)
        username = left.text_input(t("admin.users.username"), help=t("admin.users.username.help"), key="add_username")
        display_name = right.text_input(t("admin.users.display_name"), key="add_display_name")
        role = left.selectbox(t("admin.users.role"), ROLES, format_func=lambda r: t(f"role.{r}"), key="add_role")
        group = right.selectbox(t("admin.users.group"), GROUP_CHOICES, format_func=_group_label, key="add_group")
        password = left.text_input(
            t("admin.users.password"), type="password", help=t("admin.users.password.help"), key="add_password"
        )
        if st.form_submit_button(t("admin.users.add.submit"), type="primary"):
            _apply(
                lambda s: users.add_user(
                    s,
                    username=username.strip(),
                    role=role,
                    group_no=group,
                    password=password,
                    display_name=display_name.strip(),
                    actor=admin,
                ),
                "admin.users.added",
                clear=ADD_FIELDS,
                name=widgets.plain(username.strip()),
            )


def _edit_form(t: shell.Translator, admin: User, accounts: list[User], names: dict[str, str]) -> None:
    """An account's role and group; an admin never takes their own admin role away."""
    _group_label = _group_labeler(t)
    # Outside the form, so the role and group below start from the chosen account's current ones.
    name = st.selectbox(t("admin.users.account"), list(names), key="edit_name", format_func=names.__getitem__)
    account = next(a for a in accounts if a.username == name)
    # The account's current role and group as the pickers' first values, through session state only: a widget
    # given both a default and a state value (a language switch sets every picker's state) makes Streamlit warn.
    role_key, group_key = f"edit_role_{name}", f"edit_group_{name}"
    st.session_state.setdefault(role_key, ROLES[ROLES.index(account.role)] if account.role in ROLES else ROLES[0])
    st.session_state.setdefault(group_key, account.group_no if account.group_no in GROUP_CHOICES else GROUP_CHOICES[0])
    with st.form("user_edit"):
        left, right = st.columns(2)
        choose = t("chrome.text.choose_option")  # the page's own words, should a picker ever be empty
        role = left.selectbox(
            t("admin.users.role"), ROLES, format_func=lambda r: t(f"role.{r}"), key=role_key, placeholder=choose
        )
        group = right.selectbox(
            t("admin.users.group"), GROUP_CHOICES, format_func=_group_label, key=group_key, placeholder=choose
        )
        submitted = st.form_submit_button(t("admin.users.edit.submit"), type="primary")
    if submitted:
        if name == admin.username and role != Role.admin:
            st.error(t("admin.users.not_self"))
        else:
            _apply(
                lambda s: users.update_account(s, username=name, role=role, group_no=group, actor=admin),
                "admin.users.updated",
                name=widgets.plain(name),
            )


def _active_form(t: shell.Translator, admin: User, names: dict[str, str]) -> None:
    """Deactivate, activate or unlock an account; an admin never deactivates themselves."""
    with st.form("user_active"):
        name = st.selectbox(t("admin.users.account"), list(names), key="active_name", format_func=names.__getitem__)
        left, middle, right = st.columns(3)
        deactivate = left.form_submit_button(t("admin.users.deactivate"), icon=":material/person_off:")
        activate = middle.form_submit_button(t("admin.users.activate"), icon=":material/person_check:")
        unlock = right.form_submit_button(t("security.users.unlock"), icon=":material/lock_open:")
        if unlock:
            _apply(
                lambda s: users.unlock(s, username=name, actor=admin),
                "security.users.unlocked",
                name=widgets.plain(name),
            )
        if deactivate or activate:
            if deactivate and name == admin.username:
                st.error(t("admin.users.not_self"))
            else:
                _apply(
                    lambda s: users.set_active(s, username=name, active=bool(activate), actor=admin),
                    "admin.users.activated" if activate else "admin.users.deactivated",
                    name=widgets.plain(name),
                )


def _identity_form(t: shell.Translator, admin: User, names: dict[str, str]) -> None:
    """Links an account to a sign-in at the identity provider."""
    with st.form("user_identity", clear_on_submit=True):
        name = st.selectbox(t("admin.users.account"), list(names), key="identity_name", format_func=names.__getitem__)
        identity = st.text_input(t("security.users.identity"), key="identity_value")
        if st.form_submit_button(t("security.users.link"), icon=":material/badge:"):
            _apply(
                lambda s: users.link_identity(s, username=name, identity=identity, actor=admin),
                "security.users.linked",
                name=widgets.plain(name),
            )


def _password_form(t: shell.Translator, admin: User, names: dict[str, str]) -> None:
    """A new password for an account."""
    with st.form("user_password", clear_on_submit=True):
        name = st.selectbox(t("admin.users.account"), list(names), key="password_name", format_func=names.__getitem__)
        password = st.text_input(
            t("admin.users.new_password"), type="password", help=t("admin.users.password.help"), key="reset_password"
        )
        if st.form_submit_button(t("admin.users.password.submit"), type="primary"):
            _apply(
                lambda s: users.reset_password(s, username=name, password=password, actor=admin),
                "admin.users.password_reset",
                name=widgets.plain(name),
            )
