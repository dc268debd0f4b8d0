"""The app shell shared by every page: database, signed-in user, language, sidebar and login.

Pages call `require_user(*roles)` first; it stops the page for anyone else, whatever the
navigation shows. The browser keeps its sign-in in a cookie (`ui.session_cookie`: a random token
whose hash is stored server-side), so a refresh keeps the user signed in and no URL carries it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import streamlit as st
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.access import users
from db.migrations.upgrade import upgrade
from db.review import OpenDisagreements
from db.rules.enums import Role
from db.rules.errors import PermissionDenied
from db.rules.security import keep_files_private
from db.store.data_version import DataVersion, data_version
from db.store.engine import get_engine, session_scope
from db.store.models import User
from db.work import progress as progress_queries
from i18n import DEFAULT_LANGUAGE, LANGUAGES, translate
from ui import chrome_language, session_cookie, uploads
from ui.text import Translator, plain

uploads.install()  # before this process serves any page: only signed-in admins send files
keep_files_private()  # exports and backups a page writes hold labels: 0600, as from the command line

LANGUAGE_PARAM = "lang"
LANGUAGE_NAMES = {"zh": "中文", "en": "English"}
#: Sidebar figures kept in the process (one entry per user and data version; older versions drop out).
MY_PROGRESS_CACHE_ENTRIES = 512


@st.cache_resource(show_spinner=False)
def engine() -> Engine:
    """The process's engine, migrated once."""
    current = get_engine()
    upgrade(current)
    return current


#: How long a save waits for another writer (a long import) before the user is told to try again.
SAVE_LOCK_WAIT_MS = 10_000


@contextmanager
def db_session(*, read_only: bool = False) -> Iterator[Session]:
    with session_scope(engine(), read_only=read_only, lock_wait_ms=SAVE_LOCK_WAIT_MS) as session:
        yield session


def lang() -> str:
    """The user's language: chosen in this browser tab, else kept in the URL (survives a refresh), else Chinese."""
    chosen = st.session_state.get("lang")
    if chosen in LANGUAGES:
        return chosen
    from_url = st.query_params.get(LANGUAGE_PARAM)
    if from_url in LANGUAGES:
        st.session_state["lang"] = from_url
        return from_url
    return DEFAULT_LANGUAGE


def _keep_language_in_url() -> None:
    current = lang()
    if current != DEFAULT_LANGUAGE and st.query_params.get(LANGUAGE_PARAM) != current:
        st.query_params[LANGUAGE_PARAM] = current
    elif current == DEFAULT_LANGUAGE and LANGUAGE_PARAM in st.query_params:
        del st.query_params[LANGUAGE_PARAM]


def t(key: str, **values: object) -> str:
    """The catalog text of `key` in the user's language."""
    return translate(key, lang(), **values)


def translator() -> Translator:
    """`t` bound to the current language: safe in format_func callbacks, which may run after the page."""
    language = lang()
    return lambda key, **values: translate(key, language, **values)


def _browser_token() -> str | None:
    """This tab's token, else the cookie the browser sent (not after this tab signed out: that cookie is revoked)."""
    token = st.session_state.get("token")
    if token or st.session_state.get("signed_out"):
        return token
    return session_cookie.token_from_cookie()


def provider_configured() -> bool:
    """True when the hospital's identity provider is set up (an [auth] section in Streamlit's secrets)."""
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all
        return False


def _provider_sign_in_claims() -> tuple[str, object] | None:
    """The identity-provider account this browser signed in with (st.login) and when the provider issued it."""
    try:
        if not st.user.is_logged_in:
            return None
        issuer, subject, issued_at = st.user.get("iss"), st.user.get("sub"), st.user.get("iat")
    except Exception:  # no identity provider configured
        return None
    return (users.oidc_identity(str(issuer), str(subject)), issued_at) if issuer and subject else None


def _provider_identity() -> str | None:
    claims = _provider_sign_in_claims()
    return claims[0] if claims else None


def _sign_in_from_provider() -> str | None:
    """A session token for the local account linked to the provider's account, opened once per provider sign-in.

    None when the identity is not linked (the login page says so), or when this provider sign-in has
    already opened a session that has since ended: the login page then asks for a new sign-in.
    """
    if st.session_state.get("signed_out") or not provider_configured():
        return None
    claims = _provider_sign_in_claims()
    if claims is None:
        return None
    identity, issued_at = claims
    with db_session() as session:
        token = users.open_provider_session(session, identity=identity, issued_at=users.provider_issue_time(issued_at))
        linked = token is not None or users.identity_is_linked(session, identity=identity)
    st.session_state.pop("unlinked_identity", None)
    st.session_state.pop("provider_sign_in_ended", None)
    if not linked:
        st.session_state["unlinked_identity"] = identity
    elif token is None:
        st.session_state["provider_sign_in_ended"] = True
    else:
        st.session_state["token"] = token
    return token


