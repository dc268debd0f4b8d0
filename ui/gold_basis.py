"""The gold basis a page's figures stand on (docs/REFERENCE.md §4.1): one toggle asks for provisional figures,
one caption says the basis and what the figures count. Final is the default; provisional only on request."""

from __future__ import annotations

import streamlit as st

from db.rules.gold import PROVISIONAL, default_basis
from ui import shell


def basis_toggle(t: shell.Translator, key: str) -> str:
    """The gold basis chosen on the page: the default basis (final unless configured), or provisional when the
    user turns on "show provisional figures"."""
    provisional = st.toggle(t("gold_basis.show_provisional"), key=key, help=t("gold_basis.show_provisional_help"))
    return PROVISIONAL if provisional else default_basis()


def counts_caption(t: shell.Translator, basis: str, counts: dict[str, int]) -> str:
    """One line: the basis (provisional marked 暂定 / provisional) and the responses the figures count —
    `counts` holds complete, final, provisional, checked1 and checked2 (responses)."""
    return t(f"gold_basis.counts.{basis}", **{name: f"{value:,}" for name, value in counts.items()})
