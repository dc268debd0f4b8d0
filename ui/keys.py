"""Widget keys that carry no database id: the browser sees a per-session random name instead.

Widget keys become element ids and class names (`st-key-…`) in the page. Response ids follow
import order, so a key such as `label_16_2` would let someone group responses by model; the
keys made here map the same server-side parts to the same random suffix for the whole browser
session (state survives reruns) and to a different one in every other session.
"""

from __future__ import annotations

import secrets

import streamlit as st

_STATE = "_opaque_widget_keys"


def widget_key(prefix: str, *parts: object) -> str:
    """`prefix` + a random suffix stable for `parts` within this browser session."""
    table = st.session_state.setdefault(_STATE, {})
    identity = (prefix, *map(str, parts))
    if identity not in table:
        table[identity] = secrets.token_hex(6)
    return f"{prefix}_{table[identity]}"