def _user_of(token: str | None) -> tuple[User | None, bool]:
    """The live session's user, and whether its idle clock wants a refresh."""
    if not token:
        return None, False
    with db_session(read_only=True) as session:
        user = users.user_for_token(session, token=token)
        return user, user is not None and users.session_needs_touch(session, token=token)


def current_user() -> User | None:
    """The signed-in user, resolved from the browser's token on every run (so deactivation bites at once).

    A sign-in at the identity provider only opens a local session (`users.open_provider_session`);
    from then on the same rules hold for both: idle timeout, lifetime, revocation.
    """
    token = _browser_token()
    user, needs_touch = _user_of(token)
    if user is None:
        st.session_state.pop("token", None)
        token = _sign_in_from_provider()
        user, needs_touch = _user_of(token)
    uploads.note_sign_in(user, token)
    if user is None:
        st.session_state.pop("token", None)
        return None
    if needs_touch and token:  # restart the idle clock, at most once a minute
        with db_session() as session:
            users.touch_session(session, token=token)
    st.session_state["token"] = token
    return user


def require_user(*roles: Role) -> User:
    """The signed-in user when their role is one of `roles` (any role when none given); else stop."""
    user = current_user()
    if user is None or (roles and user.role not in {str(r) for r in roles}):
        st.error(t("error.permission"))
        st.stop()
    return user


def sign_in(username: str, password: str) -> bool:
    """True when signed in; raises users.LoginThrottled while the name is locked."""
    user = users.authenticate(engine(), username=username.strip(), password=password)
    if user is None:
        return False
    with db_session() as session:
        token = users.open_session(session, user=user)
    st.session_state["token"] = token
    st.session_state.pop("signed_out", None)
    return True


def sign_out() -> bool:
    """Ends this tab's session; True when the browser is sent on to end the identity provider's sign-in too."""
    token = st.session_state.pop("token", None)
    if token:
        with db_session() as session:
            users.close_session(session, token=token)
    st.session_state["signed_out"] = True
    _keep_language_in_url()
    if _provider_identity() is not None:
        st.logout()  # the browser goes to the provider's end-session page, then back to a new session
        return True
    return False


def keep_sign_in_cookie() -> None:
    """Writes this tab's token into the browser's cookie, or clears a cookie left after signing out."""
    token = st.session_state.get("token")
    if token and session_cookie.token_from_cookie() != token:
        session_cookie.write_cookie(token, max_age_seconds=int(users.SESSION_LIFETIME.total_seconds()))
    elif not token and session_cookie.token_from_cookie():
        session_cookie.write_cookie(None, max_age_seconds=0)


def local_time(moment: datetime | None) -> str:
    """HH:MM of a UTC moment in the reader's time zone (one rule: ui.times)."""
    from ui.times import local_time as reader_time

    return reader_time(moment)[-5:]


def _picked_value(value: object) -> bool:
    """A value a picker, text or number field holds (never a button's, an upload's or an editor's)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, str | int | float):
        return True
    return isinstance(value, list | tuple) and all(
        isinstance(item, str | int | float) and not isinstance(item, bool) for item in value
    )


def _redraw_pickers() -> None:
    """After a language switch, give every keyed picker its value again.

    The browser keeps the label a select box, radio or multiselect last showed ("待仲裁 3 条") even when
    the options come back in the new language; a value set through session state makes Streamlit send
    the widget its value with the new label. Buttons, uploads and editors (whose state cannot be set)
    hold other kinds of values and are left alone."""
    for key in list(st.session_state.keys()):
        if not isinstance(key, str) or key.startswith(("$$", "_")) or key in ("lang", "lang_choice"):
            continue
        value = st.session_state[key]
        if _picked_value(value):
            st.session_state[key] = value


def language_switch() -> None:
    choice = st.sidebar.radio(
        t("lang.label"),
        LANGUAGES,
        format_func=LANGUAGE_NAMES.get,
        index=LANGUAGES.index(lang()),
        horizontal=True,
        key="lang_choice",
    )
    with st.sidebar:
        chrome_language.speak_the_page_language(lang())
    if choice != lang():
        st.session_state["lang"] = choice
        _keep_language_in_url()
        _redraw_pickers()
        st.rerun()
    _keep_language_in_url()


def _open_disagreements(user: User) -> OpenDisagreements:
    # Kept figures (db.counts): read on every run, so every server process shows the same current count.
    with db_session(read_only=True) as session:
        return progress_queries.open_disagreements(session, user)


@st.cache_data(max_entries=MY_PROGRESS_CACHE_ENTRIES, show_spinner=False)
def _my_progress_of(username: str, version: DataVersion) -> dict:
    # Kept per data version: the same figures until anything changes (in any server process), new ones at
    # once after a save, an assignment or a rubric decision (each moves the version read from the database).
    with db_session(read_only=True) as session:
        user = users.get_user(session, username=username)
        if user is None:  # removed since the page read it: refused as an inactive account is
            raise PermissionDenied("account is not active", key="errors.account_inactive")
        return progress_queries.my_progress(session, user)


def my_progress(user: User) -> dict:
    """The annotator's queue figures (db.work.progress.my_progress), read again only after a change."""
    return _my_progress_of(user.username, data_version(engine()))


def forget_my_progress() -> None:
    """Drops the cached queue figures, for pages whose save changes them (a rubric submission)."""
    _my_progress_of.clear()


def progress_text(kind: str, done: int, total: int) -> str:
    """ "Labeling 23/30 (76.7%)": the words of a queue's progress, in the sidebar and on its page."""
    share = done / total if total else 0.0
    return t(f"workbench.progress.{kind}", done=f"{done:,}", total=f"{total:,}", share=f"{share:.1%}")


def work_summary(user: User) -> None:
    """The user's own figures: queue progress (annotators) or open disagreements (a checker's own; all for admins)."""
    if user.role == Role.annotator:
        mine = my_progress(user)
        # The labeling page shows the same figure under the same words (one definition: its queue).
        for kind in ("label", "rubric"):
            if mine[f"{kind}_assigned"]:
                done, total = mine[f"{kind}_done"], mine[f"{kind}_assigned"]
                st.progress(done / total, text=progress_text(kind, done, total))
        if mine.get("returned"):
            st.warning(t("workbench.returned_to_you", n=mine["returned"], comments=mine["returned_comments"]))
    else:
        # A checker's count covers the responses closed to them only (db.access.independence); the basis is said beside
        # it: decisions, and the responses holding them (the adjudication page counts both the same way).
        count = _open_disagreements(user)
        st.metric(t("sidebar.unresolved"), f"{count.decisions:,}")
        st.caption(
            t("sidebar.unresolved.responses", decisions=f"{count.decisions:,}", responses=f"{count.responses:,}")
            + " "
            + t("sidebar.unresolved.basis_checker" if user.role == Role.checker else "sidebar.unresolved.basis_admin")
        )


def sidebar(user: User) -> None:
    with st.sidebar:
        name = user.display_name or user.username
        role = t(f"role.{user.role}")
        group = t("group.name", group=user.group_no) if user.group_no else ""
        with st.container(border=True):
            # Names come from accounts the admin typed: escaped, never markup.
            st.markdown(f"**{t('sidebar.signed_in_as', name=plain(name))}**")
            st.caption(f"{role} · {group}" if group else role)
            work_summary(user)
    language_switch()
    if st.sidebar.button(t("logout"), key="logout", icon=":material/logout:"):
        if sign_out():
            st.stop()  # a rerun now would drop the redirect to the provider's end-session page
        st.rerun()
    with st.sidebar:
        keep_sign_in_cookie()


def login_page() -> None:
    language_switch()
    keep_sign_in_cookie()
    _, middle, _ = st.columns([1, 3, 1])
    with middle:
        _login_form()


def _provider_sign_in() -> None:
    if st.session_state.get("provider_sign_in_ended"):
        st.info(t("security.oidc.ended"))
    unlinked = st.session_state.get("unlinked_identity")
    if unlinked:
        st.warning(t("security.oidc.unlinked", identity=plain(unlinked)))
        if st.button(t("logout"), key="provider_logout"):
            st.session_state.pop("unlinked_identity", None)
            st.logout()
        return
    if st.button(t("security.oidc.sign_in"), key="provider_login", icon=":material/badge:"):
        st.session_state.pop("signed_out", None)
        st.session_state.pop("provider_sign_in_ended", None)
        st.login()


def _login_form() -> None:
    st.title(t("app.title"))
    st.caption(t("app.tagline"))
    if provider_configured():
        _provider_sign_in()
    with st.form("login", clear_on_submit=False):
        st.subheader(t("login.title"))
        username = st.text_input(t("login.username"), key="login_username")
        password = st.text_input(t("login.password"), type="password", key="login_password")
        submitted = st.form_submit_button(t("login.submit"), type="primary")
    if submitted:
        if not username or not password:
            st.warning(t("login.missing"))
            return
        try:
            signed_in = sign_in(username, password)
        except users.LoginThrottled as throttled:
            st.error(t("login.throttled", time=local_time(throttled.retry_at)))
            return
        if signed_in:
            st.rerun()
        st.error(t("login.failed"))
